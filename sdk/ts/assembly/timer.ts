// Time (ABI.md section 8): timers that call the plugin back when the
// task's stream time or the host's wall clock reaches them, the two clocks,
// and commit marks that call it once per commit window per marked key.
//
// A plugin that uses timers or marks exports the two callbacks by adding
//
//     export * from "./wasmstream-sdk/time-exports";
//
// to its entry file (the host refuses a module that imports timer_set
// without exporting wasmstream_on_timer), and registers its callbacks with
// onTimer and onCommit at its top level.

import { Errno, NO_TIME, MAX_TIMER_KEY_SIZE, TRIGGER_HEADER_SIZE } from "./abi";
import { inputBuf } from "./call";
import { hostFail, sdkFail } from "./errors";
import { host_timer_set, host_timer_cancel, host_time_now, host_commit_mark } from "./host";
import { ptrOf, lenOf } from "./bytes";

/** A timer on event time: due when the task's stream time (the largest record timestamp it has seen) reaches it. */
export const EVENT_TIME: u32 = 0;
/** A timer on processing time: due when the host's wall clock reaches it (at a commit point at the latest). */
export const PROCESSING_TIME: u32 = 1;
/** The kind of a commit trigger (Commit), after the two timer kinds. */
export const COMMIT: u32 = 2;

/** The stream time of a task that has not seen a record with a timestamp; below every time. */
export { NO_TIME };

/**
 * Sets the timer (kind, ts, key): ts in milliseconds since the Unix epoch,
 * key any bytes up to MAX_TIMER_KEY_SIZE (null is the empty key). Returns
 * whether the timer is new (false: it was pending already). On an error
 * (INVAL: bad kind or negative ts; TOOLARGE: key; LIMIT: the task's
 * pending-timer limit; PHASE: during init) it returns false and the call
 * fails (takeError to handle it). Like state writes, the change stands only
 * if the call succeeds.
 */
export function setTimer(kind: u32, ts: i64, key: Uint8Array | null): bool {
  const r = host_timer_set(kind, ts, ptrOf(key), lenOf(key));
  if (r < 0) {
    hostFail("timer_set", "", <Errno>-r);
    return false;
  }
  return r == 1;
}

/** Removes the timer (kind, ts, key) and reports whether it was pending. */
export function cancelTimer(kind: u32, ts: i64, key: Uint8Array | null): bool {
  const r = host_timer_cancel(kind, ts, ptrOf(key), lenOf(key));
  if (r < 0) {
    hostFail("timer_cancel", "", <Errno>-r);
    return false;
  }
  return r == 1;
}

/**
 * The task's stream time as the call sees it (including the record being
 * processed), in milliseconds since the Unix epoch, or NO_TIME. A record
 * processed again after an abort sees the same stream time. On an error
 * (PHASE during init) it returns NO_TIME and the call fails.
 */
export function streamTime(): i64 {
  return now(0);
}

/**
 * The host's wall clock for the call, in milliseconds since the Unix
 * epoch. Unlike everything else a plugin sees it is not reproducible: a
 * record processed again sees the time of its new processing. On an error
 * it returns NO_TIME and the call fails.
 */
export function wallTime(): i64 {
  return now(1);
}

function now(clock: u32): i64 {
  const t = host_time_now(clock);
  // Times are >= 0 and NO_TIME is -2^63; a small negative is -errno.
  if (t < 0 && t != NO_TIME && t >= -(<i64>1 << 31)) {
    hostFail("time_now", "", <Errno>(-<i32>t));
    return NO_TIME;
  }
  return t;
}

/**
 * Asks for one onCommit call for key at the end of the current commit
 * window, however often it is marked in the window, and reports whether
 * the key is newly marked. The host hands onCommit the timestamp of the
 * call that marked the key last. On an error (LIMIT: too many keys marked
 * in this window, emit now instead; TOOLARGE; PHASE: during init and in
 * onCommit) it returns false and the call fails (takeError to handle it).
 */
export function mark(key: Uint8Array | null): bool {
  const r = host_commit_mark(ptrOf(key), lenOf(key));
  if (r < 0) {
    hostFail("commit_mark", "", <Errno>-r);
    return false;
  }
  return r == 1;
}

/** A due timer. */
export class Firing {
  /** EVENT_TIME or PROCESSING_TIME. */
  kind: u32 = 0;
  /** The timer's time; emits that leave their timestamp 0 get it. */
  time: i64 = 0;
  /** The timer's key: a view of the SDK's input buffer, valid during the callback. */
  key: Uint8Array = new Uint8Array(0);
  /** The clocks as this call sees them (streamTime(), wallTime()). */
  streamTime: i64 = 0;
  wallTime: i64 = 0;
}

/** A key marked in the commit window that is ending. */
export class Commit {
  /** The marked key: a view of the SDK's input buffer, valid during the callback. */
  key: Uint8Array = new Uint8Array(0);
  /** The timestamp of the call that marked the key last; emits that leave their timestamp 0 get it. */
  timestamp: i64 = 0;
  streamTime: i64 = 0;
  wallTime: i64 = 0;
}

let timerFn: ((f: Firing) => void) | null = null;
let commitFn: ((c: Commit) => void) | null = null;

/**
 * Registers fn as the timer callback: the host calls it once per due
 * timer, in order of time, kind (event time first) and key. It may emit,
 * use state, set and cancel timers and mark, as a record handler may; a
 * failure fails the firing, which the host treats like a failed record.
 * Call it at the plugin's top level; a later call replaces the callback.
 */
export function onTimer(fn: (f: Firing) => void): void {
  timerFn = fn;
}

/**
 * Registers fn as the commit callback: the host calls it at each commit
 * point, before the commit, once per key marked in the window, in key
 * byte order. Its emits and state writes commit with the window. It may
 * not mark. A later call replaces the callback.
 */
export function onCommit(fn: (c: Commit) => void): void {
  commitFn = fn;
}

/** A trigger (ABI.md section 8.4) read from the input buffer. */
export class Trigger {
  timestamp: i64 = 0;
  streamTime: i64 = 0;
  wallTime: i64 = 0;
  kind: u32 = 0;
  key: Uint8Array = new Uint8Array(0);
}

/** Reads the trigger of len bytes at off in the input buffer into t and reports whether it is well formed (abi.Trigger.Decode's checks). */
export function decodeTrigger(off: i32, len: i32, t: Trigger): bool {
  if (len < TRIGGER_HEADER_SIZE || off < 0 || <i64>off + <i64>len > <i64>inputBuf.byteLength) return false;
  const at = changetype<usize>(inputBuf) + <usize>off;
  const kind = load<u32>(at, 24);
  const kl = load<u32>(at, 28);
  if (kind > COMMIT || kl > <u32>MAX_TIMER_KEY_SIZE || <i64>kl + <i64>TRIGGER_HEADER_SIZE != <i64>len) return false;
  t.timestamp = load<i64>(at, 0);
  t.streamTime = load<i64>(at, 8);
  t.wallTime = load<i64>(at, 16);
  t.kind = kind;
  t.key = Uint8Array.wrap(inputBuf, off + TRIGGER_HEADER_SIZE, <i32>kl);
  return true;
}

const firing = new Firing();
const commit = new Commit();

/**
 * Runs the callback of a decoded trigger (the body of wasmstream_on_timer
 * and wasmstream_on_commit, and of a batch's trigger slots): wantCommit
 * says which export it came through (-1: a batch, either).
 */
export function runTrigger(t: Trigger, wantCommit: i32): void {
  const isCommit = t.kind == COMMIT;
  if (wantCommit >= 0 && isCommit != (wantCommit == 1)) {
    sdkFail("sdk/timer: " + (wantCommit == 1 ? "on_commit" : "on_timer") + " called with a " + kindName(t.kind) + " trigger");
    return;
  }
  if (isCommit) {
    const fn = commitFn;
    if (fn === null) {
      sdkFail("sdk/timer: a marked key reached its commit point but no handler is registered: call onCommit at the plugin's top level");
      return;
    }
    commit.key = t.key;
    commit.timestamp = t.timestamp;
    commit.streamTime = t.streamTime;
    commit.wallTime = t.wallTime;
    fn(commit);
    return;
  }
  const fn = timerFn;
  if (fn === null) {
    sdkFail("sdk/timer: a timer fired but no handler is registered: call onTimer at the plugin's top level");
    return;
  }
  firing.kind = t.kind;
  firing.time = t.timestamp;
  firing.key = t.key;
  firing.streamTime = t.streamTime;
  firing.wallTime = t.wallTime;
  fn(firing);
}

/** The name of a timer or trigger kind, as abi.TimerKind prints it: "event", "processing", "commit". */
export function kindName(kind: u32): string {
  if (kind == EVENT_TIME) return "event";
  if (kind == PROCESSING_TIME) return "processing";
  if (kind == COMMIT) return "commit";
  return "kind(" + kind.toString() + ")";
}
