// A fake wasmstream host for the native tests of TypeScript plugins under
// node: no Kafka, no wasmstream binary. It runs the plugin's real module
// (built with build.mjs) and serves its imports the way the host does
// (abi/ABI.md), so a test exercises everything the SDK does, down to the
// bytes of the ABI:
//
//     import { FakeHost } from "./wasmstream-sdk/fake.mjs";
//     const h = await FakeHost.start("velocity.wasm", { outputs: ["payments", "alerts"], stores: ["recent"] });
//     const res = h.process({ key: "card-1", value: "12.50", timestamp: 1000 });
//     res.error             // null, or the text the plugin gave set_error
//     res.to("alerts")      // what it emitted to an output, in order
//     h.state("recent").get("card-1")
//
// What it keeps of the host's semantics: outputs and stores must be
// declared (ENONAME, ENOOUTPUT); emits, state and time are refused during
// init (EPHASE); keys, values, records and timer keys have the ABI's
// limits; null and empty stay distinct; reads see the call's own staged
// writes; scans are in byte order; a failed call's emits, state writes,
// timer changes and marks are discarded as a whole; a trap, or a pointer
// outside memory (EFAULT), fails the call and replaces the instance (the
// next call runs on a fresh one, init again), as the host does.
//
// Time (section 8), as the Go SDK's fake host (sdk/sdktest) has it: the
// stream time follows the records' timestamps (the largest non-negative
// one, moved before the record's call), the wall clock moves only when the
// test says (setWallTime, advanceWallTime); after every record the due
// event-time timers fire, one call each in time, kind, key order; at a
// commit point (commit(), advanceWallTime(), or every n records with
// commitEvery) the due timers of both kinds fire, then the commit callback
// runs once per marked key in key byte order. A fired timer is removed
// whatever its callback does (the host's "skip" policy); timers a callback
// sets that are already due wait for the next check. Stores may have a
// time to live (ttl: 8.7): each write stamps the entry with the store's
// clock, an expired entry is gone for the plugin at once, and commit points
// delete it.
//
// Batches (section 10): processBatch hands records to wasmstream_batch
// when the module exports it, as the host does: it ends calls as it sees
// the done count move, cuts the batch (stop) after a call that makes
// timers due or a commit point, and hands the calls it did not take again.
// A test can compare it with process, record by record.

import { readFile } from "node:fs/promises";

/** Host errors (ABI.md section 6). */
export const Errno = Object.freeze({
  FAULT: 1, INVAL: 2, NOOUTPUT: 3, NOSTORE: 4, NOTFOUND: 5, TOOLARGE: 6,
  NOCURSOR: 7, PHASE: 8, LIMIT: 9, IO: 10, NONAME: 11,
});
const errnoNames = ["", "EFAULT", "EINVAL", "ENOOUTPUT", "ENOSTORE", "ENOTFOUND", "ETOOLARGE", "ENOCURSOR", "EPHASE", "ELIMIT", "EIO", "ENONAME"];

/** The name of an errno: "ETOOLARGE". */
export function errnoName(e) {
  return errnoNames[e] || `E${e}`;
}

/** Limits (ABI.md sections 7 and 8.6). */
export const Limits = Object.freeze({
  maxKeySize: 4 << 10, maxValueSize: 1 << 20, maxRecordSize: 1 << 20, maxHeaders: 1024,
  maxLogSize: 4 << 10, maxOpenCursors: 16, maxTimerKeySize: 4 << 10,
  timers: 1_000_000, firings: 10_000, marks: 100_000,
});

/** Timer and trigger kinds. */
export const EVENT_TIME = 0;
export const PROCESSING_TIME = 1;
export const COMMIT = 2;
/** The stream time of a task that has seen no record with a timestamp. */
export const NO_TIME = -(2n ** 63n);
/** The fake wall clock at start: 2024-01-01T00:00:00Z, as the Go SDK's fake host. */
export const DEFAULT_WALL_TIME = 1704067200000;

const HEADER_SIZE = 36;
const TRIGGER_HEADER_SIZE = 32;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** b as bytes: a string is UTF-8; null and undefined are null. */
export function bytes(b) {
  if (b === null || b === undefined) return null;
  if (typeof b === "string") return enc.encode(b);
  if (b instanceof Uint8Array) return b;
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  throw new TypeError(`not bytes: ${b}`);
}

/** b as text (UTF-8), or null. */
export function text(b) {
  return b === null || b === undefined ? null : dec.decode(b);
}

// Map keys: bytes as a latin1 string, which sorts as the bytes do.
function k(b) {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1");
}
function unk(s) {
  return new Uint8Array(Buffer.from(s, "latin1"));
}
function cmpKeys(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Encodes a record in the ABI layout (section 5). Fields: key, value (bytes,
 * strings or null), headers ([[name, value], ...] or [{name, value}]),
 * timestamp, offset, partition, input (the index field).
 */
export function encodeRecord(r) {
  const key = bytes(r.key);
  const value = bytes(r.value);
  const headers = (r.headers || []).map((h) => (Array.isArray(h) ? { name: bytes(h[0]), value: bytes(h[1]) } : { name: bytes(h.name), value: bytes(h.value) }));
  let n = HEADER_SIZE + (key ? key.length : 0) + (value ? value.length : 0);
  for (const h of headers) n += 8 + h.name.length + (h.value ? h.value.length : 0);
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  dv.setBigInt64(0, BigInt(r.timestamp ?? 0), true);
  dv.setBigInt64(8, BigInt(r.offset ?? 0), true);
  dv.setInt32(16, r.partition ?? 0, true);
  dv.setUint32(20, r.input ?? r.index ?? 0, true);
  dv.setInt32(24, key ? key.length : -1, true);
  dv.setInt32(28, value ? value.length : -1, true);
  dv.setUint32(32, headers.length, true);
  let p = HEADER_SIZE;
  if (key) { out.set(key, p); p += key.length; }
  if (value) { out.set(value, p); p += value.length; }
  for (const h of headers) {
    dv.setUint32(p, h.name.length, true);
    dv.setInt32(p + 4, h.value ? h.value.length : -1, true);
    p += 8;
    out.set(h.name, p);
    p += h.name.length;
    if (h.value) { out.set(h.value, p); p += h.value.length; }
  }
  return out;
}

/** Decodes a record in the ABI layout, or returns null if it is malformed (abi.Record.Decode's checks). */
export function decodeRecord(b) {
  if (b.length < HEADER_SIZE) return null;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const kl = dv.getInt32(24, true);
  const vl = dv.getInt32(28, true);
  const count = dv.getUint32(32, true);
  if (kl < -1 || vl < -1 || count > Limits.maxHeaders) return null;
  let p = HEADER_SIZE;
  if (p + Math.max(kl, 0) + Math.max(vl, 0) > b.length) return null;
  const key = kl < 0 ? null : b.slice(p, p + kl);
  p += Math.max(kl, 0);
  const value = vl < 0 ? null : b.slice(p, p + vl);
  p += Math.max(vl, 0);
  const headers = [];
  for (let i = 0; i < count; i++) {
    if (b.length - p < 8) return null;
    const nl = dv.getInt32(p, true);
    const hl = dv.getInt32(p + 4, true);
    p += 8;
    if (nl < 0 || hl < -1 || p + nl + Math.max(hl, 0) > b.length) return null;
    const name = b.slice(p, p + nl);
    p += nl;
    const hv = hl < 0 ? null : b.slice(p, p + hl);
    p += Math.max(hl, 0);
    headers.push({ name: dec.decode(name), nameBytes: name, value: hv });
  }
  if (p !== b.length) return null;
  return {
    timestamp: num(dv.getBigInt64(0, true)), offset: num(dv.getBigInt64(8, true)),
    partition: dv.getInt32(16, true), index: dv.getUint32(20, true), key, value, headers,
  };
}

/** n as a number when it is one exactly, else as the bigint. */
function num(n) {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

/** Encodes a trigger (section 8.4). */
export function encodeTrigger(t) {
  const key = bytes(t.key) || new Uint8Array(0);
  const out = new Uint8Array(TRIGGER_HEADER_SIZE + key.length);
  const dv = new DataView(out.buffer);
  dv.setBigInt64(0, BigInt(t.timestamp), true);
  dv.setBigInt64(8, typeof t.streamTime === "bigint" ? t.streamTime : BigInt(t.streamTime), true);
  dv.setBigInt64(16, BigInt(t.wallTime), true);
  dv.setUint32(24, t.kind, true);
  dv.setUint32(28, key.length, true);
  out.set(key, TRIGGER_HEADER_SIZE);
  return out;
}

/** The result of one step: a record (and the timers that fired after it), or a commit point. */
export class Result {
  constructor() {
    /** What the call's export returned (0 OK, 1 FAILED). */
    this.status = 0;
    /** null if the record succeeded, else the plugin's set_error text or why the host failed it. */
    this.error = null;
    /** The emits of every call of the step that succeeded, in order. */
    this.all = [];
    /** The timer and commit callbacks the step ran, in order: {kind, time, key, error, emitted}. */
    this.callbacks = [];
  }

  /** What the step emitted to output, in order. */
  to(output) {
    return this.all.filter((e) => e.output === output);
  }

  /** The first error of the step: the record's, or else the first failed callback's; null if every call succeeded. */
  failed() {
    if (this.error !== null) return this.error;
    for (const c of this.callbacks) {
      if (c.error !== null) return `${["event", "processing", "commit"][c.kind]} callback for key "${text(c.key)}" at ${c.time}: ${c.error}`;
    }
    return null;
  }
}

/** A fake state store: committed data plus the current call's staged writes. */
class Store {
  constructor(name, ttl, now) {
    this.name = name;
    this.data = new Map(); // key (latin1) -> Uint8Array
    this.stamps = new Map();
    this.pending = new Map(); // key -> Uint8Array, or null (deleted)
    this.pendingStamps = new Map();
    this.ttl = ttl; // ms, 0 for none
    this.now = now;
  }

  /** The committed value of key, or null. (With a TTL an expired entry the last commit point has not deleted yet is still here.) */
  get(key) {
    const v = this.data.get(k(bytes(key)));
    return v === undefined ? null : v.slice();
  }

  /** Seeds a committed value (stamped now with a TTL). */
  put(key, value) {
    const kk = k(bytes(key));
    this.data.set(kk, (bytes(value) || new Uint8Array(0)).slice());
    if (this.ttl > 0) this.stamps.set(kk, this.now());
  }

  /** Removes a committed key. */
  delete(key) {
    const kk = k(bytes(key));
    this.data.delete(kk);
    this.stamps.delete(kk);
  }

  /** The committed keys in byte order, as bytes. */
  keys() {
    return [...this.data.keys()].sort(cmpKeys).map(unk);
  }

  /** The committed keys in byte order, as text. */
  keyStrings() {
    return this.keys().map((b) => dec.decode(b));
  }

  /** [key, value] pairs in key order. */
  entries() {
    return [...this.data.keys()].sort(cmpKeys).map((kk) => [unk(kk), this.data.get(kk).slice()]);
  }

  get size() {
    return this.data.size;
  }

  expired(stamp) {
    return this.ttl > 0 && this.now() >= stamp + this.ttl;
  }

  read(kk) {
    if (this.pending.has(kk)) {
      const v = this.pending.get(kk);
      if (v !== null && this.expired(this.pendingStamps.get(kk) ?? 0)) return null;
      return v;
    }
    const v = this.data.get(kk);
    if (v === undefined) return null;
    if (this.expired(this.stamps.get(kk) ?? 0)) return null;
    return v;
  }

  stage(kk, v) {
    this.pending.set(kk, v);
    if (this.ttl > 0 && v !== null) this.pendingStamps.set(kk, this.now());
  }

  view() {
    const keys = new Set([...this.data.keys()].filter((kk) => !this.pending.has(kk)));
    for (const [kk, v] of this.pending) if (v !== null) keys.add(kk);
    return [...keys].filter((kk) => this.read(kk) !== null).sort(cmpKeys);
  }

  end(ok) {
    if (ok) {
      for (const [kk, v] of this.pending) {
        if (v === null) {
          this.data.delete(kk);
          this.stamps.delete(kk);
        } else {
          this.data.set(kk, v);
          if (this.ttl > 0) this.stamps.set(kk, this.pendingStamps.get(kk));
        }
      }
    }
    this.pending.clear();
    this.pendingStamps.clear();
  }

  expire() {
    if (this.ttl === 0) return;
    for (const [kk, stamp] of [...this.stamps]) {
      if (this.expired(stamp)) {
        this.data.delete(kk);
        this.stamps.delete(kk);
      }
    }
  }
}

// A call fails the whole call, whatever the plugin does next.
class Misuse extends Error {}

const PHASE_IDLE = 0, PHASE_INIT = 1, PHASE_PROCESS = 2, PHASE_TIMER = 3, PHASE_COMMIT = 4;
const PHASE_MIGRATE = 5; // wasmstream_migrate: state only (emit and timers get EPHASE)

/** Timer identity: kind, time, key (any bytes, as a latin1 string). */
function timerId(kind, ts, key) {
  return `${kind}:${ts}:${key}`;
}
function parseTimerId(id) {
  const a = id.indexOf(":");
  const b = id.indexOf(":", a + 1);
  const key = id.slice(b + 1);
  return { kind: Number(id.slice(0, a)), time: Number(id.slice(a + 1, b)), key: unk(key), kk: key };
}
function timerLess(a, b) {
  if (a.time !== b.time) return a.time < b.time;
  if (a.kind !== b.kind) return a.kind < b.kind;
  return a.kk < b.kk;
}

/** The fake host. Start one with FakeHost.start. */
export class FakeHost {
  /**
   * Instantiates the plugin (a path or file URL, the module's bytes or a
   * WebAssembly.Module) and runs its init. opts: outputs, stores (names),
   * config (JSON text), ttl ({store: {ms, clock: "stream" | "wall"}}),
   * wallTime, streamTime, limits ({timers, firings, marks}), commitEvery,
   * fault (call name -> errno or 0: inject host errors; EIO and EFAULT also
   * fail the call). If init fails, initError holds why (and processing
   * throws).
   */
  static async start(wasm, opts = {}) {
    let mod = wasm;
    if (typeof wasm === "string" || wasm instanceof URL) mod = await readFile(wasm);
    if (!(mod instanceof WebAssembly.Module)) mod = await WebAssembly.compile(mod);
    const h = new FakeHost(mod, opts);
    h.instantiate();
    return h;
  }

  constructor(mod, opts) {
    this.module = mod;
    this.outputs = [...new Set(opts.outputs || [])].sort();
    this.config = bytes(opts.config ?? "") || new Uint8Array(0);
    this.fault = opts.fault || null;
    this.limits = { timers: Limits.timers, firings: Limits.firings, marks: Limits.marks, ...(opts.limits || {}) };
    this.commitEvery = opts.commitEvery || 0;
    this.streamTimeMs = opts.streamTime ?? null; // null: NO_TIME
    this.wall = opts.wallTime ?? DEFAULT_WALL_TIME;
    const ttl = opts.ttl || {};
    this.stores = [...new Set(opts.stores || [])].sort().map((name) => {
      const t = ttl[name];
      const now = t && t.clock === "wall" ? () => this.wall : () => Math.max(this.streamTimeMs ?? 0, 0);
      return new Store(name, t ? t.ms : 0, now);
    });
    for (const name of Object.keys(ttl)) {
      if (!this.stores.some((s) => s.name === name)) throw new Error(`fake host: a ttl for store "${name}", which is not among the stores`);
    }
    this.logLines = [];
    this.timersMap = new Map(); // committed pending timers: id -> true
    this.marks = new Map(); // key (latin1) -> timestamp
    this.fired = 0; // timers fired in this commit window
    this.records = 0; // records since the last commit point
    /** Instances started so far (a trap replaces the instance). */
    this.instances = 0;
    /** wasmstream_batch calls so far. */
    this.batches = 0;
    this.inst = null;
    this.initError = null;
    this.phase = PHASE_IDLE;
    this.batchState = null;
  }

  // ---- instances ----

  instantiate() {
    this.instances++;
    this.inst = null;
    this.inBuf = 0;
    this.inCap = 0;
    const imports = { wasmstream: this.imports(), wasi_snapshot_preview1: this.wasi() };
    this.beginCall(PHASE_INIT, 0);
    let st = 0;
    let err = null;
    try {
      const inst = new WebAssembly.Instance(this.module, imports);
      this.inst = inst;
      if (!inst.exports.memory) throw new Misuse("the module exports no memory");
      if (inst.exports._initialize) inst.exports._initialize();
      if (this.callFail === null && inst.exports.wasmstream_init) st = inst.exports.wasmstream_init();
    } catch (e) {
      err = this.trapText(e);
    }
    if (err === null) err = this.outcome(st);
    this.endCall(false);
    this.phase = PHASE_IDLE;
    if (err !== null) {
      this.initError = err;
      this.inst = null;
      return;
    }
    this.initError = null;
    this.ensureInput(4096);
  }

  trapText(e) {
    if (e instanceof Misuse) return `ABI misuse: ${e.message}`;
    if (e instanceof WebAssembly.RuntimeError || e instanceof RangeError) {
      const why = this.errMsg !== null ? ` (set_error: ${this.errMsg})` : "";
      return `trap: ${e.message}${why}`;
    }
    throw e; // the fake's own bug
  }

  usable() {
    if (this.inst === null) {
      if (this.initError !== null) throw new Error(`fake host: the plugin's init failed: ${this.initError}`);
      this.instantiate(); // replaced after a trap
      if (this.inst === null) throw new Error(`fake host: a fresh instance failed to start: ${this.initError}`);
    }
  }

  mem() {
    return new Uint8Array(this.inst.exports.memory.buffer);
  }

  ensureInput(n) {
    if (n <= this.inCap) return true;
    const p = this.inst.exports.wasmstream_input(n) >>> 0;
    if (p === 0) return false;
    if (p + n > this.mem().length) throw new Misuse(`wasmstream_input(${n}) returned ${p}, outside memory`);
    this.inBuf = p;
    this.inCap = n;
    return true;
  }

  // ---- calls ----

  beginCall(phase, ts) {
    this.phase = phase;
    this.callTS = ts;
    this.errMsg = null;
    this.callFail = null; // an error that fails the call whatever the plugin does
    this.misuse = false;
    this.emitted = [];
    this.cursors = new Map();
    this.nextCursor = 0;
    this.stagedTimers = new Map();
    this.stagedMarks = new Map();
    for (const s of this.stores) s.end(false);
  }

  outcome(st) {
    if (this.callFail !== null) return this.callFail;
    if (st === 0) return null;
    if (this.errMsg !== null) return this.errMsg;
    if (st === 1) return "fake host: the plugin returned FAILED without calling set_error";
    return `ABI misuse: the plugin returned status ${st}`;
  }

  /** Ends the call: its effects stand if ok. Returns what it emitted. */
  endCall(ok) {
    for (const s of this.stores) s.end(ok);
    if (ok) {
      for (const [id, set] of this.stagedTimers) {
        if (set) this.timersMap.set(id, true);
        else this.timersMap.delete(id);
      }
      for (const [kk, ts] of this.stagedMarks) this.marks.set(kk, ts);
    }
    const emitted = ok ? this.emitted : [];
    this.emitted = [];
    this.stagedTimers = new Map();
    this.stagedMarks = new Map();
    this.cursors = new Map();
    this.phase = PHASE_IDLE;
    return emitted;
  }

  /** Runs fn (a call into the plugin) and returns [error or null, emitted]. A trap or misuse replaces the instance. */
  runCall(phase, ts, fn) {
    this.beginCall(phase, ts);
    let err = null;
    let st = 0;
    try {
      st = fn();
    } catch (e) {
      err = this.trapText(e);
      this.inst = null; // replaced at the next call
    }
    if (err === null) err = this.outcome(st);
    if (err !== null && this.misuse) this.inst = null;
    const emitted = this.endCall(err === null);
    return { status: err === null ? 0 : st || 1, error: err, emitted };
  }

  /**
   * Runs the plugin's wasmstream_migrate (migrate-exports.ts) as the host
   * does when the task's stores were last written by version from
   * (abi/ABI.md section 13): its state writes stand if it succeeds and are
   * dropped if it fails. Returns {status, error, all}.
   */
  migrate(from) {
    this.usable();
    if (typeof this.inst.exports.wasmstream_migrate !== "function") {
      throw new Error("fake host: migrate: the plugin does not export wasmstream_migrate (re-export migrate-exports)");
    }
    const raw = new TextEncoder().encode(from);
    const res = new Result();
    const r = this.runCall(PHASE_MIGRATE, 0, () => {
      if (!this.ensureInput(raw.length)) {
        this.callFail = `fake host: wasmstream_input(${raw.length}) returned 0`;
        return 1;
      }
      this.mem().set(raw, this.inBuf);
      return this.inst.exports.wasmstream_migrate(raw.length);
    });
    res.status = r.status;
    res.error = r.error;
    res.all = r.emitted;
    return res;
  }

  /** Processes one record ({key, value, headers, timestamp, offset, partition, input}); the due event-time timers fire after it. */
  process(rec) {
    return this.processRaw(encodeRecord(rec));
  }

  /** Hands the plugin exactly these bytes as a record, malformed or not. */
  processRaw(raw) {
    this.usable();
    const res = new Result();
    const ts = raw.length >= 8 ? Number(new DataView(raw.buffer, raw.byteOffset).getBigInt64(0, true)) : 0;
    this.advanceStream(ts);
    const r = this.runCall(PHASE_PROCESS, ts, () => {
      if (!this.ensureInput(raw.length)) {
        this.callFail = `fake host: wasmstream_input(${raw.length}) returned 0`;
        return 1;
      }
      this.mem().set(raw, this.inBuf);
      return this.inst.exports.wasmstream_process(raw.length);
    });
    res.status = r.status;
    res.error = r.error;
    res.all = r.emitted;
    this.afterRecord(res);
    return res;
  }

  advanceStream(ts) {
    if (ts >= 0 && (this.streamTimeMs === null || ts > this.streamTimeMs)) this.streamTimeMs = ts;
  }

  afterRecord(res) {
    this.fireDue(res, false);
    this.records++;
    if (this.commitEvery > 0 && this.records >= this.commitEvery) {
      const c = this.commit();
      res.all.push(...c.all);
      res.callbacks.push(...c.callbacks);
    }
  }

  /** Runs a commit point: due timers of both kinds fire, then the commit callback for every marked key in key order. */
  commit() {
    this.usable();
    const res = new Result();
    this.fireDue(res, true);
    const marks = this.marks;
    this.marks = new Map();
    for (const kk of [...marks.keys()].sort(cmpKeys)) this.callback(res, COMMIT, marks.get(kk), unk(kk));
    this.fired = 0;
    this.records = 0;
    for (const s of this.stores) s.expire();
    return res;
  }

  /** Sets the wall clock (it may not go back); due processing-time timers fire at the next commit point. */
  setWallTime(ms) {
    if (ms < this.wall) throw new Error(`fake host: setWallTime(${ms}) would move the wall clock back from ${this.wall}`);
    this.wall = ms;
  }

  /** Moves the wall clock forward by ms and runs a commit point. */
  advanceWallTime(ms) {
    this.setWallTime(this.wall + ms);
    return this.commit();
  }

  /** The stream time (a number), or NO_TIME (a bigint) if the task has none. */
  get streamTime() {
    return this.streamTimeMs === null ? NO_TIME : this.streamTimeMs;
  }

  get wallTime() {
    return this.wall;
  }

  /** The pending timers in firing order: {kind, time, key}. */
  timers() {
    return [...this.timersMap.keys()].map(parseTimerId).sort((a, b) => (timerLess(a, b) ? -1 : timerLess(b, a) ? 1 : 0))
      .map(({ kind, time, key }) => ({ kind, time, key }));
  }

  /** The keys marked in the current commit window, in the order their callbacks will run. */
  marked() {
    return [...this.marks.keys()].sort(cmpKeys).map(unk);
  }

  /** The store called name. */
  state(name) {
    const s = this.stores.find((x) => x.name === name);
    if (!s) throw new Error(`fake host: no store "${name}" (declared: ${this.stores.map((x) => x.name).join(", ")})`);
    return s;
  }

  /** The lines the plugin logged: {level, msg}. */
  logs() {
    return this.logLines.slice();
  }

  fireDue(res, commitPoint) {
    const due = this.timers().filter((t) => (t.kind === EVENT_TIME && this.streamTimeMs !== null && t.time <= this.streamTimeMs) ||
      (commitPoint && t.kind === PROCESSING_TIME && t.time <= this.wall));
    for (const t of due) {
      if (this.fired >= this.limits.firings) return;
      const id = timerId(t.kind, t.time, k(t.key));
      if (!this.timersMap.has(id)) continue; // cancelled by an earlier callback of this check
      this.fired++;
      this.timersMap.delete(id);
      this.callback(res, t.kind, t.time, t.key);
    }
  }

  callback(res, kind, ts, key) {
    this.usable();
    const trig = encodeTrigger({ timestamp: ts, streamTime: this.streamTimeMs ?? NO_TIME, wallTime: this.wall, kind, key });
    const fn = kind === COMMIT ? this.inst.exports.wasmstream_on_commit : this.inst.exports.wasmstream_on_timer;
    const cb = { kind, time: ts, key, error: null, emitted: [] };
    if (!fn) {
      cb.error = `fake host: a ${["event-time timer", "processing-time timer", "commit"][kind]} is due but the module does not export ${kind === COMMIT ? "wasmstream_on_commit" : "wasmstream_on_timer"}`;
      res.callbacks.push(cb);
      return;
    }
    const r = this.runCall(kind === COMMIT ? PHASE_COMMIT : PHASE_TIMER, ts, () => {
      if (!this.ensureInput(trig.length)) {
        this.callFail = `fake host: wasmstream_input(${trig.length}) returned 0`;
        return 1;
      }
      this.mem().set(trig, this.inBuf);
      return fn(trig.length);
    });
    cb.error = r.error;
    cb.emitted = r.emitted;
    res.all.push(...r.emitted);
    res.callbacks.push(cb);
  }

  /**
   * Hands the plugin exactly these bytes as a trigger, through
   * wasmstream_on_commit (commit) or wasmstream_on_timer: for tests of the
   * trigger layout itself, including malformed ones. The clocks do not
   * move and no timer is removed.
   */
  callbackRaw(raw, commit) {
    this.usable();
    const fn = commit ? this.inst.exports.wasmstream_on_commit : this.inst.exports.wasmstream_on_timer;
    if (!fn) throw new Error(`fake host: the module does not export ${commit ? "wasmstream_on_commit" : "wasmstream_on_timer"}`);
    const res = new Result();
    const ts = raw.length >= 8 ? num(new DataView(raw.buffer, raw.byteOffset).getBigInt64(0, true)) : 0;
    const r = this.runCall(commit ? PHASE_COMMIT : PHASE_TIMER, ts, () => {
      if (!this.ensureInput(raw.length)) {
        this.callFail = `fake host: wasmstream_input(${raw.length}) returned 0`;
        return 1;
      }
      this.mem().set(raw, this.inBuf);
      return fn(raw.length);
    });
    res.status = r.status;
    res.error = r.error;
    res.all = r.emitted;
    return res;
  }

  // ---- batches ----

  /**
   * Processes records through wasmstream_batch (ABI.md section 10), as the
   * host does, and returns one Result per record, each as process would
   * have made it. Falls back to single calls for a module without the
   * export or with an unaligned input buffer.
   */
  processBatch(recs) {
    const results = [];
    let i = 0;
    while (i < recs.length) {
      this.usable();
      if (!this.inst.exports.wasmstream_batch || recs.length - i === 1) {
        results.push(this.process(recs[i]));
        i++;
        continue;
      }
      const n = this.runBatch(recs.slice(i), results);
      i += n;
    }
    return results;
  }

  /** Runs one batch of recs; appends the Results of the calls it ended and returns how many. */
  runBatch(recs, results) {
    const payloads = recs.map(encodeRecord);
    let size = 16;
    for (const p of payloads) size += (24 + p.length + 7) & ~7;
    if (!this.ensureInput(size) || this.inBuf % 8 !== 0) {
      results.push(this.process(recs[0]));
      return 1;
    }
    const mem = this.mem();
    const base = this.inBuf;
    const dv = new DataView(mem.buffer);
    dv.setUint32(base, payloads.length, true);
    dv.setUint32(base + 4, 0, true);
    dv.setUint32(base + 8, 0, true);
    dv.setUint32(base + 12, 0, true);
    const slots = [];
    let off = 16;
    for (const p of payloads) {
      const slot = base + off;
      for (let f = 0; f < 24; f += 4) dv.setUint32(slot + f, 0, true);
      dv.setUint32(slot + 20, p.length, true);
      mem.set(p, slot + 24);
      slots.push(slot);
      off += (24 + p.length + 7) & ~7;
    }
    // ended: calls ended; begun: the call the host has begun (-1: none);
    // cut: calls from this index on are not taken (the host hands them
    // again).
    const b = { base, slots, payloads, ended: 0, begun: -1, hostCalls: false, cut: payloads.length, results: [] };
    this.batchState = b;
    this.batches++;
    let ret = 0;
    let failure = null;
    try {
      ret = this.inst.exports.wasmstream_batch(size);
    } catch (e) {
      failure = this.trapText(e);
    }
    try {
      this.syncBatch();
    } catch (e) {
      if (!(e instanceof Misuse)) throw e;
      failure = failure || `ABI misuse: ${e.message}`;
    }
    this.batchState = null;
    const done = b.ended;
    if (failure === null) {
      if (ret !== 0) failure = `ABI misuse: wasmstream_batch returned ${ret}`;
      else if (done === 0) failure = "ABI misuse: wasmstream_batch returned with done 0";
      else if (b.begun === done && b.hostCalls && done < b.cut) failure = "ABI misuse: wasmstream_batch returned in the middle of a call that made host calls";
    }
    if (failure !== null || b.replace) this.inst = null; // replaced at the next call
    // The calls ended stand. Only the last can have made timers or a
    // commit point due (the batch is cut after such a call): the host
    // acts after it.
    for (let i = 0; i < b.results.length; i++) {
      if (i === b.results.length - 1 && (failure === null || done >= b.cut)) this.afterRecord(b.results[i]);
      else this.records++;
    }
    if (failure !== null && done < b.cut && done < payloads.length) {
      // The call in progress fails.
      if (b.begun !== done) this.beginBatchCall(b, done);
      this.errMsg = null;
      const res = new Result();
      res.status = 1;
      res.error = failure;
      this.endCall(false);
      this.afterRecord(res);
      b.results.push(res);
    }
    results.push(...b.results);
    return b.results.length;
  }

  beginBatchCall(b, idx) {
    const p = b.payloads[idx];
    const ts = Number(new DataView(p.buffer, p.byteOffset).getBigInt64(0, true));
    this.advanceStream(ts);
    this.beginCall(PHASE_PROCESS, ts);
    b.begun = idx;
    b.hostCalls = false;
  }

  /** Ends every call the plugin has finished since the host last looked (ABI.md 10.2); returns the index of the call in progress. */
  syncBatch() {
    const b = this.batchState;
    const dv = new DataView(this.mem().buffer);
    const done = dv.getUint32(b.base + 4, true);
    if (done < b.ended || done > b.slots.length) throw new Misuse(`done went from ${b.ended} to ${done}`);
    while (b.ended < done && b.ended < b.cut) {
      const idx = b.ended;
      if (b.begun !== idx) this.beginBatchCall(b, idx);
      const slot = b.slots[idx];
      const st = dv.getUint32(slot + 4, true);
      const ptr = dv.getUint32(slot + 8, true);
      const len = dv.getUint32(slot + 12, true);
      let err = null;
      if (st === 0) {
        try {
          this.takeRun(ptr, len);
        } catch (e) {
          if (!(e instanceof Misuse)) throw e;
          err = `ABI misuse: ${e.message}`;
          this.misuse = true;
        }
      }
      if (err === null) err = this.outcome(st);
      if (err !== null && this.misuse) b.replace = true; // after the batch returns
      const res = new Result();
      res.status = err === null ? 0 : st || 1;
      res.error = err;
      res.all = this.endCall(err === null);
      b.ended++;
      b.results.push(res);
      // The host acts before the next call after a failure, or when
      // timers came due or a commit point is due: it cuts the batch.
      const due = this.timers().some((t) => t.kind === EVENT_TIME && this.streamTimeMs !== null && t.time <= this.streamTimeMs);
      const commitDue = this.commitEvery > 0 && this.records + b.ended >= this.commitEvery;
      if ((err !== null || due || commitDue) && b.cut > b.ended) {
        b.cut = b.ended;
        dv.setUint32(b.base + 8, 1, true); // stop
      }
    }
    return done;
  }

  /** Reads a call's staged emits (emit entries) and checks each as emit does. */
  takeRun(ptr, len) {
    if (len === 0) return;
    const mem = this.mem();
    if (ptr + len > mem.length) throw new Misuse(`staged emits [${ptr}, ${ptr + len}) outside memory (EFAULT)`);
    const run = mem.slice(ptr, ptr + len);
    const dv = new DataView(run.buffer);
    let p = 0;
    while (p < run.length) {
      if (run.length - p < 4) throw new Misuse("malformed emit entries (EINVAL)");
      const n = dv.getUint32(p, true);
      p += 4;
      if (n > run.length - p) throw new Misuse("malformed emit entries (EINVAL)");
      const rec = run.subarray(p, p + n);
      p += n;
      if (n > Limits.maxRecordSize) {
        this.callFail = "fake host: a staged emit over the record size limit (ETOOLARGE)";
        return;
      }
      const r = decodeRecord(rec);
      if (r === null || r.partition < -1) throw new Misuse("malformed staged emit (EINVAL)");
      if (r.index >= this.outputs.length) throw new Misuse(`staged emit to output ${r.index}, not declared (ENOOUTPUT)`);
      this.emitted.push(this.emittedOf(r, rec));
    }
  }

  emittedOf(r, raw) {
    return {
      output: this.outputs[r.index], key: r.key, value: r.value,
      headers: r.headers.map((h) => ({ name: h.name, value: h.value })),
      timestamp: r.timestamp, partition: r.partition, raw: raw.slice(),
    };
  }

  // ---- imports ----

  read(ptr, len) {
    ptr >>>= 0;
    len >>>= 0;
    const mem = this.mem();
    if (ptr + len > mem.length) {
      this.misuse = true;
      this.failCall("EFAULT: pointer or length outside plugin memory", true);
      return null;
    }
    return mem.slice(ptr, ptr + len);
  }

  write(ptr, data) {
    ptr >>>= 0;
    const mem = this.mem();
    if (ptr + data.length > mem.length) {
      this.misuse = true;
      this.failCall("EFAULT: pointer or length outside plugin memory", true);
      return false;
    }
    mem.set(data, ptr);
    return true;
  }

  failCall(why, misuse = false) {
    if (this.callFail === null) this.callFail = misuse ? `ABI misuse: ${why}` : `fake host: the host failed the call: ${why}`;
  }

  /**
   * The checks every import makes first: the injected fault, the batch's
   * call in progress, the phase (stateful calls only in a call, others
   * also during init). Returns 0, or the negative result to return.
   */
  check(call, stateful) {
    if (this.batchState !== null) {
      const idx = this.syncBatch();
      const b = this.batchState;
      if (idx >= b.cut) return -Errno.PHASE; // a call after the cut: the host hands it again
      if (b.begun !== idx) this.beginBatchCall(b, idx);
      b.hostCalls = true;
    }
    if (this.fault) {
      const e = this.fault(call);
      if (e) {
        if (e === Errno.IO || e === Errno.FAULT) this.failCall(`${call}: ${errnoName(e)}`);
        return -e;
      }
    }
    if (this.phase >= PHASE_PROCESS || (this.phase === PHASE_INIT && !stateful)) return 0;
    return -Errno.PHASE;
  }

  imports() {
    const h = this;
    return {
      emit(ptr, len) {
        const r = h.check("emit", true);
        if (r) return r;
        if (h.phase === PHASE_MIGRATE) return -Errno.PHASE;
        const raw = h.read(ptr, len);
        if (raw === null) return -Errno.FAULT;
        if (raw.length > Limits.maxRecordSize) return -Errno.TOOLARGE;
        const rec = decodeRecord(raw);
        if (rec === null || rec.partition < -1) return -Errno.INVAL;
        if (rec.index >= h.outputs.length) {
          h.misuse = true;
          h.failCall("ENOOUTPUT: output not declared by the processor", true);
          return -Errno.NOOUTPUT;
        }
        h.emitted.push(h.emittedOf(rec, raw));
        return 0;
      },
      output_index(ptr, len) {
        const r = h.check("output_index", false);
        if (r) return r;
        const name = h.read(ptr, len);
        if (name === null) return -Errno.FAULT;
        const i = h.outputs.indexOf(dec.decode(name));
        return i >= 0 ? i : -Errno.NONAME;
      },
      store_index(ptr, len) {
        const r = h.check("store_index", false);
        if (r) return r;
        const name = h.read(ptr, len);
        if (name === null) return -Errno.FAULT;
        const i = h.stores.findIndex((s) => s.name === dec.decode(name));
        return i >= 0 ? i : -Errno.NONAME;
      },
      config(ptr, cap) {
        const r = h.check("config", false);
        if (r) return r;
        if (h.config.length <= cap >>> 0 && !h.write(ptr, h.config)) return -Errno.FAULT;
        return h.config.length;
      },
      log(level, ptr, len) {
        if (h.batchState !== null) h.check("log", false);
        if (h.fault) {
          const e = h.fault("log");
          if (e) return -e;
        }
        const msg = h.read(ptr, len);
        if (msg === null) return -Errno.FAULT;
        if (level >>> 0 > 3) return -Errno.INVAL;
        const cut = msg.length > Limits.maxLogSize;
        h.logLines.push({ level: ["debug", "info", "warn", "error"][level], msg: dec.decode(msg.subarray(0, Limits.maxLogSize)), truncated: cut });
        return 0;
      },
      set_error(ptr, len) {
        const r = h.check("set_error", false);
        if (r) return r;
        const msg = h.read(ptr, len);
        if (msg === null) return -Errno.FAULT;
        h.errMsg = dec.decode(msg.subarray(0, Limits.maxLogSize));
        return 0;
      },
      state_get(store, kp, kl, out, cap) {
        const r = h.check("state_get", true);
        if (r) return r;
        const s = h.stores[store >>> 0];
        if (!s) return -Errno.NOSTORE;
        const key = h.read(kp, kl);
        if (key === null) return -Errno.FAULT;
        if (key.length > Limits.maxKeySize) return -Errno.TOOLARGE;
        const v = s.read(k(key));
        if (v === null) return -Errno.NOTFOUND;
        if (v.length <= cap >>> 0 && !h.write(out, v)) return -Errno.FAULT;
        return v.length;
      },
      state_put(store, kp, kl, vp, vl) {
        const r = h.check("state_put", true);
        if (r) return r;
        const s = h.stores[store >>> 0];
        if (!s) return -Errno.NOSTORE;
        const key = h.read(kp, kl);
        const value = key === null ? null : h.read(vp, vl);
        if (value === null) return -Errno.FAULT;
        if (key.length > Limits.maxKeySize || value.length > Limits.maxValueSize) return -Errno.TOOLARGE;
        s.stage(k(key), value);
        return 0;
      },
      state_delete(store, kp, kl) {
        const r = h.check("state_delete", true);
        if (r) return r;
        const s = h.stores[store >>> 0];
        if (!s) return -Errno.NOSTORE;
        const key = h.read(kp, kl);
        if (key === null) return -Errno.FAULT;
        if (key.length > Limits.maxKeySize) return -Errno.TOOLARGE;
        s.stage(k(key), null);
        return 0;
      },
      scan_open(store, sp, sl, ep, el) {
        const r = h.check("scan_open", true);
        if (r) return r;
        const s = h.stores[store >>> 0];
        if (!s) return -Errno.NOSTORE;
        const start = h.read(sp, sl);
        const end = start === null ? null : h.read(ep, el);
        if (end === null) return -Errno.FAULT;
        if (start.length > Limits.maxKeySize || end.length > Limits.maxKeySize) return -Errno.TOOLARGE;
        if (h.cursors.size >= Limits.maxOpenCursors) return -Errno.LIMIT;
        const ks = k(start), ke = k(end);
        const entries = s.view().filter((kk) => kk >= ks && (ke.length === 0 || kk < ke)).map((kk) => [unk(kk), s.read(kk)]);
        const id = h.nextCursor++;
        h.cursors.set(id, { entries, next: 0 });
        return id;
      },
      scan_next(cursor, out, cap) {
        const r = h.check("scan_next", true);
        if (r) return r;
        const c = h.cursors.get(cursor >>> 0);
        if (!c) return -Errno.NOCURSOR;
        if (c.next === c.entries.length) return 0;
        const [key, value] = c.entries[c.next];
        const n = 8 + key.length + value.length;
        if (n <= cap >>> 0) {
          const e = new Uint8Array(n);
          const dv = new DataView(e.buffer);
          dv.setUint32(0, key.length, true);
          dv.setUint32(4, value.length, true);
          e.set(key, 8);
          e.set(value, 8 + key.length);
          if (!h.write(out, e)) return -Errno.FAULT;
          c.next++;
        }
        return n;
      },
      scan_close(cursor) {
        const r = h.check("scan_close", true);
        if (r) return r;
        if (!h.cursors.delete(cursor >>> 0)) return -Errno.NOCURSOR;
        return 0;
      },
      timer_set(kind, ts, kp, kl) {
        return h.timerChange("timer_set", kind, ts, kp, kl, true);
      },
      timer_cancel(kind, ts, kp, kl) {
        return h.timerChange("timer_cancel", kind, ts, kp, kl, false);
      },
      time_now(clock) {
        const r = h.check("time_now", true);
        if (r) return BigInt(r);
        if (clock === 0) return h.streamTimeMs === null ? NO_TIME : BigInt(h.streamTimeMs);
        if (clock === 1) return BigInt(h.wall);
        return BigInt(-Errno.INVAL);
      },
      commit_mark(kp, kl) {
        const r = h.check("commit_mark", true);
        if (r) return r;
        if (h.phase === PHASE_COMMIT) return -Errno.PHASE;
        if (kl >>> 0 > Limits.maxTimerKeySize) return -Errno.TOOLARGE;
        const key = h.read(kp, kl);
        if (key === null) return -Errno.FAULT;
        const kk = k(key);
        const known = h.marks.has(kk) || h.stagedMarks.has(kk);
        if (!known) {
          let n = h.marks.size;
          for (const m of h.stagedMarks.keys()) if (!h.marks.has(m)) n++;
          if (n >= h.limits.marks) return -Errno.LIMIT;
        }
        h.stagedMarks.set(kk, h.callTS);
        return known ? 0 : 1;
      },
    };
  }

  timerChange(call, kind, ts, kp, kl, set) {
    const r = this.check(call, true);
    if (r) return r;
    if (this.phase === PHASE_MIGRATE) return -Errno.PHASE;
    // abi.CheckTimer's order: kind, ts, key size; then the pointer.
    if ((kind !== EVENT_TIME && kind !== PROCESSING_TIME) || ts < 0n) return -Errno.INVAL;
    if (kl >>> 0 > Limits.maxTimerKeySize) return -Errno.TOOLARGE;
    const key = this.read(kp, kl);
    if (key === null) return -Errno.FAULT;
    const id = timerId(kind, Number(ts), k(key));
    const pending = this.stagedTimers.has(id) ? this.stagedTimers.get(id) : this.timersMap.has(id);
    if (set) {
      if (pending) return 0;
      let count = this.timersMap.size;
      for (const [sid, s] of this.stagedTimers) {
        if (s && !this.timersMap.has(sid)) count++;
        if (!s && this.timersMap.has(sid)) count--;
      }
      if (count >= this.limits.timers) return -Errno.LIMIT;
      this.stagedTimers.set(id, true);
      return 1;
    }
    if (!pending) return 0;
    this.stagedTimers.set(id, false);
    return 1;
  }

  wasi() {
    const h = this;
    // What AssemblyScript may import: random bytes (Math.random's seed).
    // Deterministic, as the host's (ABI.md section 7).
    let x = 0x9e3779b9;
    return {
      random_get(ptr, len) {
        const b = new Uint8Array(len >>> 0);
        for (let i = 0; i < b.length; i++) {
          x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
          b[i] = x & 0xff;
        }
        return h.write(ptr, b) ? 0 : 21;
      },
    };
  }
}
