// A processor with a state migration (abi/ABI.md section 13), for
// migrate.test.mjs: counts stored as JSON text, {"n":5}, become 8 bytes
// big-endian. A version ID starting "v1@" migrates; "bad@..." writes a key,
// checks that emit and setTimer are refused (EPHASE) and fails; any other
// fails at once.

import { Output, Store, Record, Errno, handle, onMigrate, fail, takeError, setTimer, EVENT_TIME, utf8, putU64BE } from "..";
export * from "../exports";
export * from "../time-exports";
export * from "../migrate-exports";

const out = new Output("out");
const counts = new Store("counts");

handle((r: Record): void => {});

onMigrate((from: string): void => {
  if (from.startsWith("bad@")) {
    counts.put(utf8("half"), utf8("written"));
    const emitted = out.emit(null, utf8("x"));
    takeError();
    setTimer(EVENT_TIME, 5, utf8("t"));
    const timer = takeError();
    if (emitted != Errno.PHASE || timer === null || timer.errno != Errno.PHASE) {
      fail("emit or setTimer was not refused with EPHASE");
      return;
    }
    fail("the migration fails");
    return;
  }
  if (!from.startsWith("v1@")) {
    fail("no migration from " + from);
    return;
  }
  const keys = new Array<Uint8Array>();
  const vals = new Array<string>();
  const it = counts.scan(null, null);
  while (it.next()) {
    keys.push(it.key.slice());
    vals.push(String.UTF8.decode(it.value.slice().buffer));
  }
  it.close();
  for (let i = 0; i < keys.length; i++) {
    const v = vals[i];
    if (!v.startsWith("{\"n\":") || !v.endsWith("}")) {
      fail("not a JSON count: " + v);
      return;
    }
    const n = U64.parseInt(v.slice(5, v.length - 1));
    const b = new Uint8Array(8);
    putU64BE(b, 0, n);
    counts.put(keys[i], b);
  }
});
