// The state of the instance and of the call in progress. A Wasm instance
// is single-threaded and calls into the SDK one export at a time.

/** The input buffer the host writes records, triggers and batches into (wasmstream_input). */
export let inputBuf: ArrayBuffer = new ArrayBuffer(0);

/** Where the record in progress starts in inputBuf, and its length; 0 when no record is in progress (init, callbacks). */
export let curOff: i32 = 0;
export let curLen: i32 = 0;

/** The timestamp an emit that leaves it 0 gets: the record's, or the trigger's in a callback. */
export let callTimestamp: i64 = 0;

/**
 * Set once the instance has started (wasmstream_init succeeded): outputs
 * and stores made before are resolved at the start (declare.ts).
 */
export let started: bool = false;

// Input buffer sizing, in bytes.
/** The smallest input buffer: larger than the host's first request (4096) so typical records fit at once. */
const MIN_INPUT: u32 = 64 << 10;
/** The largest record the SDK accepts; larger requests get 0 ("cannot"), which the host reports. */
const MAX_INPUT: u32 = 256 << 20;

/**
 * The body of wasmstream_input: the address of a buffer of at least size
 * bytes, kept until the next call, or 0. It at least doubles when it grows,
 * so growing records reallocate O(log n) times. The old buffer is left to
 * the garbage collector (a view a plugin kept still points into it).
 */
export function input(size: u32): usize {
  if (size > MAX_INPUT) return 0;
  const have = <u32>inputBuf.byteLength;
  if (size > have) {
    let n = max(size, MIN_INPUT);
    n = max(n, min(have * 2, MAX_INPUT));
    inputBuf = new ArrayBuffer(<i32>n);
  }
  return changetype<usize>(inputBuf);
}

/** The address of inputBuf's first byte. */
// @ts-ignore: decorator
@inline
export function inputPtr(): usize {
  return changetype<usize>(inputBuf);
}
