// The test processor of the SDK's native tests (sdk.test.mjs,
// time.test.mjs). With config "echo" it emits every record to "out" as it
// came (emit, with all its fields) and then forwards it to "side": the
// shared record vectors run through it. Otherwise a record's value is a
// list of commands, run in order, whose results go to "out"; see run().
// Its timer callback emits "fired KIND TIME KEY stream=S wall=W" (keyed by
// the timer's key) and its commit callback "commit KEY TIMESTAMP stream=S
// wall=W mark=ERR" (the result of a mark there, which is refused).

import {
  Output, Store, Record, Header, Firing, Commit, Errno, errnoName, handle, onInit, onTimer, onCommit, config, configString,
  fail, takeError, utf8, str, log, Level, setTimer, cancelTimer, streamTime, wallTime, mark, kindName, EVENT_TIME, PROCESSING_TIME,
} from "..";
export * from "../exports";
export * from "../time-exports";

const out = new Output("out");
const side = new Output("side");
const s = new Store("s");
let echo = false;

function b(t: string): Uint8Array | null {
  return t == "~" ? null : utf8(t);
}

function say(t: string): void {
  out.emit(null, utf8(t));
}

function bytesOf(n: i32): Uint8Array {
  const v = new Uint8Array(n);
  for (let i = 0; i < n; i++) v[i] = <u8>(i % 251);
  return v;
}

function run(r: Record): void {
  if (echo) {
    out.emit(r.key, r.value, r.headers, r.timestamp);
    side.forward(r);
    return;
  }
  const cmds = str(r.value).split(" ");
  for (let i = 0; i < cmds.length; i++) {
    const c = cmds[i];
    if (c.length == 0) continue;
    const f = c.split(":");
    const op = f[0];
    if (op == "emit") out.emit(b(f[1]), b(f[2]));
    else if (op == "emitto") out.emitTo(I32.parseInt(f[1]), b(f[2]), b(f[3]));
    else if (op == "emitts") out.emit(b(f[1]), b(f[2]), null, I64.parseInt(f[3]));
    else if (op == "hdr") out.emit(utf8("h"), null, [new Header("a", utf8("1")), new Header("null", null), new Header("e", new Uint8Array(0))]);
    else if (op == "fwd") out.forward(r);
    else if (op == "fwdside") side.forward(r);
    else if (op == "put") s.put(b(f[1]), b(f[2]));
    else if (op == "putn") s.put(b(f[1]), bytesOf(I32.parseInt(f[2])));
    else if (op == "get") {
      const v = s.get(b(f[1]));
      say("get " + f[1] + "=" + (v === null ? "missing" : "found:" + (v.length > 64 ? v.length.toString() + "B" : str(v))));
    } else if (op == "has") say("has " + f[1] + "=" + (s.has(b(f[1])) ? "yes" : "no"));
    else if (op == "del") s.delete(b(f[1]));
    else if (op == "scan") {
      const it = f.length > 2 ? s.scan(b(f[1]), b(f[2])) : s.scanPrefix(b(f[1])!);
      while (it.next()) say(str(it.key) + "=" + (it.value.length > 64 ? it.value.length.toString() + "B" : str(it.value)));
    } else if (op == "cursors") {
      let n = 0;
      while (n < 20) {
        s.scan(null, null);
        const e = takeError();
        if (e !== null) {
          say("cursors " + n.toString() + " " + errnoName(e.errno));
          break;
        }
        n++;
      }
    } else if (op == "take") {
      const e = takeError();
      say("took " + (e === null ? "none" : e.errno != Errno.OK ? errnoName(e.errno) + " " + e.message : e.message));
    } else if (op == "fail") fail(f.length > 1 ? f[1] : "");
    else if (op == "trap") unreachable();
    else if (op == "throw") throw new Error("thrown on purpose");
    else if (op == "index") {
      const a = [1, 2, 3];
      say(a[I32.parseInt(f[1])].toString());
    } else if (op == "bigemit") out.emit(utf8("big"), bytesOf(I32.parseInt(f[1])));
    else if (op == "fields") {
      const k = r.key, v = r.value;
      say(r.timestamp.toString() + " " + r.offset.toString() + " " + r.partition.toString() + " " + r.input.toString() + " " +
        (k === null ? "null" : k.length.toString()) + " " + (v === null ? "null" : v.length.toString()) + " " + r.headers.length.toString());
    } else if (op == "header") {
      const v = r.header(f[1]);
      say(f[1] + "=" + (r.hasHeader(f[1]) ? (v === null ? "null" : str(v)) : "none"));
    } else if (op == "config") say(configString());
    else if (op == "log") log(<Level>I32.parseInt(f[1]), f[2]);
    else if (op == "longlog") log(Level.INFO, "L".repeat(5000));
    else if (op == "undeclared") new Output("nope").emit(null, null);
    else if (op == "set" || op == "cancel") {
      const kind = f[1] == "p" ? PROCESSING_TIME : f[1] == "e" ? EVENT_TIME : <u32>I32.parseInt(f[1]);
      const ts = I64.parseInt(f[2]);
      const changed = op == "set" ? setTimer(kind, ts, b(f[3])) : cancelTimer(kind, ts, b(f[3]));
      say(c + "=" + (changed ? "true" : "false"));
    } else if (op == "setbig") setTimer(EVENT_TIME, I64.parseInt(f[1]), bytesOf(I32.parseInt(f[2])));
    else if (op == "mark") mark(b(f[1]));
    else if (op == "now") say("now " + streamTime().toString() + " " + wallTime().toString());
    else fail("unknown command " + c);
  }
}

function fired(t: Firing): void {
  const key = str(t.key);
  if (key.startsWith("fail") || key == "trap") {
    s.put(t.key, utf8("x"));
    setTimer(EVENT_TIME, 1000, t.key);
    say("lost");
    if (key == "trap") unreachable();
    fail("callback says no");
    return;
  }
  if (key == "again1") setTimer(EVENT_TIME, t.time, utf8("again2"));
  if (key.startsWith("mark")) mark(t.key);
  const shown = t.key.length > 64 ? t.key.length.toString() + "B" : key;
  out.emit(t.key, utf8("fired " + kindName(t.kind) + " " + t.time.toString() + " " + shown + " stream=" + t.streamTime.toString() +
    " wall=" + t.wallTime.toString()));
}

function committed(c: Commit): void {
  mark(utf8("again"));
  const e = takeError();
  out.emit(c.key, utf8("commit " + str(c.key) + " " + c.timestamp.toString() + " stream=" + c.streamTime.toString() + " wall=" +
    c.wallTime.toString() + " mark=" + (e === null ? "ok" : errnoName(e.errno))));
}

onInit((): void => {
  echo = configString() == "echo";
  if (configString() == "init-fails") fail("init says no");
  if (configString() == "init-time") {
    setTimer(EVENT_TIME, 1, null);
    const e1 = takeError();
    streamTime();
    const e2 = takeError();
    mark(null);
    const e3 = takeError();
    wallTime();
    const e4 = takeError();
    out.emit(null, null);
    const e5 = takeError();
    s.get(utf8("k"));
    const e6 = takeError();
    log(Level.INFO, "init " + errnoName(e1!.errno) + " " + errnoName(e2!.errno) + " " + errnoName(e3!.errno) + " " + errnoName(e4!.errno) +
      " " + errnoName(e5!.errno) + " " + errnoName(e6!.errno) + " config " + config().length.toString());
  }
});
handle(run);
onTimer(fired);
onCommit(committed);
