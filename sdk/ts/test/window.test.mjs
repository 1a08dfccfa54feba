// The window helpers (assembly/window.ts) against the fake host, with the
// test processor window.ts: the Go SDK's sdk/window tests, ported, and the
// state layout checked against the Go SDK's (the same keys and values).

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "../fake.mjs";
import { built } from "./helpers.mjs";

async function start(config, extra = {}) {
  const h = await FakeHost.start(await built("window"), { outputs: ["out", "late"], stores: ["w"], config, ...extra });
  assert.equal(h.initError, null);
  return h;
}

const rec = (key, ts) => ({ key, value: "v", timestamp: ts });

function outs(res) {
  assert.equal(res.failed(), null);
  return res.to("out").map((e) => text(e.value));
}

function expect(what, res, ...want) {
  assert.deepEqual(outs(res), want, what);
}

function lateCount(h) {
  return outs(h.process({ key: "__late", timestamp: -1 }))[0];
}

/** A seeded generator (xorshift), so the random tests are the same every run. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x % n;
  };
}

test("tumbling windows, emit final", async () => {
  const h = await start("size=10,grace=5");
  expect("a@1", h.process(rec("a", 1)));
  expect("b@3", h.process(rec("b", 3)));
  expect("a@9", h.process(rec("a", 9)));
  expect("a@12: [0,10) is open until stream time 15", h.process(rec("a", 12)));
  expect("a@7 out of order, within grace", h.process(rec("a", 7)));
  const res = h.process(rec("c", 15));
  expect("c@15 closes [0,10)", res, "a 0-10 3 final", "b 0-10 1 final");
  assert.equal(res.to("out")[0].timestamp, 9, "the largest record timestamp");
  expect("a@8 is late", h.process(rec("a", 8)));
  expect("c@100 closes [10,20)", h.process(rec("c", 100)), "a 10-20 1 final", "c 10-20 1 final");
  assert.equal(h.state("w").size, 2); // c's window [100,110) and the late count
});

test("the state layout is the Go SDK's: name, 0, tag, u32 key length, key, start (sortable); flags, end, max timestamp, aggregate", async () => {
  const h = await start("size=10,grace=5");
  h.process(rec("ab", 3));
  const [[k, v]] = h.state("w").entries();
  assert.equal(Buffer.from(k).toString("hex"), "740077" + "00000002" + "6162" + "8000000000000000");
  assert.equal(Buffer.from(v).toString("hex"), "00" + "000000000000000a" + "0000000000000003" + "0000000000000001");
  assert.deepEqual(h.timers().map((t) => [t.time, Buffer.from(t.key).toString("hex")]), [[15, Buffer.from(k).toString("hex")]]);
});

test("late records are counted and routed, with a header naming the windows", async () => {
  const h = await start("size=10,late=1");
  outs(h.process(rec("a", 25)));
  const res = h.process({ key: "a", value: "old", timestamp: 9, headers: [["h", "1"]] });
  const l = res.to("late");
  assert.equal(l.length, 1);
  assert.equal(text(l[0].value), "old");
  assert.equal(l[0].timestamp, 9);
  assert.deepEqual(l[0].headers.map((x) => [x.name, text(x.value)]), [["h", "1"], ["wasmstream-window-late", "t"]]);
  outs(h.process({ key: "a", timestamp: -1 })); // no timestamp: late too
  assert.equal(lateCount(h), "late 2");
});

test("hopping windows", async () => {
  const h = await start("size=10,advance=5,emit=update");
  expect("a@7", h.process(rec("a", 7)), "a 0-10 1", "a 5-15 1");
  expect("a@12", h.process(rec("a", 12)), "a 5-15 2", "a 10-20 1");
  expect("a@3 fits no open window", h.process(rec("a", 3)));
  expect("a@6 fits [5,15)", h.process(rec("a", 6)), "a 5-15 3");
  expect("b@2 is late", h.process(rec("b", 2)));
  const h2 = await start("size=10,advance=5,emit=update");
  expect("windows start at 0", h2.process(rec("a", 2)), "a 0-10 1");
});

test("emit on commit", async () => {
  const h = await start("size=10,emit=commit");
  for (const ts of [1, 2, 3]) expect("a", h.process(rec("a", ts)));
  outs(h.process(rec("b", 4)));
  expect("commit 1", h.commit(), "a 0-10 3", "b 0-10 1");
  expect("commit 2: nothing changed", h.commit());
  outs(h.process(rec("a", 5)));
  expect("close", h.process(rec("c", 10)), "a 0-10 4 final");
  expect("commit 3", h.commit(), "c 10-20 1");
  expect("close c", h.process(rec("c", 25)));
});

test("emit on commit past the commit-mark limit emits at once", async () => {
  const h = await start("size=10,emit=commit", { limits: { marks: 1 } });
  expect("a", h.process(rec("a", 1)));
  expect("b over the limit", h.process(rec("b", 1)), "b 0-10 1");
  expect("commit", h.commit(), "a 0-10 1");
});

test("sessions", async () => {
  const h = await start("gap=10,grace=20");
  for (const [k, ts] of [["a", 100], ["a", 105], ["a", 125], ["a", 115], ["b", 120]]) outs(h.process(rec(k, ts)));
  expect("nothing closed yet", h.process(rec("z", 150)));
  expect("b closes", h.process(rec("z", 151)), "b 120-121 1 final");
  expect("a closes", h.process(rec("z", 156)), "a 100-126 4 final");
  expect("z closes", h.process(rec("y", 300)), "z 150-157 3 final");
});

test("sessions, emit update: a merged session is retracted", async () => {
  const h = await start("gap=10,grace=50,emit=update");
  expect("1", h.process(rec("a", 100)), "a 100-101 1");
  expect("2", h.process(rec("a", 120)), "a 120-121 1");
  expect("bridge", h.process(rec("a", 110)), "a 120-121 retract", "a 100-121 3");
  expect("earlier", h.process(rec("a", 95)), "a 100-121 retract", "a 95-121 4");
  expect("inside", h.process(rec("a", 115)), "a 95-121 5");
  assert.equal(h.state("w").size, 1);
});

test("sessions: a record that would merge into a closed session is late", async () => {
  const h = await start("gap=10,grace=5");
  for (const [k, ts] of [["a", 100], ["b", 200], ["a", 95], ["b", 186]]) outs(h.process(rec(k, ts)));
  assert.equal(lateCount(h), "late 1");
});

test("sessions, emit on commit: retracted only if emitted", async () => {
  const h = await start("gap=10,grace=100,emit=commit");
  expect("a@100", h.process(rec("a", 100)));
  expect("commit 1", h.commit(), "a 100-101 1");
  expect("a@120", h.process(rec("a", 120)));
  expect("a@140", h.process(rec("a", 140)));
  expect("commit 2", h.commit(), "a 120-121 1", "a 140-141 1");
  expect("a@160 not yet emitted", h.process(rec("a", 160)));
  expect("bridge 120-140", h.process(rec("a", 130)), "a 140-141 retract");
  expect("bridge to 160", h.process(rec("a", 150)));
  expect("commit 3", h.commit(), "a 120-161 5");
  expect("close", h.process(rec("z", 1000)));
  assert.equal(h.state("w").size, 1);
});

test("a bad spec fails the start, saying what is wrong", async () => {
  for (const [config, want] of [["size=10,advance=11", "advance must be in (0, size]"], ["", "set exactly one of size"],
    ["gap=10,advance=3", "advance is for hopping windows"], ["size=10,grace=-1", "grace must not be negative"],
    ["size=10,emit=bad", "unknown emit mode 9"], ["size=10,name=", "name is required"]]) {
    const h = await FakeHost.start(await built("window"), { outputs: ["out", "late"], stores: ["w"], config });
    assert.ok(h.initError !== null && h.initError.includes(want), `${config}: ${h.initError}`);
  }
});

test("timers and marks that are not the windows' are not taken", async () => {
  const h = await start("size=10,name=x");
  for (const k of ["", "x", "y\u0000w", "x\u0000w\u0000\u0000\u0000\u0009short"]) {
    const raw = new Uint8Array(32 + k.length);
    const dv = new DataView(raw.buffer);
    dv.setUint32(28, k.length, true);
    raw.set(Buffer.from(k, "latin1"), 32);
    assert.match(h.callbackRaw(raw, false).error, /a timer that is not the windows'/, JSON.stringify(k));
    dv.setUint32(24, 2, true);
    assert.match(h.callbackRaw(raw, true).error, /a mark that is not the windows'/, JSON.stringify(k));
  }
});

// Out-of-order input against a reference computed independently: every
// window that received a record is emitted once, after it closed, with the
// count of the records that came before the stream time passed its end
// plus grace; every other record is late.
test("random out-of-order input against a reference", async () => {
  for (const [size, adv, grace] of [[100, 100, 0], [100, 25, 40], [60, 40, 10]]) {
    const h = await start(`size=${size},advance=${adv},grace=${grace}`, { commitEvery: 7 });
    const rand = rng(size * 1000 + adv + grace);
    const want = new Map();
    let stream = -1;
    let lateWant = 0;
    const got = [];
    for (let i = 0; i < 1000; i++) {
      const ts = Math.max(0, i * 3 + rand(240) - 120);
      const key = "k" + rand(5);
      stream = Math.max(stream, ts);
      let applied = false;
      for (let s = Math.floor(Math.max(0, ts - size + adv) / adv) * adv; s <= ts; s += adv) {
        if (s + size + grace > stream) {
          want.set(`${key} ${s}`, (want.get(`${key} ${s}`) || 0) + 1);
          applied = true;
        }
      }
      if (!applied) lateWant++;
      got.push(...outs(h.process(rec(key, ts))));
    }
    got.push(...outs(h.process(rec("end", 2 ** 40))));
    const seen = new Map();
    for (const g of got) {
      const [key, span, n, fin] = g.split(" ");
      assert.equal(fin, "final", g);
      if (key === "end") continue;
      const id = `${key} ${span.split("-")[0]}`;
      assert.ok(!seen.has(id), `window ${id} emitted twice`);
      seen.set(id, Number(n));
    }
    assert.deepEqual(new Map([...seen].sort()), new Map([...want].sort()), `${size}/${adv}/${grace}`);
    assert.ok(lateWant > 0);
    assert.equal(lateCount(h), `late ${lateWant}`);
  }
});
