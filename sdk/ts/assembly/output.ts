// Outputs and emits, one at a time (the emit import) or staged in the
// batch's arena (ABI.md section 10).

import { Errno, HEADER_SIZE, MAX_RECORD_SIZE } from "./abi";
import { inputBuf, curOff, curLen, callTimestamp } from "./call";
import { Handle } from "./declare";
import { hostFail } from "./errors";
import { host_emit } from "./host";
import { Header, Record } from "./record";

/** Kafka's default partitioner: the host picks the partition by key hash. */
export const ANY_PARTITION: i32 = -1;

/**
 * A named output of the processor, declared in the host's processor config
 * (outputs: name -> topic). Make outputs once, at the plugin's top level or
 * in its onInit hook: they are resolved when the instance starts.
 */
export class Output extends Handle {
  constructor(name: string) {
    super(name, false);
  }

  /**
   * Emits a record to this output; the host picks the partition by key
   * hash. null is null (a null value is a tombstone); a timestamp of 0 is
   * the timestamp of the call (the record's, or the trigger's in a timer or
   * commit callback). The record is staged: it is produced only if the call
   * succeeds. Returns Errno.OK or the errno (TOOLARGE: the encoded record is
   * over MAX_RECORD_SIZE; NONAME: undeclared; PHASE: during init), which
   * also fails the call.
   */
  emit(key: Uint8Array | null, value: Uint8Array | null, headers: Array<Header> | null = null, timestamp: i64 = 0): Errno {
    return emitRecord(this, ANY_PARTITION, key, value, headers, timestamp);
  }

  /** emit to an explicit partition of the output topic (a partition it does not have fails the call when the host produces it). */
  emitTo(partition: i32, key: Uint8Array | null, value: Uint8Array | null, headers: Array<Header> | null = null, timestamp: i64 = 0): Errno {
    return emitRecord(this, partition, key, value, headers, timestamp);
  }

  /**
   * Emits the input record r as it came (key, value, headers, timestamp);
   * the host picks the partition by key. For the record being processed it
   * is the cheapest emit: the SDK hands the host its own input bytes with
   * the fields an emit sets rewritten, without encoding or copying.
   */
  forward(r: Record): Errno {
    // There is one record in progress, and curLen is 0 when there is none
    // (a callback, init): then r is encoded like any emit.
    const n = curLen;
    if (n == 0) return emitRecord(this, ANY_PARTITION, r.key, r.value, r.headerCount > 0 ? r.headers : null, r.timestamp);
    let idx = this.idx;
    if (idx < 0) {
      idx = this.index();
      if (idx < 0) return <Errno>-idx;
    }
    if (n > MAX_RECORD_SIZE) return tooLarge(this);
    if (forwarded) materialize();
    const at = changetype<usize>(inputBuf) + <usize>curOff;
    store<i64>(at, -1, 8); // offset
    store<i32>(at, ANY_PARTITION, 16);
    store<i32>(at, idx, 20);
    if (batching) {
      if (!staged) {
        // The call's first emit: its run is the slot's length field and
        // the record after it, in place.
        forwarded = true;
        staged = true;
        return Errno.OK;
      }
      stage(at, n);
      return Errno.OK;
    }
    const res = host_emit(at, <u32>n);
    if (res < 0) {
      hostFail("emit", this.name, <Errno>-res);
      return <Errno>-res;
    }
    return Errno.OK;
  }
}

function tooLarge(o: Output): Errno {
  hostFail("emit", o.name, Errno.TOOLARGE);
  return Errno.TOOLARGE;
}

// The encoding of an emit when it is not staged; reused.
let emitBuf: usize = 0;
let emitCap: i32 = 0;

function emitRecord(o: Output, partition: i32, key: Uint8Array | null, value: Uint8Array | null, headers: Array<Header> | null, ts: i64): Errno {
  const idx = o.index();
  if (idx < 0) return <Errno>-idx;
  // Checked here rather than left to the host, so that an oversized
  // record neither grows the buffers for good nor crosses into the host,
  // and so that a staged one gets its errno too.
  const size = encodedSize(key, value, headers);
  if (size > <i64>MAX_RECORD_SIZE) return tooLarge(o);
  const n = <i32>size;
  if (ts == 0) ts = callTimestamp;
  if (batching) {
    if (forwarded) materialize();
    const dst = reserve(4 + n);
    store<u32>(dst, <u32>n);
    encode(dst + 4, key, value, headers, ts, partition, idx);
    staged = true;
    return Errno.OK;
  }
  if (n > emitCap) {
    if (emitBuf != 0) heap.free(emitBuf);
    emitCap = max(n, 1024);
    emitBuf = heap.alloc(<usize>emitCap);
  }
  encode(emitBuf, key, value, headers, ts, partition, idx);
  const res = host_emit(emitBuf, <u32>n);
  if (res < 0) {
    hostFail("emit", o.name, <Errno>-res);
    return <Errno>-res;
  }
  return Errno.OK;
}

/** The size of a record's layout (ABI.md section 5). */
function encodedSize(key: Uint8Array | null, value: Uint8Array | null, headers: Array<Header> | null): i64 {
  let n = <i64>HEADER_SIZE;
  if (key !== null) n += key.length;
  if (value !== null) n += value.length;
  if (headers !== null) {
    for (let i = 0; i < headers.length; i++) {
      const h = headers[i];
      n += 8 + <i64>h.nameBytes.length;
      const v = h.value;
      if (v !== null) n += v.length;
    }
  }
  return n;
}

/** Writes the record's layout at dst (encodedSize bytes). */
function encode(dst: usize, key: Uint8Array | null, value: Uint8Array | null, headers: Array<Header> | null, ts: i64, partition: i32, idx: i32): void {
  store<i64>(dst, ts, 0);
  store<i64>(dst, -1, 8);
  store<i32>(dst, partition, 16);
  store<i32>(dst, idx, 20);
  store<i32>(dst, key === null ? -1 : key.length, 24);
  store<i32>(dst, value === null ? -1 : value.length, 28);
  store<u32>(dst, headers === null ? 0 : <u32>headers.length, 32);
  let p = dst + <usize>HEADER_SIZE;
  if (key !== null) {
    memory.copy(p, key.dataStart, <usize>key.length);
    p += <usize>key.length;
  }
  if (value !== null) {
    memory.copy(p, value.dataStart, <usize>value.length);
    p += <usize>value.length;
  }
  if (headers !== null) {
    for (let i = 0; i < headers.length; i++) {
      const h = headers[i];
      const name = h.nameBytes;
      const v = h.value;
      store<i32>(p, name.length);
      store<i32>(p, v === null ? -1 : v.length, 4);
      p += 8;
      memory.copy(p, name.dataStart, <usize>name.length);
      p += <usize>name.length;
      if (v !== null) {
        memory.copy(p, v.dataStart, <usize>v.length);
        p += <usize>v.length;
      }
    }
  }
}

// ---- batches (ABI.md section 10) ----
//
// While a batch runs, emits are staged in an arena of plugin memory as
// runs of emit entries (u32 length, then the record), one run per call,
// which the host reads when it ends the call. The arena never moves while
// the batch runs: a call whose emits outgrow it moves its run to a larger
// chunk, and the older chunks are freed when the next batch starts (the
// host has read every run by then).

/** The first arena chunk, in bytes. */
const MIN_ARENA: i32 = 64 << 10;
/** Past this many staged bytes the batch returns after the current call, so the host takes them (and hands the rest again). */
export const ARENA_HAND_OVER: i32 = 1 << 20;

/** Set while wasmstream_batch runs: emits are staged. */
export let batching: bool = false;
/** The current call's only emit so far is its input record, forwarded in place. */
export let forwarded: bool = false;
/** The current call has emitted. */
let staged: bool = false;

let arena: usize = 0;
let arenaCap: i32 = 0;
let arenaLen: i32 = 0;
/** Where the current call's run starts in the arena. */
let callStart: i32 = 0;
/** Older chunks, holding the runs of earlier calls of the batch. */
const arenaOld = new Array<usize>();

/** Starts a batch: the previous batch's chunks are free. */
export function startBatch(): void {
  for (let i = 0; i < arenaOld.length; i++) heap.free(arenaOld[i]);
  arenaOld.length = 0;
  arenaLen = 0;
  batching = true;
}

/** Ends a batch (its arena stays until the next one starts). */
export function endBatch(): void {
  batching = false;
  forwarded = false;
}

/** Starts a call of the batch. */
export function startSlotCall(): void {
  callStart = arenaLen;
  forwarded = false;
  staged = false;
}

/** Drops the staged emits of the current call (it failed). */
export function dropSlotCall(): void {
  arenaLen = callStart;
  forwarded = false;
}

/** The address of the current call's run (0: none), unless it was forwarded in place. */
export function slotRunPtr(): usize {
  return arenaLen > callStart ? arena + <usize>callStart : 0;
}

/** The length of the current call's run. */
export function slotRunLen(): i32 {
  return arenaLen - callStart;
}

/** The bytes staged in the arena so far in this batch. */
export function stagedBytes(): i32 {
  return arenaLen;
}

/** Copies the record at src (n bytes) into the current call's run, as one emit entry. */
function stage(src: usize, n: i32): void {
  const dst = reserve(4 + n);
  store<u32>(dst, <u32>n);
  memory.copy(dst + 4, src, <usize>n);
}

/** Copies the forwarded input record into the arena, where the call's next emits follow it. */
function materialize(): void {
  forwarded = false;
  stage(changetype<usize>(inputBuf) + <usize>curOff, curLen);
}

/** n bytes at the end of the current call's run, moving the run to a larger chunk when the arena is full. */
function reserve(n: i32): usize {
  if (arenaLen + n > arenaCap) {
    const run = arenaLen - callStart;
    const cap = max(max(arenaCap * 2, run + n), MIN_ARENA);
    const next = heap.alloc(<usize>cap);
    if (run > 0) memory.copy(next, arena + <usize>callStart, <usize>run);
    if (arena != 0) {
      if (callStart > 0) arenaOld.push(arena); // earlier calls' runs are there
      else heap.free(arena);
    }
    arena = next;
    arenaCap = cap;
    arenaLen = run;
    callStart = 0;
  }
  const at = arena + <usize>arenaLen;
  arenaLen += n;
  return at;
}

/** The run of a call forwarded in place: the slot's length field (the 4 bytes before the payload, abi/batch.go's SlotLen) and the record after it. */
export function forwardedRunPtr(): usize {
  return changetype<usize>(inputBuf) + <usize>curOff - 4;
}
