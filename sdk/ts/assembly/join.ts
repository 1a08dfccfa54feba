// Stream-stream joins of two inputs of one task by key within a time
// window, the way Kafka Streams' KStream#join, #leftJoin and #outerJoin
// with JoinWindows do: inner, left and outer joins, a grace period, and
// late records counted and optionally sent to an output of their own. A
// port of the Go SDK's sdk/join with the same keys and values in the store
// and in timers (abi/ABI.md section 9).
//
// A left record at time t joins every right record of its key with a
// timestamp in [t-before, t+after], whichever comes first: each matching
// pair is emitted once, when the second of the two is processed, with the
// larger of the two timestamps. A record more than grace behind the task's
// stream time is late: counted (lateCount), sent to lateOutput if there is
// one, and joins nothing. A left join also emits every left record that
// found no match, with a null right, once no match can come any more (the
// stream time past t+after+grace); an outer join does the same for
// unmatched right records (t+before+grace).
//
// Each record is buffered in the spec's store until no record that is not
// late could join it any more, then deleted by an event-time timer. Keys
// start with the spec's name and a zero byte; timer keys are the buffered
// records' keys, which is how onTimer recognizes its own. The buffer keeps
// each record's key, value and timestamp, not its headers.

import { MAX_KEY_SIZE, NO_TIME } from "./abi";
import { failed, fail } from "./errors";
import { Output } from "./output";
import { Header, Record } from "./record";
import { Store } from "./store";
import { EVENT_TIME, Firing, setTimer, streamTime } from "./timer";
import { utf8, bytesEqual, prefixEnd } from "./bytes";
import { quote } from "./window";

/** Which unmatched records a join emits. */
export enum JoinKind {
  /** Only matched pairs. */
  INNER = 0,
  /** Also every left record that found no match, with a null right, once its window has passed. */
  LEFT = 1,
  /** Also unmatched records of both sides, the missing side null. */
  OUTER = 2,
}

/** Added to a late record sent to the spec's lateOutput; its value is the spec's name. */
export const JOIN_LATE_HEADER = "wasmstream-join-late";

/** One record of a join result. */
export class Side {
  constructor(public value: Uint8Array | null, public timestamp: i64) {}
}

/** One join result: a matched pair, or an unmatched record of a left or outer join with the other side null. */
export class JoinResult {
  constructor(public key: Uint8Array, public left: Side | null, public right: Side | null, public timestamp: i64) {}
}

/** Describes a join. */
export class JoinSpec {
  /** Prefixes every state and timer key of the join: required, no zero byte, short. */
  name: string;
  /** Buffers both sides. */
  store: Store;
  /** The input indexes (Record.input) of the two sides; they differ. A record of another input fails. */
  left: u32;
  right: u32;
  /** The window, in ms: a left record at t joins right records in [t-before, t+after]. Kafka Streams' JoinWindows.ofTimeDifference(d) is before = after = d. */
  before: i64 = 0;
  after: i64 = 0;
  /** How far behind the stream time a record may be and still join, in ms. */
  grace: i64 = 0;
  kind: JoinKind = JoinKind.INNER;
  /** Receives every joined (or unmatched) pair; its arrays are valid only during the call. */
  result: (res: JoinResult) => void;
  /** Receives every late record as it came, with the header JOIN_LATE_HEADER added. */
  lateOutput: Output | null = null;

  constructor(name: string, store: Store, left: u32, right: u32, result: (res: JoinResult) => void) {
    this.name = name;
    this.store = store;
    this.left = left;
    this.right = right;
    this.result = result;
  }

  /** The window: right records in [t-before, t+after] of a left record at t. */
  within(before: i64, after: i64): JoinSpec {
    this.before = before;
    this.after = after;
    return this;
  }

  withGrace(grace: i64): JoinSpec {
    this.grace = grace;
    return this;
  }

  ofKind(kind: JoinKind): JoinSpec {
    this.kind = kind;
    return this;
  }

  lateTo(out: Output): JoinSpec {
    this.lateOutput = out;
    return this;
  }
}

// Tags after the prefix: which side a buffered record is on, and the counter.
const TAG_LEFT: u8 = 0x4c; // 'L'
const TAG_RIGHT: u8 = 0x52; // 'R'

// Flags of a buffered record, its value's first byte.
const FLAG_MATCHED: u8 = 1; // joined at least one record of the other side
const FLAG_NULL: u8 = 2; // the record's value is null

/** A buffered record of the other side that a new record matched. */
class Buffered {
  constructor(public key: Uint8Array, public ts: i64, public flags: u8, public value: Uint8Array) {}
}

/** One stream-stream join; create it with Join.create (once), call add for each record of either side and onTimer from the timer callback. */
export class Join {
  private s: JoinSpec;
  private prefix: Uint8Array; // name + 0x00
  private late: Uint8Array; // state key of the late-record count

  private constructor(s: JoinSpec) {
    this.s = s;
    const name = utf8(s.name);
    const prefix = new Uint8Array(name.length + 1);
    prefix.set(name);
    const late = new Uint8Array(prefix.length + 5);
    late.set(prefix);
    late.set(utf8("clate"), prefix.length); // the counter tag, "late"
    this.prefix = prefix;
    this.late = late;
  }

  /** Checks spec and returns the join it describes, or null after failing the call with what is wrong. */
  static create(spec: JoinSpec): Join | null {
    const bad = spec.name.length == 0 ? "name is required"
      : spec.name.indexOf("\0") >= 0 ? "name may not contain a zero byte"
      : spec.left == spec.right ? "left and right must be different inputs"
      : spec.before < 0 || spec.after < 0 || spec.grace < 0 ? "before, after and grace must not be negative"
      : <i32>spec.kind > <i32>JoinKind.OUTER ? "unknown kind " + (<i32>spec.kind).toString()
      : "";
    if (bad.length > 0) {
      fail("join: \"" + spec.name + "\": " + bad);
      return null;
    }
    return new Join(spec);
  }

  /**
   * Joins a record of either side with the buffered records of the other,
   * emits the pairs, and buffers the record until its window has passed. A
   * late record (or one without a timestamp) is counted and sent to
   * lateOutput and changes nothing else. A null key is the empty key.
   */
  add(r: Record): void {
    if (failed()) return;
    let tag: u8, other: u8;
    let lo: i64, hi: i64; // the other side's timestamps this record joins
    if (r.input == this.s.left) {
      tag = TAG_LEFT;
      other = TAG_RIGHT;
      lo = sat(r.timestamp, -this.s.before);
      hi = sat(r.timestamp, this.s.after);
    } else if (r.input == this.s.right) {
      tag = TAG_RIGHT;
      other = TAG_LEFT;
      lo = sat(r.timestamp, -this.s.after);
      hi = sat(r.timestamp, this.s.before);
    } else {
      fail("join: \"" + this.s.name + "\": a record of input " + r.input.toString() + ", which is neither side (left " +
        this.s.left.toString() + ", right " + this.s.right.toString() + ")");
      return;
    }
    if (r.timestamp < 0) {
      this.lateRecord(r);
      return;
    }
    const now = streamTime();
    if (failed()) return;
    if (now != NO_TIME && r.timestamp < sat(now, -this.s.grace)) {
      this.lateRecord(r);
      return;
    }
    const k = r.key;
    const key = k === null ? new Uint8Array(0) : k;
    const matches = this.scan(other, key, max<i64>(lo, 0), hi);
    if (matches === null) return;
    const value = r.value;
    let flags: u8 = value === null ? FLAG_NULL : 0;
    const self = new Side(value, r.timestamp);
    for (let i = 0; i < matches.length; i++) {
      const m = matches[i];
      const that = new Side((m.flags & FLAG_NULL) != 0 ? null : m.value, m.ts);
      const res = tag == TAG_LEFT ? new JoinResult(key, self, that, max(r.timestamp, m.ts))
        : new JoinResult(key, that, self, max(r.timestamp, m.ts));
      this.s.result(res);
      if (failed()) return;
      flags |= FLAG_MATCHED;
      // Remember that the buffered record matched, if its unmatched
      // result would otherwise be emitted when it expires.
      if ((m.flags & FLAG_MATCHED) == 0 && this.emitsUnmatched(other)) {
        this.s.store.put(m.key, withFlags(m.flags | FLAG_MATCHED, m.value));
        if (failed()) return;
      }
    }
    const bkey = this.bufferKey(tag, key, r.timestamp, r.offset);
    if (bkey === null) return;
    this.s.store.put(bkey, withFlags(flags, value));
    if (failed()) return;
    // Kept while a record that is not late could still join it: the other
    // side's timestamps it joins end at hi, and a record is not late while
    // its timestamp is >= stream time - grace.
    setTimer(EVENT_TIME, sat(sat(hi, this.s.grace), 1), bkey);
  }

  /** The buffered records of one side and key with timestamps in [lo, hi], in timestamp order; null after failing the call. */
  private scan(tag: u8, key: Uint8Array, lo: i64, hi: i64): Array<Buffered> | null {
    const out = new Array<Buffered>();
    if (hi < lo) return out;
    const start = this.bufferKey(tag, key, lo, 0);
    if (start === null) return null;
    let end: Uint8Array | null;
    if (hi == i64.MAX_VALUE) end = prefixEnd(start.subarray(0, start.length - 16));
    else {
      end = this.bufferKey(tag, key, hi + 1, 0);
      if (end === null) return null;
    }
    const it = this.s.store.scan(start, end);
    while (it.next()) {
      const k = it.key, v = it.value;
      if (!this.parse(k) || v.length == 0) {
        it.close();
        this.corrupt(k);
        return null;
      }
      out.push(new Buffered(k.slice(0), parsedTs, v[0], v.slice(1)));
    }
    if (failed()) return null;
    return out;
  }

  /** Whether an unmatched record of the side tagged tag is emitted when it expires. */
  private emitsUnmatched(tag: u8): bool {
    return this.s.kind == JoinKind.OUTER || (this.s.kind == JoinKind.LEFT && tag == TAG_LEFT);
  }

  /**
   * Handles the join's timers: deletes the buffered record the timer is
   * for, first emitting it unmatched if the kind of join says so. Returns
   * false, doing nothing, for a timer that is not this join's.
   */
  onTimer(f: Firing): bool {
    if (f.kind != EVENT_TIME || !this.parse(f.key)) return false;
    const tag = parsedTag, key = parsedKey, ts = parsedTs;
    const v = this.s.store.get(f.key);
    if (v === null) return true; // deleted already: nothing to do (or an error, which fails the call)
    if (v.length == 0) {
      this.corrupt(f.key);
      return true;
    }
    if ((v[0] & FLAG_MATCHED) == 0 && this.emitsUnmatched(tag)) {
      const side = new Side((v[0] & FLAG_NULL) != 0 ? null : v.subarray(1), ts);
      this.s.result(tag == TAG_LEFT ? new JoinResult(key, side, null, ts) : new JoinResult(key, null, side, ts));
      if (failed()) return true;
    }
    this.s.store.delete(f.key);
    return true;
  }

  /** The number of late records this join has seen in this task (kept in the store). */
  lateCount(): u64 {
    const v = this.s.store.get(this.late);
    if (v === null) return 0;
    if (v.length != 8) {
      this.corrupt(this.late);
      return 0;
    }
    return bswap<u64>(load<u64>(v.dataStart));
  }

  private lateRecord(r: Record): void {
    const n = this.lateCount();
    if (failed()) return;
    const b = new Uint8Array(8);
    store<u64>(b.dataStart, bswap<u64>(n + 1));
    this.s.store.put(this.late, b);
    const out = this.s.lateOutput;
    if (failed() || out === null) return;
    const hs = r.headers.slice(0);
    hs.push(new Header(JOIN_LATE_HEADER, utf8(this.s.name)));
    out.emit(r.key, r.value, hs, r.timestamp);
  }

  /**
   * prefix, side tag, u32 key length, key, timestamp (sortable), offset
   * (sortable): one buffered record. The offset tells apart records of one
   * key with one timestamp, and makes a record processed again after an
   * abort land on the same key. null after failing the call.
   */
  private bufferKey(tag: u8, key: Uint8Array, ts: i64, offset: i64): Uint8Array | null {
    const n = this.prefix.length + 1 + 4 + key.length + 16;
    if (n > MAX_KEY_SIZE) {
      fail("join: \"" + this.s.name + "\": a record key of " + key.length.toString() + " bytes makes a buffer key over " +
        MAX_KEY_SIZE.toString() + " bytes");
      return null;
    }
    const k = new Uint8Array(n);
    k.set(this.prefix);
    const p = this.prefix.length;
    k[p] = tag;
    store<u32>(k.dataStart + <usize>p + 1, bswap<u32>(<u32>key.length));
    k.set(key, p + 5);
    const q = k.dataStart + <usize>(p + 5 + key.length);
    store<u64>(q, bswap<u64>(<u64>ts ^ (<u64>1 << 63)));
    store<u64>(q + 8, bswap<u64>(<u64>offset ^ (<u64>1 << 63)));
    return k;
  }

  /** Splits a key made by bufferKey into parsedTag, parsedKey, parsedTs; false for any other key. */
  private parse(k: Uint8Array): bool {
    const p = this.prefix.length;
    if (k.length < p + 1 + 4 + 16 || !bytesEqual(k.subarray(0, p), this.prefix)) return false;
    const tag = k[p];
    if (tag != TAG_LEFT && tag != TAG_RIGHT) return false;
    const n = <i32>bswap<u32>(load<u32>(k.dataStart + <usize>p + 1));
    if (n < 0 || k.length != p + 1 + 4 + n + 16) return false;
    parsedTag = tag;
    parsedKey = k.subarray(p + 5, p + 5 + n);
    parsedTs = <i64>(bswap<u64>(load<u64>(k.dataStart + <usize>(p + 5 + n))) ^ (<u64>1 << 63));
    return true;
  }

  private corrupt(key: Uint8Array): void {
    fail("join: \"" + this.s.name + "\": corrupt buffered record under key " + quote(key));
  }
}

let parsedTag: u8 = 0;
let parsedKey: Uint8Array = new Uint8Array(0);
let parsedTs: i64 = 0;

/** flags, then value's bytes (none for null). */
function withFlags(flags: u8, value: Uint8Array | null): Uint8Array {
  const n = value === null ? 0 : value.length;
  const b = new Uint8Array(1 + n);
  b[0] = flags;
  if (value !== null) b.set(value!, 1);
  return b;
}

/** a+b clamped to the i64 range: windows near the ends of time do not wrap. */
function sat(a: i64, b: i64): i64 {
  const s = a + b;
  if (b > 0 && s < a) return i64.MAX_VALUE;
  if (b < 0 && s > a) return i64.MIN_VALUE;
  return s;
}
