// The SDK's records, outputs, stores, scans, config, logs, errors and
// batches, against the fake host (test processor: sdk.ts), and the shared
// record vectors of abi/testdata/records.json decoded and re-encoded.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { FakeHost, Errno, text, encodeRecord, decodeRecord } from "../fake.mjs";
import { built } from "./helpers.mjs";

const vectorsPath = new URL("../../../abi/testdata/records.json", import.meta.url);
const opts = { outputs: ["out", "side"], stores: ["s"] };

async function host(extra = {}) {
  const h = await FakeHost.start(await built("sdk"), { ...opts, ...extra });
  assert.equal(h.initError, null);
  return h;
}

/** The values the step emitted to out, as text. */
function said(res) {
  return res.to("out").map((e) => text(e.value));
}

function run(h, commands, rec = {}) {
  const res = h.process({ key: "k", value: commands, timestamp: 10, ...rec });
  assert.equal(res.failed(), null, `${commands}: ${res.failed()}`);
  return said(res);
}

function hex(s) {
  return s === null ? null : Uint8Array.from(Buffer.from(s, "hex"));
}

/** The vector's encoding as an emit of it to output index makes it: offset -1, partition -1. */
function asEmit(encoded, index) {
  const b = Uint8Array.from(encoded);
  const dv = new DataView(b.buffer);
  dv.setBigInt64(8, -1n, true);
  dv.setInt32(16, -1, true);
  dv.setUint32(20, index, true);
  return b;
}

test("the shared record vectors: decoded, re-encoded by emit, forwarded as they came", async () => {
  const { vectors, malformed } = JSON.parse(await readFile(vectorsPath, "utf8"));
  for (const batched of [false, true]) {
    const h = await host({ config: "echo" });
    const recs = vectors.map((v) => decodeRecord(hex(v.encoded)));
    const results = batched ? h.processBatch(recs.map((r) => ({ ...r, input: r.index }))) : recs.map((r, i) => h.processRaw(hex(vectors[i].encoded)));
    vectors.forEach((v, i) => {
      const res = results[i];
      assert.equal(res.error, null, `${v.name}: ${res.error}`);
      assert.equal(res.all.length, 2, v.name);
      assert.deepEqual(res.all[0].raw, asEmit(hex(v.encoded), 0), `${v.name}: emitted`);
      assert.deepEqual(res.all[1].raw, asEmit(hex(v.encoded), 1), `${v.name}: forwarded`);
    });
  }
  const h = await host({ config: "echo" });
  for (const m of malformed) {
    const res = h.processRaw(hex(m.encoded));
    assert.equal(res.error, "sdk: input record: abi: malformed record", m.name);
  }
  // The fake host's own codec agrees with the vectors too.
  for (const v of vectors) assert.deepEqual(encodeRecord({ ...decodeRecord(hex(v.encoded)), input: v.index }), hex(v.encoded), v.name);
});

test("record fields and headers", async () => {
  const h = await host();
  const rec = { key: "key", value: "fields header:a header:null header:e header:x", timestamp: -5, offset: 77, partition: 3, input: 2,
    headers: [["a", "1"], ["null", null], ["e", ""], ["a", "2"]] };
  assert.deepEqual(run(h, rec.value, rec), [`-5 77 3 2 3 ${rec.value.length} 4`, "a=2", "null=null", "e=", "x=none"]);
  assert.deepEqual(run(h, "fields", { key: null, value: "fields" }), ["10 0 0 0 null 6 0"]);
});

test("emit: defaults, explicit partitions and timestamps, null and empty", async () => {
  const h = await host();
  const res = h.process({ key: "k", value: "emit:a:b emitto:5:~: emitts:x:y:77 hdr", timestamp: 42 });
  assert.equal(res.error, null);
  const [e1, e2, e3, e4] = res.all;
  assert.deepEqual([text(e1.key), text(e1.value), e1.timestamp, e1.partition], ["a", "b", 42, -1]);
  assert.deepEqual([e2.key, e2.value.length, e2.partition], [null, 0, 5]);
  assert.equal(e3.timestamp, 77);
  assert.deepEqual(e4.headers.map((x) => [x.name, text(x.value)]), [["a", "1"], ["null", null], ["e", ""]]);
});

test("forward sends the record as it came", async () => {
  const h = await host();
  const rec = { key: "k", value: "fwd fwdside", timestamp: 9, offset: 5, partition: 2, headers: [["h", "v"]] };
  const res = h.process(rec);
  assert.equal(res.error, null);
  assert.deepEqual(res.all[0].raw, asEmit(encodeRecord(rec), 0));
  assert.deepEqual(res.all[1].raw, asEmit(encodeRecord(rec), 1));
});

test("an undeclared output fails the record, naming it", async () => {
  const h = await host();
  const res = h.process({ value: "undeclared" });
  assert.equal(res.error, 'sdk: output_index "nope": ENONAME: no output or store with that name');
});

test("start: undeclared handles, a failing hook, time and state refused during init", async () => {
  let h = await FakeHost.start(await built("sdk"), { outputs: ["out"] });
  assert.equal(h.initError, 'sdk: not declared by the processor (add to its outputs or stores in the pipeline config): output "side", store "s"');
  h = await FakeHost.start(await built("sdk"), { ...opts, config: "init-fails" });
  assert.equal(h.initError, "init says no");
  h = await host({ config: "init-time" });
  assert.deepEqual(h.logs().map((l) => l.msg), ["init EPHASE EPHASE EPHASE EPHASE EPHASE EPHASE config 9"]);
});

test("an emit over the record size limit: ETOOLARGE, which fails the record unless taken", async () => {
  const h = await host();
  let res = h.process({ value: "bigemit:1048576" });
  assert.equal(res.error, 'sdk: emit "out": ETOOLARGE: over the size limit');
  assert.deepEqual(run(h, "bigemit:1048576 take"), ['took ETOOLARGE sdk: emit "out": ETOOLARGE: over the size limit']);
  res = h.process({ value: "bigemit:1048000" });
  assert.equal(res.error, null);
  assert.equal(res.all[0].value.length, 1048000);
});

test("config, read whole however long", async () => {
  const long = JSON.stringify({ pad: "p".repeat(5000) });
  const h = await host({ config: long });
  assert.deepEqual(run(h, "config"), [long]);
});

test("log levels, and a long line cut by the host", async () => {
  const h = await host();
  run(h, "log:0:d log:1:i log:2:w log:3:e longlog");
  assert.deepEqual(h.logs().map((l) => `${l.level} ${l.msg.length > 10 ? l.msg.length : l.msg}${l.truncated ? " (truncated)" : ""}`),
    ["debug d", "info i", "warn w", "error e", "info 4096 (truncated)"]);
});

test("state: get, put, delete; empty is not missing; reads see the call's writes; a failed call's writes are gone", async () => {
  const h = await host();
  assert.deepEqual(run(h, "get:a put:a: get:a has:a put:a:v1 get:a del:a del:a get:a has:a put:b:x"),
    ["get a=missing", "get a=found:", "has a=yes", "get a=found:v1", "get a=missing", "has a=no"]);
  assert.deepEqual(h.state("s").keyStrings(), ["b"]);
  const res = h.process({ value: "put:c:1 emit:x:y fail:nope" });
  assert.equal(res.error, "nope");
  assert.equal(res.all.length, 0);
  assert.deepEqual(h.state("s").keyStrings(), ["b"]);
  assert.equal(h.process({ value: "fail" }).error, "record rejected (fail was called with no text)");
  // Values over the first read buffer come back whole.
  assert.deepEqual(run(h, "putn:big:200000 get:big"), ["get big=found:200000B"]);
});

test("state limits: ETOOLARGE for a long key or a huge value", async () => {
  const h = await host();
  let res = h.process({ value: `put:${"k".repeat(4097)}:v` });
  assert.equal(res.error, 'sdk: state_put "s": ETOOLARGE: over the size limit');
  res = h.process({ value: "putn:huge:1048577" });
  assert.equal(res.error, 'sdk: state_put "s": ETOOLARGE: over the size limit');
  assert.deepEqual(run(h, "putn:max:1048576 get:max"), ["get max=found:1048576B"]);
});

test("scans: byte order, bounds, the call's own writes, large entries, the cursor limit", async () => {
  const h = await host();
  h.state("s").put("s/b", "2");
  h.state("s").put("t/x", "x");
  assert.deepEqual(run(h, "put:s/a:1 putn:s/c:70000 del:s/b scan:s/"), ["s/a=1", "s/c=70000B"]);
  assert.deepEqual(run(h, "scan:s/c:~"), ["s/c=70000B", "t/x=x"]);
  assert.deepEqual(run(h, "scan:s/a:s/c"), ["s/a=1"]);
  assert.deepEqual(run(h, "cursors"), ["cursors 16 ELIMIT"]);
});

test("a trap fails the record and replaces the instance; abort logs its message", async () => {
  const h = await host();
  run(h, "put:a:1");
  let res = h.process({ value: "emit:lost:x trap" });
  assert.match(res.error, /^trap: /);
  assert.equal(res.all.length, 0);
  assert.deepEqual(run(h, "get:a"), ["get a=found:1"]);
  assert.equal(h.instances, 2);
  res = h.process({ value: "throw" });
  assert.match(res.error, /^trap: .*set_error: abort: thrown on purpose \(.*sdk\.ts:\d+:\d+\)/);
  assert.match(h.logs().at(-1).msg, /^abort: thrown on purpose/);
  res = h.process({ value: "index:7" });
  assert.match(res.error, /abort: Index out of range/);
  assert.deepEqual(run(h, "get:a"), ["get a=found:1"]); // on a fresh instance, made for this record
  assert.equal(h.instances, 4);
});

test("a host I/O error fails the record", async () => {
  const h = await host({ fault: (call) => (call === "state_get" ? Errno.IO : 0) });
  const res = h.process({ value: "get:a take emit:x:y" });
  assert.match(res.error, /state_get: EIO/);
});

test("batches do what single calls do, record by record", async () => {
  const recs = [
    { key: "a", value: "fwd", timestamp: 1, headers: [["h", "1"]] },
    { key: "b", value: "fwd fwdside emit:x:y fwd", timestamp: 2 },
    { key: "c", value: "put:k:1 get:k", timestamp: 3 },
    { key: "d", value: "get:k emit:x:~ emitto:3:~:", timestamp: 4 },
    { key: "e", value: "emit:lost:1 fail:no", timestamp: 5 },
    { key: "f", value: "get:k fwd", timestamp: 6 },
    { key: "g", value: "bigemit:600000", timestamp: 7 },
    { key: "h", value: "bigemit:600000 fwd", timestamp: 8 },
    { key: "i", value: "emit:lost:2 trap", timestamp: 9 },
    { key: "j", value: "get:k put:k:2", timestamp: 10 },
    { key: "k", value: "bigemit:1048576", timestamp: 11 },
    { key: "l", value: "fwd get:k", timestamp: 12 },
  ];
  const single = await host();
  const batched = await host();
  const want = recs.map((r) => single.process(r));
  const got = batched.processBatch(recs);
  assert.equal(got.length, want.length);
  assert.ok(batched.batches >= 2 && batched.batches < recs.length, `${batched.batches} batches for ${recs.length} records`);
  got.forEach((g, i) => {
    assert.equal(g.error === null, want[i].error === null, `record ${i}: ${g.error} vs ${want[i].error}`);
    if (want[i].error !== null && !want[i].error.startsWith("trap")) assert.equal(g.error, want[i].error, `record ${i}`);
    assert.deepEqual(g.all.map((e) => [e.output, e.raw]), want[i].all.map((e) => [e.output, e.raw]), `record ${i}`);
  });
  assert.deepEqual(batched.state("s").entries(), single.state("s").entries());
});
