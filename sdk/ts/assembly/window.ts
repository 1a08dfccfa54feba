// Windowed aggregation per key, the way Kafka Streams' windowed
// aggregations do it: tumbling, hopping and session windows, a grace
// period for out-of-order records, results emitted on every update, once
// per commit window, or once when the window closes, and late records
// counted and optionally sent to an output of their own. A port of the Go
// SDK's sdk/window, with the same keys and values in the store and in
// timers (abi/ABI.md section 9), so a processor can move between languages
// without losing its windows.
//
//     const counts = Windows.create(new WindowSpec("c", store, countAggregate, emitCount).tumbling(60_000).withGrace(5_000));
//     handle((r: Record): void => counts!.add(r));
//     onTimer((f: Firing): void => { counts!.onTimer(f); });
//
// Times are milliseconds since the Unix epoch, and windows follow event
// time: a record belongs to the windows of its timestamp, and a window
// [start, end) closes when the task's stream time reaches end + grace (an
// event-time timer). Everything lives in the spec's store under keys that
// start with the spec's name and a zero byte; timer and commit-mark keys
// start the same way, which is how onTimer and onCommit recognize theirs.
// A closed window's state is deleted.

import { Errno, MAX_KEY_SIZE } from "./abi";
import { failed, fail, takeError, lastError } from "./errors";
import { Output } from "./output";
import { Header, Record } from "./record";
import { Store } from "./store";
import { EVENT_TIME, Firing, Commit, setTimer, cancelTimer, streamTime, mark } from "./timer";
import { utf8, bytesEqual } from "./bytes";

/** When a window's result is emitted. */
export enum EmitMode {
  /** Once, when the window closes (stream time past its end plus grace), with its final aggregate: Kafka Streams' suppress(untilWindowCloses). */
  FINAL = 0,
  /** After every record that changes the window; nothing more when it closes. */
  UPDATE = 1,
  /** The latest aggregate of each window that changed, once per commit window (mark), and at its close if it changed since: Kafka Streams' record cache. At the host's commit-mark limit, at once instead. */
  ON_COMMIT = 2,
}

/** Added to a late record sent to the spec's lateOutput; its value is the spec's name. */
export const WINDOW_LATE_HEADER = "wasmstream-window-late";

/** The time span [start, end) of a window, in ms. A session's start is its first record's timestamp and its end one past its last. */
export class Window {
  constructor(public start: i64, public end: i64) {}
}

/** One window result. */
export class WindowResult {
  /** The record key the window belongs to (a null key is the empty key). */
  key: Uint8Array;
  /** The window's span. */
  window: Window;
  /** The aggregate; null retracts a session that a record merged into another (UPDATE and ON_COMMIT, once it was emitted). */
  agg: Uint8Array | null;
  /** The largest record timestamp in the window: the one to give the emitted record. */
  timestamp: i64;
  /** The window has closed: no other result for it follows. */
  final: bool;

  constructor(key: Uint8Array, window: Window, agg: Uint8Array | null, timestamp: i64, final: bool) {
    this.key = key;
    this.window = window;
    this.agg = agg;
    this.timestamp = timestamp;
    this.final = final;
  }
}

/**
 * Describes a set of windows: exactly one of size (tumbling or hopping
 * windows) and gap (session windows) is set.
 */
export class WindowSpec {
  /** Prefixes every state, timer and commit-mark key of these windows: required, no zero byte, short. */
  name: string;
  /** Holds the windows' state. */
  store: Store;
  /** Folds a record into a window's aggregate; acc is null for a new window. It may fail() the call. */
  aggregate: (acc: Uint8Array | null, r: Record) => Uint8Array;
  /** Receives every result to emit. */
  result: (res: WindowResult) => void;
  /** The length of a tumbling or hopping window, in ms. */
  size: i64 = 0;
  /** How far apart hopping windows start, in ms: 0 < advance <= size; 0 means size (tumbling). Windows start at multiples of advance since the epoch. */
  advance: i64 = 0;
  /** Session windows: a key's records at most gap ms apart belong to one session, which grows and merges as records come. */
  gap: i64 = 0;
  /** How long after a window's end it still accepts records, in ms of stream time. */
  grace: i64 = 0;
  /** When results are emitted. */
  emit: EmitMode = EmitMode.FINAL;
  /** Combines the aggregates of two sessions a record joins, the earlier first. Required for sessions. */
  merge: ((a: Uint8Array, b: Uint8Array) => Uint8Array) | null = null;
  /** Receives every late record as it came, with the header WINDOW_LATE_HEADER added. */
  lateOutput: Output | null = null;

  constructor(name: string, store: Store, aggregate: (acc: Uint8Array | null, r: Record) => Uint8Array, result: (res: WindowResult) => void) {
    this.name = name;
    this.store = store;
    this.aggregate = aggregate;
    this.result = result;
  }

  /** Tumbling windows of size ms. */
  tumbling(size: i64): WindowSpec {
    this.size = size;
    return this;
  }

  /** Hopping windows of size ms, starting every advance ms. */
  hopping(size: i64, advance: i64): WindowSpec {
    this.size = size;
    this.advance = advance;
    return this;
  }

  /** Session windows with an inactivity gap of gap ms, merged with merge. */
  sessions(gap: i64, merge: (a: Uint8Array, b: Uint8Array) => Uint8Array): WindowSpec {
    this.gap = gap;
    this.merge = merge;
    return this;
  }

  /** The grace period, in ms. */
  withGrace(grace: i64): WindowSpec {
    this.grace = grace;
    return this;
  }

  /** The emit mode. */
  emitting(mode: EmitMode): WindowSpec {
    this.emit = mode;
    return this;
  }

  /** Late records go to out too. */
  lateTo(out: Output): WindowSpec {
    this.lateOutput = out;
    return this;
  }
}

// Kinds of state key, after the prefix.
const TAG_WINDOW: u8 = 0x77; // 'w': a tumbling or hopping window
const TAG_SESSION: u8 = 0x73; // 's': a session
const TAG_COUNT: u8 = 0x63; // 'c': a counter

// Flags of a stored window.
const FLAG_DIRTY: u8 = 1; // changed since its result was last emitted (ON_COMMIT)
const FLAG_EMITTED: u8 = 2; // a result was emitted (ON_COMMIT; for retractions)

/** A stored window: flags u8, end i64, largest timestamp i64 (big-endian), then the aggregate. */
class Stored {
  flags: u8 = 0;
  end: i64 = 0;
  maxTS: i64 = 0;
  agg: Uint8Array | null = null;
}

const STORED_HEADER: i32 = 17;

/** A joined session of addSession. */
class Joined {
  constructor(public key: Uint8Array, public start: i64, public st: Stored) {}
}

/** Windows per key; create them with Windows.create (once, at the plugin's top level or in its onInit hook), call add for each record and onTimer and onCommit from the plugin's callbacks. */
export class Windows {
  private s: WindowSpec;
  private prefix: Uint8Array; // name + 0x00
  private late: Uint8Array; // the state key of the late-record count

  private constructor(s: WindowSpec) {
    this.s = s;
    const name = utf8(s.name);
    const prefix = new Uint8Array(name.length + 1);
    prefix.set(name);
    const late = new Uint8Array(prefix.length + 5);
    late.set(prefix);
    late.set(utf8("clate"), prefix.length); // TAG_COUNT, "late"
    this.prefix = prefix;
    this.late = late;
  }

  /** Checks spec and returns the windows it describes, or null after failing the call with what is wrong. */
  static create(spec: WindowSpec): Windows | null {
    const bad = spec.name.length == 0 ? "name is required"
      : spec.name.indexOf("\0") >= 0 ? "name may not contain a zero byte"
      : spec.grace < 0 ? "grace must not be negative"
      : <i32>spec.emit > <i32>EmitMode.ON_COMMIT ? "unknown emit mode " + (<i32>spec.emit).toString()
      : (spec.size > 0) == (spec.gap > 0) ? "set exactly one of size (tumbling, hopping) and gap (sessions), positive"
      : spec.size < 0 || spec.gap < 0 ? "size and gap must not be negative"
      : spec.gap > 0 && spec.advance != 0 ? "advance is for hopping windows, not sessions"
      : spec.gap > 0 && spec.merge === null ? "merge is required for session windows"
      : spec.advance < 0 || spec.advance > spec.size ? "advance must be in (0, size]"
      : "";
    if (bad.length > 0) {
      fail("window: \"" + spec.name + "\": " + bad);
      return null;
    }
    if (spec.size > 0 && spec.advance == 0) spec.advance = spec.size;
    return new Windows(spec);
  }

  /**
   * Adds a record to its key's windows and emits what the mode says. A
   * record whose windows have all closed is late: it is counted
   * (lateCount) and sent to lateOutput if there is one, and changes nothing
   * else. A record without a timestamp (negative) has no window and is
   * late too. A null key is the empty key.
   */
  add(r: Record): void {
    if (failed()) return;
    if (r.timestamp < 0) {
      this.lateRecord(r, r.key);
      return;
    }
    const k = r.key;
    const recKey = k === null ? new Uint8Array(0) : k; // results carry the empty key, as onTimer's do
    const now = streamTime();
    if (failed()) return;
    if (this.s.gap > 0) {
      this.addSession(r, recKey, now);
      return;
    }
    const ts = r.timestamp, size = this.s.size, adv = this.s.advance;
    let applied = false;
    // The windows of ts start at multiples of adv in (ts-size, ts], and not
    // before 0, as Kafka Streams' TimeWindows.windowsFor.
    const first = max<i64>(0, ts - size + adv) / adv * adv;
    for (let start = first; start <= ts; start += adv) {
      const end = start + size;
      if (end + this.s.grace <= now) continue; // closed: the record is late for this one
      applied = true;
      this.addToWindow(r, recKey, start, end);
      if (failed()) return;
    }
    if (!applied) this.lateRecord(r, recKey);
  }

  /** Folds r into the tumbling or hopping window [start, end). */
  private addToWindow(r: Record, recKey: Uint8Array, start: i64, end: i64): void {
    const key = this.stateKey(TAG_WINDOW, recKey, start);
    if (key === null) return;
    const v = this.s.store.get(key);
    if (failed()) return;
    let st = new Stored();
    st.end = end;
    st.maxTS = r.timestamp;
    if (v !== null) {
      const d = this.decode(key, v);
      if (d === null) return;
      st = d;
      st.maxTS = max(st.maxTS, r.timestamp);
    } else {
      setTimer(EVENT_TIME, end + this.s.grace, key);
      if (failed()) return;
    }
    st.agg = this.s.aggregate(st.agg, r);
    if (failed()) return;
    this.updated(key, recKey, start, st);
  }

  /** Stores a window that a record changed and emits per the mode. */
  private updated(key: Uint8Array, recKey: Uint8Array, start: i64, st: Stored): void {
    if (this.s.emit == EmitMode.UPDATE) {
      this.s.result(new WindowResult(recKey, new Window(start, st.end), st.agg, st.maxTS, false));
      if (failed()) return;
    } else if (this.s.emit == EmitMode.ON_COMMIT) {
      st.flags |= FLAG_DIRTY;
      mark(key);
      const e = lastError();
      if (e !== null) {
        if (e.errno != Errno.LIMIT) return;
        // Too many keys marked in this window: emit now instead.
        takeError();
        this.s.result(new WindowResult(recKey, new Window(start, st.end), st.agg, st.maxTS, false));
        if (failed()) return;
        st.flags = (st.flags & ~FLAG_DIRTY) | FLAG_EMITTED;
      }
    }
    this.put(key, st);
  }

  /** Adds r to its key's sessions: it joins every session it is within gap of, merging them. */
  private addSession(r: Record, recKey: Uint8Array, now: i64): void {
    const ts = r.timestamp, gap = this.s.gap;
    const full = this.stateKey(TAG_SESSION, recKey, 0);
    if (full === null) return;
    const prefix = full.slice(0, full.length - 8);
    const joined = new Array<Joined>();
    const it = this.s.store.scanPrefix(prefix);
    while (it.next()) {
      const start = fromSortable(it.key, prefix.length);
      const st = this.decode(it.key, it.value);
      if (st === null) {
        it.close();
        return;
      }
      // The session [start, end) takes records in [start-gap, end-1+gap].
      if (ts >= start - gap && ts <= st.end - 1 + gap) {
        const agg = st.agg;
        st.agg = agg === null ? null : agg.slice(0); // the iterator's buffer is reused
        joined.push(new Joined(it.key.slice(0), start, st));
      }
    }
    if (failed()) return;
    let start = ts, end = ts + 1, maxTS = ts;
    for (let i = 0; i < joined.length; i++) {
      const o = joined[i];
      start = min(start, o.start);
      end = max(end, o.st.end);
      maxTS = max(maxTS, o.st.maxTS);
    }
    if (end + gap + this.s.grace <= now) {
      this.lateRecord(r, recKey); // even merged, the session is closed
      return;
    }
    let agg: Uint8Array | null = null;
    let flags: u8 = 0;
    const merge = this.s.merge!;
    for (let i = 0; i < joined.length; i++) {
      const o = joined[i];
      if (i == 0) agg = o.st.agg;
      else {
        agg = merge(agg === null ? new Uint8Array(0) : agg, o.st.agg === null ? new Uint8Array(0) : o.st.agg!);
        if (failed()) return;
      }
      if (o.start == start) flags = o.st.flags & FLAG_EMITTED; // the same key keeps its history
    }
    agg = this.s.aggregate(agg, r);
    if (failed()) return;
    const key = this.stateKey(TAG_SESSION, recKey, start);
    if (key === null) return;
    for (let i = 0; i < joined.length; i++) {
      const o = joined[i];
      cancelTimer(EVENT_TIME, o.st.end + gap + this.s.grace, o.key);
      if (failed()) return;
      if (o.start == start) continue; // the same key: overwritten below
      this.s.store.delete(o.key);
      if (failed()) return;
      if (this.s.emit == EmitMode.UPDATE || (this.s.emit == EmitMode.ON_COMMIT && (o.st.flags & FLAG_EMITTED) != 0)) {
        this.s.result(new WindowResult(recKey, new Window(o.start, o.st.end), null, o.st.maxTS, false));
        if (failed()) return;
      }
    }
    setTimer(EVENT_TIME, end + gap + this.s.grace, key);
    if (failed()) return;
    const st = new Stored();
    st.flags = flags;
    st.end = end;
    st.maxTS = maxTS;
    st.agg = agg;
    this.updated(key, recKey, start, st);
  }

  /**
   * Handles the timers of these windows: closes the window the timer is
   * for, emitting its final result per the mode, and deletes its state.
   * Returns false, doing nothing, for a timer that is not one of these
   * windows' (another Windows', or the plugin's own).
   */
  onTimer(f: Firing): bool {
    if (f.kind != EVENT_TIME || !this.parse(f.key)) return false;
    const tag = parsedTag, recKey = parsedKey, start = parsedStart;
    const v = this.s.store.get(f.key);
    if (v === null) return true; // nothing left to close (or an error, which fails the call)
    const st = this.decode(f.key, v);
    if (st === null) return true;
    let closeAt = st.end + this.s.grace;
    if (tag == TAG_SESSION) closeAt += this.s.gap;
    if (closeAt != f.time) return true; // a timer of an earlier extent of the session
    if (this.s.emit == EmitMode.FINAL || (this.s.emit == EmitMode.ON_COMMIT && (st.flags & FLAG_DIRTY) != 0)) {
      this.s.result(new WindowResult(recKey, new Window(start, st.end), st.agg, st.maxTS, true));
      if (failed()) return true;
    }
    this.s.store.delete(f.key);
    return true;
  }

  /**
   * Handles the commit marks of these windows (ON_COMMIT): emits the
   * latest aggregate of a window that changed in the commit window.
   * Returns false for a key that is not one of these windows'.
   */
  onCommit(c: Commit): bool {
    if (!this.parse(c.key)) return false;
    const recKey = parsedKey, start = parsedStart;
    const v = this.s.store.get(c.key);
    if (v === null) return true; // closed (and emitted) or merged away since
    const st = this.decode(c.key, v);
    if (st === null || (st.flags & FLAG_DIRTY) == 0) return true;
    this.s.result(new WindowResult(recKey, new Window(start, st.end), st.agg, st.maxTS, false));
    if (failed()) return true;
    st.flags = (st.flags & ~FLAG_DIRTY) | FLAG_EMITTED;
    this.put(c.key, st);
    return true;
  }

  /** The number of late records these windows have seen in this task (kept in the store, so it survives restarts and moves). */
  lateCount(): u64 {
    const v = this.s.store.get(this.late);
    if (v === null) return 0;
    if (v.length != 8) {
      this.corrupt(this.late, "late count is not 8 bytes");
      return 0;
    }
    return bswap<u64>(load<u64>(v.dataStart));
  }

  private lateRecord(r: Record, key: Uint8Array | null): void {
    const n = this.lateCount();
    if (failed()) return;
    const b = new Uint8Array(8);
    store<u64>(b.dataStart, bswap<u64>(n + 1));
    this.s.store.put(this.late, b);
    const out = this.s.lateOutput;
    if (failed() || out === null) return;
    const hs = r.headers.slice(0);
    hs.push(new Header(WINDOW_LATE_HEADER, utf8(this.s.name)));
    out.emit(key, r.value, hs, r.timestamp);
  }

  /** prefix, tag, u32 key length, key, start (sortable): the state key of a window, and its timer and commit-mark key; null after failing the call. */
  private stateKey(tag: u8, recKey: Uint8Array, start: i64): Uint8Array | null {
    const n = this.prefix.length + 1 + 4 + recKey.length + 8;
    if (n > MAX_KEY_SIZE) {
      fail("window: \"" + this.s.name + "\": a record key of " + recKey.length.toString() + " bytes makes a window key over " +
        MAX_KEY_SIZE.toString() + " bytes");
      return null;
    }
    const k = new Uint8Array(n);
    k.set(this.prefix);
    let p = this.prefix.length;
    k[p] = tag;
    store<u32>(k.dataStart + <usize>p + 1, bswap<u32>(<u32>recKey.length));
    k.set(recKey, p + 5);
    store<u64>(k.dataStart + <usize>(p + 5 + recKey.length), bswap<u64>(<u64>start ^ (<u64>1 << 63)));
    return k;
  }

  /** Splits a key made by stateKey into parsedTag, parsedKey, parsedStart; false for any other key. */
  private parse(k: Uint8Array): bool {
    const p = this.prefix.length;
    if (k.length < p + 1 + 4 + 8 || !bytesEqual(k.subarray(0, p), this.prefix)) return false;
    const tag = k[p];
    if (tag != TAG_WINDOW && tag != TAG_SESSION) return false;
    const n = <i32>bswap<u32>(load<u32>(k.dataStart + <usize>p + 1));
    if (n < 0 || k.length != p + 1 + 4 + n + 8) return false;
    parsedTag = tag;
    parsedKey = k.subarray(p + 5, p + 5 + n);
    parsedStart = fromSortable(k, p + 5 + n);
    return true;
  }

  private decode(key: Uint8Array, v: Uint8Array): Stored | null {
    if (v.length < STORED_HEADER) {
      this.corrupt(key, "window value of " + v.length.toString() + " bytes");
      return null;
    }
    const st = new Stored();
    st.flags = v[0];
    st.end = <i64>bswap<u64>(load<u64>(v.dataStart + 1));
    st.maxTS = <i64>bswap<u64>(load<u64>(v.dataStart + 9));
    st.agg = v.subarray(STORED_HEADER);
    return st;
  }

  private put(key: Uint8Array, st: Stored): void {
    const agg = st.agg;
    const al = agg === null ? 0 : agg.length;
    const v = new Uint8Array(STORED_HEADER + al);
    v[0] = st.flags;
    store<u64>(v.dataStart + 1, bswap<u64>(<u64>st.end));
    store<u64>(v.dataStart + 9, bswap<u64>(<u64>st.maxTS));
    if (agg !== null) v.set(agg!, STORED_HEADER);
    this.s.store.put(key, v);
  }

  private corrupt(key: Uint8Array, why: string): void {
    fail("window: \"" + this.s.name + "\": store \"" + this.s.store.name + "\" key " + quote(key) + ": " + why);
  }
}

let parsedTag: u8 = 0;
let parsedKey: Uint8Array = new Uint8Array(0);
let parsedStart: i64 = 0;

function fromSortable(b: Uint8Array, off: i32): i64 {
  return <i64>(bswap<u64>(load<u64>(b.dataStart + <usize>off)) ^ (<u64>1 << 63));
}

/** key as a quoted string for messages: printable ASCII as it is, other bytes as \xNN. */
export function quote(key: Uint8Array): string {
  let s = "\"";
  for (let i = 0; i < key.length; i++) {
    const c = key[i];
    if (c == 0x22 || c == 0x5c) s += "\\" + String.fromCharCode(c);
    else if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c);
    else s += "\\x" + (c < 16 ? "0" : "") + c.toString(16);
  }
  return s + "\"";
}

/** An aggregate that counts records: an 8-byte big-endian count. */
export function countAggregate(acc: Uint8Array | null, r: Record): Uint8Array {
  const n = countOf(acc);
  const b = new Uint8Array(8);
  store<u64>(b.dataStart, bswap<u64>(n + 1));
  return b;
}

/** The merge of countAggregate: the sum. */
export function mergeCounts(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(8);
  store<u64>(out.dataStart, bswap<u64>(countOf(a) + countOf(b)));
  return out;
}

/** Decodes a countAggregate aggregate (null is 0); a malformed one fails the call and reads 0. */
export function countOf(agg: Uint8Array | null): u64 {
  if (agg === null) return 0;
  if (agg.length == 8) return bswap<u64>(load<u64>(agg.dataStart));
  fail("window: a count aggregate of " + agg.length.toString() + " bytes, want 8");
  return 0;
}
