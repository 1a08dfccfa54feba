// The test processor of join.test.mjs: the join its config describes
// ("kind=inner|left|outer,before=5,after=5,grace=0,late=1"; inputs 0 and 1
// are left and right), each result emitted to "out" as "key l@ts|r@ts"
// ("-" for a missing side, "null" for a null value) with the result's
// timestamp. A record keyed "__late" emits "late N".

import {
  Output, Store, Record, Firing, JoinSpec, Join, JoinResult, JoinKind, Side, handle, onInit, onTimer, configString, fail, utf8, str,
} from "..";
export * from "../exports";
export * from "../time-exports";

const out = new Output("out");
const late = new Output("late");
const st = new Store("j");
let j: Join | null = null;

function side(s: Side | null): string {
  if (s === null) return "-";
  const v = s.value;
  return (v === null ? "null" : str(v)) + "@" + s.timestamp.toString();
}

function result(res: JoinResult): void {
  out.emit(res.key, utf8(str(res.key) + " " + side(res.left) + "|" + side(res.right)), null, res.timestamp);
}

function setup(): void {
  const spec = new JoinSpec("j", st, 0, 1, result);
  const parts = configString().split(",");
  for (let i = 0; i < parts.length; i++) {
    const kv = parts[i].split("=");
    if (kv.length != 2) continue;
    const k = kv[0], v = kv[1];
    if (k == "kind") spec.kind = v == "left" ? JoinKind.LEFT : v == "outer" ? JoinKind.OUTER : JoinKind.INNER;
    else if (k == "before") spec.before = I64.parseInt(v);
    else if (k == "after") spec.after = I64.parseInt(v);
    else if (k == "grace") spec.grace = I64.parseInt(v);
    else if (k == "right") spec.right = <u32>I32.parseInt(v);
    else if (k == "late") spec.lateTo(late);
  }
  j = Join.create(spec);
}

function process(r: Record): void {
  if (str(r.key) == "__late") {
    out.emit(null, utf8("late " + j!.lateCount().toString()));
    return;
  }
  j!.add(r);
}

onInit(setup);
handle(process);
onTimer((f: Firing): void => {
  if (!j!.onTimer(f)) fail("a timer that is not the join's: " + str(f.key));
});
