// The join helpers (assembly/join.ts) against the fake host, with the test
// processor join.ts: the Go SDK's sdk/join tests, ported.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "../fake.mjs";
import { built } from "./helpers.mjs";

const L = 0, R = 1;
let offset = 0;

async function start(config, extra = {}) {
  const h = await FakeHost.start(await built("join"), { outputs: ["out", "late"], stores: ["j"], config, ...extra });
  assert.equal(h.initError, null);
  return h;
}

const rec = (input, key, value, ts) => ({ input, key, value, timestamp: ts, offset: ++offset });

function outs(res) {
  assert.equal(res.failed(), null);
  return res.to("out").map((e) => text(e.value));
}

function expect(what, res, ...want) {
  assert.deepEqual(outs(res), want, what);
}

function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x % n;
  };
}

test("inner join", async () => {
  const h = await start("before=10,after=20,grace=5");
  expect("l1@100", h.process(rec(L, "a", "l1", 100)));
  expect("r1@95 joins l1", h.process(rec(R, "a", "r1", 95)), "a l1@100|r1@95");
  expect("r2@120 joins l1", h.process(rec(R, "a", "r2", 120)), "a l1@100|r2@120");
  expect("r3@121 is past l1+after", h.process(rec(R, "a", "r3", 121)));
  expect("other key", h.process(rec(R, "b", "rb", 118)));
  const res = h.process(rec(L, "a", "l2", 119));
  expect("l2@119 joins r2, r3 in timestamp order", res, "a l2@119|r2@120", "a l2@119|r3@121");
  assert.equal(res.to("out")[1].timestamp, 121);
});

test("left join: an unmatched left record once its window has passed", async () => {
  const h = await start("kind=left,before=0,after=10,grace=5");
  expect("l@100", h.process(rec(L, "a", "l", 100)));
  expect("m@100", h.process(rec(L, "b", "m", 100)));
  expect("r@108 matches l", h.process(rec(R, "a", "r", 108)), "a l@100|r@108");
  expect("stream 115", h.process(rec(R, "z", "x", 115)));
  expect("stream 116 expires l and m", h.process(rec(R, "z", "x", 116)), "b m@100|-");
  expect("late for m", h.process(rec(R, "b", "r", 110)));
});

test("outer join", async () => {
  const h = await start("kind=outer,before=5,after=5");
  expect("r@10", h.process({ key: "a", value: null, timestamp: 10, input: R, offset: 1 }));
  expect("l@50 expires r", h.process(rec(L, "b", "l", 50)), "a -|null@10");
  expect("l@100 expires l@50", h.process(rec(L, "c", "l", 100)), "b l@50|-");
});

test("an empty value is not null", async () => {
  const h = await start("kind=outer,before=5,after=5");
  expect("l@10 empty", h.process(rec(L, "a", "", 10)));
  expect("r@12 joins", h.process(rec(R, "a", "r", 12)), "a @10|r@12");
  expect("r@40 empty", h.process(rec(R, "b", "", 40)));
  expect("l@41 joins", h.process(rec(L, "b", "l", 41)), "b l@41|@40");
});

test("late records are counted and routed", async () => {
  const h = await start("before=10,after=10,grace=5,late=1");
  outs(h.process(rec(L, "a", "l", 100)));
  const res = h.process(rec(R, "a", "old", 94));
  assert.deepEqual(outs(res), []);
  const l = res.to("late");
  assert.equal(l.length, 1);
  assert.equal(text(l[0].value), "old");
  assert.equal(l[0].headers.at(-1).name, "wasmstream-join-late");
  outs(h.process({ key: "a", timestamp: -1, input: L }));
  assert.deepEqual(outs(h.process({ key: "__late", timestamp: -1 })), ["late 2"]);
});

test("the buffer is deleted when the window passes", async () => {
  const h = await start("before=10,after=10,grace=5");
  for (let i = 0; i < 50; i++) outs(h.process(rec(i % 2, "k" + (i % 7), "v", 1000 + i)));
  outs(h.process(rec(L, "end", "v", 10_000)));
  assert.equal(h.state("j").size, 1);
  assert.equal(h.timers().length, 1);
});

test("a record of another input fails", async () => {
  const h = await start("after=1");
  assert.match(h.process(rec(2, "a", "v", 1)).error, /input 2/);
});

test("a bad spec fails the start", async () => {
  const h = await FakeHost.start(await built("join"), { outputs: ["out", "late"], stores: ["j"], config: "right=0" });
  assert.match(h.initError, /left and right must be different inputs/);
});

test("random out-of-order streams against a brute-force join", async () => {
  for (const kind of ["inner", "left", "outer"]) {
    for (let seed = 1; seed <= 3; seed++) {
      const rand = rng(seed * 7 + kind.length);
      const before = rand(30), after = rand(30), grace = rand(20);
      const h = await start(`kind=${kind},before=${before},after=${after},grace=${grace}`);
      const accepted = [];
      const got = [];
      let stream = -1;
      let base = 1000;
      for (let i = 0; i < 300; i++) {
        base += rand(4);
        const r = { input: rand(2), key: "k" + rand(5), val: "v" + i, ts: base - rand(grace + 15) };
        stream = Math.max(stream, r.ts);
        if (r.ts >= stream - grace) accepted.push(r);
        got.push(...outs(h.process(rec(r.input, r.key, r.val, r.ts))));
      }
      got.push(...outs(h.process(rec(L, "end", "x", base + 1_000_000))));
      const want = [];
      const matched = new Array(accepted.length).fill(false);
      accepted.forEach((l, a) => {
        if (l.input !== L) return;
        accepted.forEach((r, b) => {
          if (r.input === R && r.key === l.key && r.ts >= l.ts - before && r.ts <= l.ts + after) {
            want.push(`${l.key} ${l.val}@${l.ts}|${r.val}@${r.ts}`);
            matched[a] = matched[b] = true;
          }
        });
      });
      accepted.forEach((r, i) => {
        if (matched[i]) return;
        if (r.input === L && kind !== "inner") want.push(`${r.key} ${r.val}@${r.ts}|-`);
        if (r.input === R && kind === "outer") want.push(`${r.key} -|${r.val}@${r.ts}`);
      });
      assert.deepEqual(got.filter((g) => !g.startsWith("end ")).sort(), want.sort(), `${kind}/${seed}`);
    }
  }
});
