// Time (abi/ABI.md section 8) with the SDK against the fake host: timers
// on event and processing time, the two clocks, commit marks, the
// callbacks, store expiry, and the shared trigger vectors of
// abi/testdata/triggers.json. The test processor is sdk.ts; these are the
// Go SDK's sdk/timer tests, ported.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { FakeHost, DEFAULT_WALL_TIME, EVENT_TIME, PROCESSING_TIME, text } from "../fake.mjs";
import { built } from "./helpers.mjs";

const opts = { outputs: ["out", "side"], stores: ["s"] };

async function host(extra = {}) {
  const h = await FakeHost.start(await built("sdk"), { ...opts, ...extra });
  assert.equal(h.initError, null);
  return h;
}

function values(res) {
  assert.equal(res.failed(), null);
  return res.all.map((e) => text(e.value));
}

function step(h, ts, commands) {
  return values(h.process({ key: "k", value: commands, timestamp: ts }));
}

const W = DEFAULT_WALL_TIME;

test("set and cancel: a timer is its kind, time and key", async () => {
  const h = await host();
  assert.deepEqual(step(h, 10, "set:e:100:a set:e:100:a set:p:100:a set:e:100:b cancel:e:100:b cancel:e:100:b"),
    ["set:e:100:a=true", "set:e:100:a=false", "set:p:100:a=true", "set:e:100:b=true", "cancel:e:100:b=true", "cancel:e:100:b=false"]);
  assert.deepEqual(h.timers().map((t) => [t.kind, t.time, text(t.key)]), [[EVENT_TIME, 100, "a"], [PROCESSING_TIME, 100, "a"]]);
});

test("event-time timers fire after the record that moves the stream time to them, in order", async () => {
  const h = await host();
  step(h, 10, "set:e:100:b set:e:100:a set:e:50:z set:p:10:p");
  assert.deepEqual(step(h, 49, "now"), [`now 49 ${W}`]);
  const res = h.process({ value: "now", timestamp: 120 });
  assert.deepEqual(values(res), [`now 120 ${W}`, `fired event 50 z stream=120 wall=${W}`, `fired event 100 a stream=120 wall=${W}`,
    `fired event 100 b stream=120 wall=${W}`]);
  assert.equal(res.callbacks.length, 3);
  assert.equal(res.all[1].timestamp, 50, "an emit in a callback defaults to the timer's time");
  // Out of order: the stream time stays; only the processing-time timer is left.
  assert.deepEqual(step(h, 5, "now"), [`now 120 ${W}`]);
  assert.equal(h.streamTime, 120);
  assert.equal(h.timers().length, 1);
  step(h, -1, ""); // no timestamp: the stream time does not move
  assert.equal(h.streamTime, 120);
});

test("processing-time timers fire at commit points, when the wall clock has reached them", async () => {
  const h = await host({ wallTime: 1000 });
  step(h, 1, "set:p:61000:k set:p:1000:now");
  assert.equal(h.process({ value: "", timestamp: 2 }).callbacks.length, 0);
  assert.deepEqual(values(h.commit()), ["fired processing 1000 now stream=2 wall=1000"]);
  assert.deepEqual(values(h.advanceWallTime(59_000)), []);
  const res = h.advanceWallTime(1000);
  assert.deepEqual(values(res), ["fired processing 61000 k stream=2 wall=61000"]);
  assert.equal(res.all[0].timestamp, 61000);
  assert.equal(h.timers().length, 0);
});

test("a timer a callback sets that is due already fires at the next check", async () => {
  const h = await host();
  const first = h.process({ value: "set:e:5:again1", timestamp: 10 });
  assert.deepEqual(first.callbacks.map((c) => text(c.key)), ["again1"]);
  assert.deepEqual(h.timers().map((t) => text(t.key)), ["again2"]);
  assert.deepEqual(h.process({ value: "", timestamp: 10 }).callbacks.map((c) => text(c.key)), ["again2"]);
});

test("at most the firings limit fire per commit window; the rest wait, in order", async () => {
  const h = await host({ limits: { firings: 2 } });
  step(h, 0, "set:e:1:a set:e:2:b set:e:3:c set:e:4:d set:e:5:e");
  assert.equal(h.process({ value: "", timestamp: 10 }).callbacks.length, 2);
  assert.equal(h.process({ value: "", timestamp: 11 }).callbacks.length, 0);
  assert.deepEqual(values(h.commit()), []);
  assert.deepEqual(step(h, 12, ""), [`fired event 3 c stream=12 wall=${W}`, `fired event 4 d stream=12 wall=${W}`]);
});

test("the pending-timers limit: ELIMIT fails the call unless taken; a cancel in the call frees a place", async () => {
  const h = await host({ limits: { timers: 2 } });
  const res = h.process({ value: "set:e:10:a set:e:10:a set:e:11:b set:e:12:c", timestamp: 0 });
  assert.equal(res.error, "sdk: timer_set: ELIMIT: per-record limit reached");
  step(h, 0, "set:e:10:a set:e:11:b cancel:e:10:a set:e:12:c");
  assert.deepEqual(h.timers().map((t) => text(t.key)), ["b", "c"]);
});

test("timer arguments are checked: kind, time, key size", async () => {
  const h = await host();
  assert.deepEqual(step(h, 0, `set:2:1:k take set:e:-1:k take setbig:1:4097 take cancel:7:1:k take mark:${"m".repeat(4097)} take`), [
    "set:2:1:k=false", "took EINVAL sdk: timer_set: EINVAL: malformed argument",
    "set:e:-1:k=false", "took EINVAL sdk: timer_set: EINVAL: malformed argument",
    "took ETOOLARGE sdk: timer_set: ETOOLARGE: over the size limit",
    "cancel:7:1:k=false", "took EINVAL sdk: timer_cancel: EINVAL: malformed argument",
    "took ETOOLARGE sdk: commit_mark: ETOOLARGE: over the size limit"]);
});

test("a failed callback's emits, state writes and timer changes are discarded, and its timer stays removed; a trap replaces the instance", async () => {
  const h = await host();
  step(h, 0, "set:e:1:fail set:e:2:trap");
  const res = h.process({ value: "", timestamp: 5 });
  assert.equal(res.error, null);
  assert.equal(res.callbacks.length, 2);
  assert.equal(res.all.length, 0);
  assert.equal(res.callbacks[0].error, "callback says no");
  assert.match(res.callbacks[1].error, /^trap: /);
  assert.match(res.failed(), /event callback for key "fail" at 1: callback says no/);
  assert.equal(h.timers().length, 0);
  assert.equal(h.state("s").size, 0);
  assert.deepEqual(step(h, 6, "now"), [`now 6 ${W}`]);
  assert.equal(h.instances, 2);
});

test("a failed record's timer changes and marks are discarded, but it moved the stream time", async () => {
  const h = await host();
  const res = h.process({ value: "set:e:100:a mark:k fail:no", timestamp: 40 });
  assert.equal(res.error, "no");
  assert.equal(h.timers().length, 0);
  assert.equal(h.marked().length, 0);
  assert.equal(h.streamTime, 40);
});

test("commit marks: one call per key per window, in key order, with the last mark's timestamp; refused in the commit callback", async () => {
  const h = await host({ wallTime: 0 });
  step(h, 7, "mark:b mark:a");
  step(h, 5, "mark:b set:p:0:markt");
  assert.deepEqual(h.marked().map(text), ["a", "b"]);
  const res = h.commit();
  // markt fires first (a timer due at the commit point) and marks itself.
  assert.deepEqual(values(res), ["fired processing 0 markt stream=7 wall=0", "commit a 7 stream=7 wall=0 mark=EPHASE",
    "commit b 5 stream=7 wall=0 mark=EPHASE", "commit markt 0 stream=7 wall=0 mark=EPHASE"]);
  assert.deepEqual([res.all[1].timestamp, res.all[2].timestamp], [7, 5]);
  assert.deepEqual(values(h.commit()), []);
});

test("the commit-marks limit: ELIMIT for a new key past it", async () => {
  const h = await host({ limits: { marks: 2 } });
  assert.deepEqual(step(h, 0, "mark:a take mark:b take mark:a take mark:c take"),
    ["took none", "took none", "took none", "took ELIMIT sdk: commit_mark: ELIMIT: per-record limit reached"]);
});

test("commitEvery runs a commit point after every n records", async () => {
  const h = await host({ commitEvery: 2 });
  assert.deepEqual(step(h, 0, "mark:x"), []);
  assert.deepEqual(step(h, 0, "mark:x"), [`commit x 0 stream=0 wall=${W} mark=EPHASE`]);
});

test("a task restored with a stream time", async () => {
  const h = await host({ streamTime: 500 });
  assert.deepEqual(step(h, 3, "now"), [`now 500 ${W}`]);
});

test("the largest timer key arrives whole (its trigger is larger than the first input buffer)", async () => {
  const h = await host();
  const res = h.process({ value: "setbig:1:4096", timestamp: 1 });
  assert.equal(res.failed(), null);
  assert.equal(res.callbacks.length, 1);
  assert.equal(res.all[0].key.length, 4096);
});

test("store expiry on the stream clock: unreadable at once, deleted at the next commit point, renewed by a write", async () => {
  const h = await host({ ttl: { s: { ms: 100, clock: "stream" } } });
  step(h, 1000, "put:a:1");
  step(h, 1050, "put:b:2");
  assert.deepEqual(step(h, 1099, "get:a"), ["get a=found:1"]);
  assert.deepEqual(step(h, 1100, "get:a scan:~:~"), ["get a=missing", "b=2"]);
  assert.notEqual(h.state("s").get("a"), null, "deleted before a commit point");
  h.commit();
  assert.deepEqual(h.state("s").keyStrings(), ["b"]);
  step(h, 1120, "put:b:3"); // renews b until 1220
  assert.deepEqual(step(h, 1200, "get:b"), ["get b=found:3"]);
  assert.deepEqual(step(h, 1000, "get:a"), ["get a=missing"]); // the stream time does not go back
});

test("store expiry on the wall clock", async () => {
  const h = await host({ wallTime: 0, ttl: { s: { ms: 60_000, clock: "wall" } } });
  step(h, 2 ** 40, "put:k:v");
  h.setWallTime(59_999);
  assert.deepEqual(step(h, 0, "get:k"), ["get k=found:v"]);
  h.advanceWallTime(1);
  assert.deepEqual(step(h, 0, "get:k"), ["get k=missing"]);
  assert.equal(h.state("s").size, 0);
});

test("the shared trigger vectors, through both callbacks; malformed ones fail", async () => {
  const { vectors, malformed } = JSON.parse(await readFile(new URL("../../../abi/testdata/triggers.json", import.meta.url), "utf8"));
  const h = await host();
  for (const v of vectors) {
    const raw = Uint8Array.from(Buffer.from(v.encoded, "hex"));
    const res = h.callbackRaw(raw, v.kind === 2);
    assert.equal(res.error, null, v.name);
    const e = res.all[0];
    assert.deepEqual(e.key, Uint8Array.from(Buffer.from(v.key, "hex")), v.name);
    const k = Buffer.from(v.key, "hex").toString("utf8");
    // The clocks from the encoding: JSON numbers lose the precision of the largest ones.
    const dv = new DataView(raw.buffer);
    const [ts, st, wt] = [0, 8, 16].map((o) => dv.getBigInt64(o, true));
    assert.equal(BigInt(e.timestamp), ts, v.name);
    const want = v.kind === 2 ? `commit ${k} ${ts} stream=${st} wall=${wt} mark=EPHASE`
      : `fired ${["event", "processing"][v.kind]} ${ts} ${k} stream=${st} wall=${wt}`;
    if (Buffer.from(v.key, "hex").length <= 64) assert.equal(text(e.value), want, v.name);
  }
  for (const m of malformed) {
    const res = h.callbackRaw(Uint8Array.from(Buffer.from(m.encoded, "hex")), false);
    assert.equal(res.error, "sdk/timer: trigger: abi: malformed record", m.name);
  }
  // A commit trigger through on_timer, and a timer's through on_commit.
  const commitTrig = vectors.find((v) => v.kind === 2);
  const timerTrig = vectors.find((v) => v.kind === 0);
  assert.equal(h.callbackRaw(Uint8Array.from(Buffer.from(commitTrig.encoded, "hex")), false).error, "sdk/timer: on_timer called with a commit trigger");
  assert.equal(h.callbackRaw(Uint8Array.from(Buffer.from(timerTrig.encoded, "hex")), true).error, "sdk/timer: on_commit called with a event trigger");
});

test("batches with time do what single calls do: a batch is cut after a record that makes timers due", async () => {
  const recs = [
    { value: "set:e:5:a set:e:7:b now", timestamp: 1 },
    { value: "now mark:m", timestamp: 3 },
    { value: "now", timestamp: 6 }, // a fires after this one
    { value: "now set:e:6:c", timestamp: 6 },
    { value: "now fail:x", timestamp: 8 },
    { value: "now", timestamp: 9 },
    { value: "now", timestamp: 2 },
  ];
  const single = await host({ commitEvery: 5 });
  const batched = await host({ commitEvery: 5 });
  const want = recs.map((r) => single.process(r));
  const got = batched.processBatch(recs);
  got.forEach((g, i) => {
    assert.equal(g.error, want[i].error, `record ${i}`);
    assert.deepEqual(g.all.map((e) => text(e.value)), want[i].all.map((e) => text(e.value)), `record ${i}`);
    assert.deepEqual(g.callbacks.map((c) => [c.kind, c.time, text(c.key), c.error]), want[i].callbacks.map((c) => [c.kind, c.time, text(c.key), c.error]), `record ${i}`);
  });
  assert.ok(batched.batches >= 2 && batched.batches < recs.length, `${batched.batches} batches`);
  assert.deepEqual(batched.timers(), single.timers());
});
