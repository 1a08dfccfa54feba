// The TypeScript SDK's processor of the ABI conformance suite
// (host/internal/conformance/README.md has the script it follows, the same
// in every language). It is not a plugin to deploy.

import {
  Output, Store, Record, Header, Firing, Commit, Errno, errnoName, handle, onInit, onTimer, onCommit,
  onMigrate, config, logDebug, logInfo, logWarn, logError, fail, takeError, utf8, str,
  setTimer, cancelTimer, streamTime, wallTime, mark, kindName, EVENT_TIME, PROCESSING_TIME,
  MAX_KEY_SIZE, MAX_VALUE_SIZE, MAX_RECORD_SIZE, MAX_OPEN_CURSORS, MAX_TIMER_KEY_SIZE, Iterator,
} from "../../../../../sdk/ts";
import {
  host_emit, host_output_index, host_store_index, host_log, host_state_get, host_scan_open, host_scan_next,
  host_scan_close, host_timer_set, host_time_now,
} from "../../../../../sdk/ts/assembly/host";
export * from "../../../../../sdk/ts/exports";
export * from "../../../../../sdk/ts/time-exports";
export * from "../../../../../sdk/ts/migrate-exports";

const out = new Output("out");
const side = new Output("side");
const kv = new Store("kv");
const aux = new Store("aux");

onInit(setup);
handle(process);
onTimer(fired);
onCommit(committed);
onMigrate(migrateFrom);

/** The migration script (README.md, "Migration"). */
function migrateFrom(from: string): void {
  out.emit(b("lost"), null);
  const emitted = res();
  setTimer(EVENT_TIME, 1, b("k"));
  const timer = res();
  const counter = get(kv, b("counter"));
  kv.put(b("migrated-from"), b(from));
  kv.put(b("migrate-emit"), b(emitted));
  kv.put(b("migrate-timer"), b(timer));
  kv.put(b("migrate-counter"), b(counter));
  if (from == "fail") fail("conformance: migration refused");
}

/** The result of the SDK call just made, in the script's words: ok or the errno's name. */
function res(): string {
  const e = takeError();
  if (e === null) return "ok";
  return e.errno != Errno.OK ? errnoName(e.errno) : e.message;
}

/** A raw host result: a decimal number or the errno's name. */
function raw(r: i64): string {
  if (r < 0 && r >= -(<i64>1 << 31)) return errnoName(<Errno>(-<i32>r));
  return r.toString();
}

function b(s: string): Uint8Array {
  return utf8(s);
}

function get(s: Store, key: Uint8Array): string {
  const v = s.get(key);
  const e = takeError();
  if (e !== null) return errnoName(e.errno);
  if (v === null) return "missing";
  return "found:" + str(v);
}

function note(step: string, text: string): void {
  side.emit(b(step), b(text));
}

function setup(): void {
  logInfo("init config " + config().length.toString());
  out.emit(null, null);
  const e1 = res();
  kv.get(b("k"));
  const e2 = res();
  logInfo("init emit " + e1 + " get " + e2);
  logInfo(initTime());
  out.check();
  side.check();
  kv.check();
  aux.check();
}

function process(r: Record): void {
  const key = str(r.key);
  if (r.key === null || !key.startsWith("cmd:")) {
    echo(r);
    return;
  }
  const cmd = key.substring(4);
  if (cmd == "state") state();
  else if (cmd == "scan") scan();
  else if (cmd == "config") out.emit(b("config"), config());
  else if (cmd == "log") {
    logDebug("debug line");
    logInfo("info line");
    logWarn("warn line");
    logError("error line");
    const bad = b("bad");
    const r4 = host_log(4, bad.dataStart, <u32>bad.length);
    logInfo("L".repeat(5000));
    note("log-level-4", raw(r4));
    note("log", "ok");
  } else if (cmd == "names") {
    note("names", raw(rawIndex(false, "side")) + " " + raw(rawIndex(true, "aux")) + " " + raw(rawIndex(true, "kv")) + " " +
      raw(rawIndex(false, "nope")) + " " + raw(rawIndex(true, "nope")));
  } else if (cmd == "headers") {
    const hs: Header[] = [new Header("a", b("1")), new Header("null", null), new Header("empty", new Uint8Array(0)),
      new Header("", b("noname")), new Header("a", b("2"))];
    out.emit(new Uint8Array(0), null, hs, 123);
    out.emit(null, new Uint8Array(0));
    side.emitTo(5, b("p5"), b("v"));
    side.emitTo(0, null, null);
  } else if (cmd == "rawemit") {
    const huge = new Uint8Array(MAX_RECORD_SIZE + 1);
    const small = new Uint8Array(10);
    const r1 = host_emit(huge.dataStart, <u32>huge.length);
    const r2 = host_emit(small.dataStart, <u32>small.length);
    note("emit-huge", raw(r1));
    note("emit-malformed", raw(r2));
  } else if (cmd == "fail") {
    kv.put(b("fail-k"), b("x"));
    out.emit(b("lost"), null);
    fail("conformance: rejected on purpose");
  } else if (cmd == "fault") {
    host_emit(0xffffff00, 1000);
  } else if (cmd == "trap") {
    // A byte far outside linear memory: a Wasm trap (out of bounds memory
    // access), the same in every language.
    load<u8>(0xfffffff0);
  } else if (cmd == "nooutput") {
    // A well-formed record for output index 9: key "k", offset -1, partition -1.
    const rec = new Uint8Array(37);
    store<i64>(rec.dataStart, 0);
    store<i64>(rec.dataStart, -1, 8);
    store<i32>(rec.dataStart, -1, 16);
    store<u32>(rec.dataStart, 9, 20);
    store<i32>(rec.dataStart, 1, 24);
    store<i32>(rec.dataStart, -1, 28);
    store<u32>(rec.dataStart, 0, 32);
    rec[36] = 0x6b;
    host_emit(rec.dataStart, 37);
  } else if (cmd == "now") now();
  else if (cmd == "timers") timers();
  else if (cmd == "mark") marks();
  else if (cmd == "timerfault") host_timer_set(EVENT_TIME, 1, 0xffffff00, 100);
  else if (cmd == "noop") return;
  else if (cmd == "eio") {
    kv.get(b("eio"));
    fail("conformance: eio " + res());
  } else fail("conformance: unknown command " + key);
}

function rawIndex(isStore: bool, name: string): i32 {
  const n = b(name);
  return isStore ? host_store_index(n.dataStart, <u32>n.length) : host_output_index(n.dataStart, <u32>n.length);
}

function echo(r: Record): void {
  out.emit(r.key, r.value, r.headers, r.timestamp);
  side.emitTo(r.partition & 3, r.value, r.key);
  side.forward(r);
}

function state(): void {
  const k = b("k");
  note("get-missing", get(kv, k));
  kv.put(k, new Uint8Array(0));
  note("put-empty", res());
  note("get-empty", get(kv, k));
  kv.put(k, b("v1"));
  note("put-v1", res());
  note("get-staged", get(kv, k));
  kv.delete(k);
  kv.delete(k);
  note("delete-twice", res());
  note("get-deleted", get(kv, k));
  aux.put(k, b("aux"));
  note("put-aux", res());
  note("get-other-store", get(kv, k));
  note("get-aux", get(aux, k));
  const big = new Uint8Array(200000);
  for (let i = 0; i < big.length; i++) big[i] = <u8>((i * 7) % 251);
  kv.put(b("big"), big);
  const v = kv.get(b("big"));
  out.emit(b("get-big"), v);
  const long = b("k".repeat(MAX_KEY_SIZE + 1));
  kv.put(long, null);
  note("put-long-key", res());
  note("get-long-key", get(kv, long));
  kv.put(b("huge"), new Uint8Array(MAX_VALUE_SIZE + 1));
  note("put-huge-value", res());
  kv.put(b("max"), new Uint8Array(MAX_VALUE_SIZE));
  note("put-max-value", res());
  kv.delete(b("max"));
  const c = kv.get(b("counter"));
  let n = 0;
  if (c !== null) {
    for (let i = 0; i < c.length; i++) n = n * 10 + (c[i] - 48);
  }
  const next = (n + 1).toString();
  kv.put(b("counter"), b(next));
  note("counter", next);
}

function walk(start: Uint8Array | null, end: Uint8Array | null, to: Output, lengths: bool): void {
  const it = kv.scan(start, end);
  while (it.next()) {
    if (lengths) to.emit(it.key, b(it.value.length.toString()));
    else to.emit(it.key, it.value);
  }
}

function scan(): void {
  const puts: string[] = ["s/a", "s/b", "s/c", "s/d", "t/x"];
  const vals: string[] = ["a".repeat(10), "b".repeat(700), "c".repeat(70000), "", "x"];
  for (let i = 0; i < puts.length; i++) kv.put(b(puts[i]), b(vals[i]));
  walk(b("s/"), b("s0"), out, false);
  walk(b("s/b"), b("s/d"), side, false);
  walk(b("s/c"), null, out, true);
  const it = kv.scanPrefix(b("s/"));
  it.next();
  const closed = it.close();
  note("scan-close", closed == Errno.OK ? "ok" : errnoName(closed));
  const open = new Array<Iterator>();
  for (let i = 0; i < MAX_OPEN_CURSORS; i++) open.push(kv.scan(null, null));
  kv.scan(null, null);
  const e17 = res();
  for (let i = 0; i < open.length; i++) open[i].close();
  const buf = new Uint8Array(64);
  const kk = b("k");
  note("cursor-17", e17);
  note("next-bad", raw(host_scan_next(999, buf.dataStart, 64)));
  note("close-bad", raw(host_scan_close(999)));
  note("get-bad-store", raw(host_state_get(7, kk.dataStart, <u32>kk.length, buf.dataStart, 64)));
  note("scan-bad-store", raw(host_scan_open(7, 0, 0, 0, 0)));
}

// ---- the time script (README.md, "Time") ----

function initTime(): string {
  const k = b("k");
  setTimer(EVENT_TIME, 1, k);
  const e1 = res();
  cancelTimer(EVENT_TIME, 1, k);
  const e2 = res();
  streamTime();
  const e3 = res();
  wallTime();
  const e4 = res();
  mark(k);
  const e5 = res();
  return "init time set " + e1 + " cancel " + e2 + " stream " + e3 + " wall " + e4 + " mark " + e5;
}

/** A time call's result in the script's words: 1, 0 or the errno's name. */
function changed(ok: bool): string {
  const e = takeError();
  if (e !== null) return errnoName(e.errno);
  return ok ? "1" : "0";
}

function set(kind: u32, ts: i64, key: Uint8Array | null): string {
  return changed(setTimer(kind, ts, key));
}

function cancel(kind: u32, ts: i64, key: Uint8Array | null): string {
  return changed(cancelTimer(kind, ts, key));
}

function now(): void {
  const st = streamTime();
  const wt = wallTime();
  note("now", st.toString() + " " + wt.toString());
  note("now-bad-clock", raw(host_time_now(2)));
}

function timers(): void {
  const k = b("k");
  const big = new Uint8Array(MAX_TIMER_KEY_SIZE + 1);
  const a = b("a");
  note("set-new", set(EVENT_TIME, 5000, a));
  note("set-again", set(EVENT_TIME, 5000, a));
  note("set-processing", set(PROCESSING_TIME, 5000, a));
  note("set-empty-key", set(EVENT_TIME, 4000, null));
  note("cancel", cancel(PROCESSING_TIME, 5000, a));
  note("cancel-again", cancel(PROCESSING_TIME, 5000, a));
  note("set-kind-2", set(2, 1, k));
  note("set-kind-7", set(7, 1, k));
  note("set-negative", set(EVENT_TIME, -1, k));
  note("set-long-key", set(EVENT_TIME, 1, big));
  note("set-order", set(9, -1, big));
  note("cancel-kind-2", cancel(2, 1, k));
  note("cancel-long-key", cancel(EVENT_TIME, 1, big));
  note("set-max-key", set(EVENT_TIME, 9000, b("m".repeat(MAX_TIMER_KEY_SIZE))));
  const wall = wallTime();
  setTimer(EVENT_TIME, 6000, b("fail"));
  setTimer(EVENT_TIME, 6000, b("chain"));
  setTimer(PROCESSING_TIME, wall + 5000, b("p"));
  setTimer(EVENT_TIME, 7000, b("fault"));
  setTimer(EVENT_TIME, 7000, b("zzz"));
  // Up to the task's limit; then the ones set are cancelled again.
  let n = 0;
  let limit = "ok";
  for (; n < 10; n++) {
    setTimer(EVENT_TIME, 100000 + <i64>n, b("l"));
    const e = takeError();
    if (e !== null) {
      limit = errnoName(e.errno);
      break;
    }
  }
  for (let j = 0; j < n; j++) cancelTimer(EVENT_TIME, 100000 + <i64>j, b("l"));
  note("set-limit", n.toString() + " " + limit);
}

function marks(): void {
  note("mark-new", changed(mark(b("m2"))));
  note("mark-again", changed(mark(b("m2"))));
  mark(b("m1"));
  mark(b("cfail"));
  const long = changed(mark(new Uint8Array(MAX_TIMER_KEY_SIZE + 1)));
  let n = 0;
  let limit = "ok";
  for (; n < 10; n++) {
    mark(b("x" + n.toString()));
    const e = takeError();
    if (e !== null) {
      limit = errnoName(e.errno);
      break;
    }
  }
  note("mark-long-key", long);
  note("mark-limit", n.toString() + " " + limit);
}

function fired(f: Firing): void {
  note("fired", kindName(f.kind) + " " + f.time.toString() + " " + f.streamTime.toString() + " " + f.wallTime.toString() + " " +
    f.key.length.toString());
  const key = str(f.key);
  if (key == "fail") {
    kv.put(b("timer-fail"), b("x"));
    setTimer(EVENT_TIME, 6500, b("lost"));
    mark(b("lost-mark"));
    fail("conformance: timer failed on purpose");
  } else if (key == "chain") {
    const s = set(EVENT_TIME, f.time, b("chain2"));
    note("chain-set", s);
    note("chain-mark", changed(mark(b("t-chain"))));
  } else if (key == "fault") {
    host_emit(0xffffff00, 1000);
  }
}

function committed(c: Commit): void {
  mark(b("again"));
  const again = res();
  note("commit", str(c.key) + " " + c.timestamp.toString() + " " + c.streamTime.toString() + " " + c.wallTime.toString());
  note("commit-mark", again);
  if (str(c.key) == "cfail") fail("conformance: commit failed on purpose");
}
