// The bodies of the ABI's exports (exports.ts and time-exports.ts export
// them): the calling order of ABI.md section 3, single calls and batches
// (section 10).

import {
  STATUS_OK, BATCH_HEADER_SIZE, BATCH_COUNT, BATCH_DONE, BATCH_STOP, SLOT_HEADER_SIZE,
  SLOT_KIND, SLOT_STATUS, SLOT_OUT_PTR, SLOT_OUT_LEN, SLOT_LEN, SLOT_RECORD,
} from "./abi";
import { inputBuf, curOff, curLen, callTimestamp, started } from "./call";
import { resolveDeclared } from "./declare";
import { fail, failed, sdkFail, resetFailure, finishStatus } from "./errors";
import { Record, decodeRecord, recordTimestamp } from "./record";
import {
  forwarded, startBatch, endBatch, startSlotCall, slotRunPtr, slotRunLen, stagedBytes, ARENA_HAND_OVER,
} from "./output";
import { Trigger, decodeTrigger, runTrigger } from "./timer";

let handler: ((r: Record) => void) | null = null;
let initHook: (() => void) | null = null;

/**
 * Registers fn as the processor: the host calls it once per input record.
 * Call it at the plugin's top level (which runs when the instance starts);
 * a later call replaces the handler. The record fails if fn calls fail()
 * or an SDK call fails (and the plugin does not takeError); otherwise its
 * emits and state writes stand.
 */
export function handle(fn: (r: Record) => void): void {
  handler = fn;
}

/**
 * Registers fn to run once per instance, before the first record (the
 * wasmstream_init export): the place to read and check config(), so that a
 * bad deployment fails at start with a clear message. Emitting and state
 * are not allowed there (Errno.PHASE). Outputs and stores made at the top
 * level or in fn are resolved at start. A later call replaces the hook.
 */
export function onInit(fn: () => void): void {
  initHook = fn;
}

/** The Record every handler call gets: its getters read the record in progress (record.ts). */
const cur = new Record();

/** The body of wasmstream_init. */
export function init(): i32 {
  // A failure of the plugin's top level (it ran in _initialize) fails the
  // start here: it is kept.
  if (handler === null) {
    fail("sdk: no handler: call handle() at the plugin's top level");
    return finishStatus();
  }
  // The top level's handles first, so that a hook that checks one does not
  // fail first with a message about that one alone; then the hook's.
  let msg = resolveDeclared();
  if (msg.length > 0) fail(msg);
  const hook = initHook;
  if (!failed() && hook !== null) {
    hook();
    if (!failed()) {
      msg = resolveDeclared();
      if (msg.length > 0) fail(msg);
    }
  }
  const st = finishStatus();
  if (st == STATUS_OK) started = true;
  return st;
}

/** The body of wasmstream_process: the record of len bytes at the start of the input buffer. */
export function process(len: u32): i32 {
  resetFailure();
  runRecord(0, <i32>min(len, <u32>i32.MAX_VALUE));
  return finishStatus();
}

/** Runs the handler on the record of len bytes at off in the input buffer. */
function runRecord(off: i32, len: i32): void {
  const h = handler;
  if (h === null) {
    sdkFail("sdk: no handler: call handle() at the plugin's top level");
    return;
  }
  if (!decodeRecord(off, len)) {
    sdkFail("sdk: input record: abi: malformed record");
    return;
  }
  curOff = off;
  curLen = len;
  callTimestamp = recordTimestamp();
  h(cur);
  curLen = 0;
}

const trigger = new Trigger();

/** The body of wasmstream_on_timer (commit 0) and wasmstream_on_commit (commit 1). */
export function callback(len: u32, commit: i32): i32 {
  resetFailure();
  runTriggerAt(0, <i32>min(len, <u32>i32.MAX_VALUE), commit);
  return finishStatus();
}

function runTriggerAt(off: i32, len: i32, commit: i32): void {
  if (!decodeTrigger(off, len, trigger)) {
    sdkFail("sdk/timer: trigger: abi: malformed record");
    return;
  }
  curLen = 0;
  callTimestamp = trigger.timestamp;
  runTrigger(trigger, commit);
}

/**
 * The body of wasmstream_batch: n bytes of calls in the input buffer (a
 * header, then the slots). Each call runs as a single call would, its
 * emits staged (output.ts); its results are written into its slot, and
 * then the done count. It returns 0 after the last call, after a call that
 * failed, after a call once the host asked it to stop, or once the staged
 * emits pass ARENA_HAND_OVER (the host hands the rest again); 1 for a
 * batch it cannot read.
 */
export function batch(n: u32): i32 {
  const base = changetype<usize>(inputBuf);
  if (<i64>n > <i64>inputBuf.byteLength || n < <u32>BATCH_HEADER_SIZE) return 1;
  const size = <i64>n;
  const count = load<u32>(base + <usize>BATCH_COUNT);
  startBatch();
  let off = <i64>BATCH_HEADER_SIZE;
  for (let k: u32 = 0; k < count; k++) {
    if (size - off < <i64>SLOT_HEADER_SIZE) break; // the host sees the call unfinished, and fails it
    const slot = base + <usize>off;
    const plen = <i64>load<u32>(slot + <usize>SLOT_LEN);
    if (plen > size - off - <i64>SLOT_HEADER_SIZE) break;
    startSlotCall();
    resetFailure();
    const payload = <i32>(off + <i64>SLOT_HEADER_SIZE);
    if (load<u32>(slot + <usize>SLOT_KIND) != SLOT_RECORD) runTriggerAt(payload, <i32>plen, -1);
    else runRecord(payload, <i32>plen);
    const st = finishStatus();
    // The call's results, then the done count.
    store<u32>(slot + <usize>SLOT_STATUS, <u32>st);
    let ptr: usize = 0;
    let len: u32 = 0;
    if (forwarded) {
      ptr = slot + <usize>SLOT_LEN; // the length field and the record after it, in place
      len = 4 + <u32>plen;
    } else if (slotRunLen() > 0) {
      ptr = slotRunPtr();
      len = <u32>slotRunLen();
    }
    store<u32>(slot + <usize>SLOT_OUT_PTR, <u32>ptr);
    store<u32>(slot + <usize>SLOT_OUT_LEN, len);
    store<u32>(base + <usize>BATCH_DONE, k + 1);
    if (st != STATUS_OK || load<u32>(base + <usize>BATCH_STOP) != 0 || stagedBytes() > ARENA_HAND_OVER) break;
    off += (<i64>SLOT_HEADER_SIZE + plen + 7) & ~7;
  }
  endBatch();
  return 0;
}
