// The test processor of window.test.mjs: the windows its config describes
// ("size=10,advance=5,gap=0,grace=5,emit=final|update|commit,late=1"),
// each result emitted to "out" as "key start-end count[ final]" (count
// "retract" for a retraction) with the result's timestamp. A record keyed
// "__late" emits "late N" instead (the late count).

import {
  Output, Store, Record, Firing, Commit, WindowSpec, Windows, WindowResult, EmitMode, countAggregate, mergeCounts, countOf,
  handle, onInit, onTimer, onCommit, configString, fail, utf8, str,
} from "..";
export * from "../exports";
export * from "../time-exports";

const out = new Output("out");
const late = new Output("late");
const st = new Store("w");
let w: Windows | null = null;

function result(res: WindowResult): void {
  const agg = res.agg;
  const v = agg === null ? "retract" : countOf(agg).toString();
  let s = str(res.key) + " " + res.window.start.toString() + "-" + res.window.end.toString() + " " + v;
  if (res.final) s += " final";
  out.emit(res.key, utf8(s), null, res.timestamp);
}

function setup(): void {
  const spec = new WindowSpec("t", st, countAggregate, result);
  const parts = configString().split(",");
  for (let i = 0; i < parts.length; i++) {
    const kv = parts[i].split("=");
    if (kv.length != 2) continue;
    const k = kv[0], v = kv[1];
    if (k == "name") spec.name = v;
    else if (k == "size") spec.size = I64.parseInt(v);
    else if (k == "advance") spec.advance = I64.parseInt(v);
    else if (k == "gap") spec.sessions(I64.parseInt(v), mergeCounts);
    else if (k == "grace") spec.grace = I64.parseInt(v);
    else if (k == "emit") spec.emit = v == "update" ? EmitMode.UPDATE : v == "commit" ? EmitMode.ON_COMMIT : v == "bad" ? <EmitMode>9 : EmitMode.FINAL;
    else if (k == "late") spec.lateTo(late);
  }
  w = Windows.create(spec);
}

function process(r: Record): void {
  if (str(r.key) == "__late") {
    out.emit(null, utf8("late " + w!.lateCount().toString()));
    return;
  }
  w!.add(r);
}

onInit(setup);
handle(process);
onTimer((f: Firing): void => {
  if (!w!.onTimer(f)) fail("a timer that is not the windows': " + str(f.key));
});
onCommit((c: Commit): void => {
  if (!w!.onCommit(c)) fail("a mark that is not the windows': " + str(c.key));
});
