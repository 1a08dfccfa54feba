// Native test of wordcount.ts against the SDK's fake host.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "../../../sdk/ts/fake.mjs";
import { buildPlugin } from "../testing.mjs";

const wasm = await buildPlugin(import.meta.url, "wordcount");
const opts = { outputs: ["counts"], stores: ["counts"] };

test("wordcount counts words across records, case folded, in order of first appearance", async () => {
  const h = await FakeHost.start(wasm, opts);
  assert.equal(h.initError, null);
  let res = h.process({ key: "line", value: "The cat and the hat", timestamp: 1 });
  assert.deepEqual(res.all.map((e) => `${text(e.key)}=${text(e.value)}`), ["the=2", "cat=1", "and=1", "hat=1"]);
  res = h.process({ key: "line", value: "THE CAT, Ça va? ÇA", timestamp: 2 });
  assert.deepEqual(res.all.map((e) => `${text(e.key)}=${text(e.value)}`), ["the=3", "cat=2", "ça=2", "va=1"]);
  const count = h.state("counts").get("the");
  assert.deepEqual([...count], [0, 0, 0, 0, 0, 0, 0, 3]);
  assert.equal(h.process({ key: "tombstone", value: null }).all.length, 0);
});

test("int64 values, and emit: commit (once per commit window per word)", async () => {
  const h = await FakeHost.start(wasm, { ...opts, config: '{"value_format": "int64", "emit": "commit"}' });
  assert.equal(h.initError, null);
  assert.equal(h.process({ value: "a b a", timestamp: 5 }).all.length, 0);
  assert.equal(h.process({ value: "b", timestamp: 6 }).all.length, 0);
  const res = h.commit();
  assert.deepEqual(res.all.map((e) => [text(e.key), [...e.value].at(-1), e.timestamp]), [["a", 2, 5], ["b", 2, 6]]);
  // Past the commit-mark limit a word's count goes out at once.
  const l = await FakeHost.start(wasm, { ...opts, config: '{"emit":"commit"}', limits: { marks: 1 } });
  assert.deepEqual(l.process({ value: "x y", timestamp: 1 }).all.map((e) => text(e.key)), ["y"]);
});

test("wordcount refuses a bad config", async () => {
  for (const [config, want] of [['{"value_format":"hex"}', 'wordcount: config: "value_format": must be "decimal" or "int64"; got "hex"'],
    ['{"emit":"never"}', 'wordcount: config: "emit": must be "update" or "commit"; got "never"'],
    ['{"feild":"x"}', 'wordcount: config: unknown field "feild" (known: emit, value_format)'],
    ["[1]", "wordcount: config: must be a JSON object"]]) {
    const h = await FakeHost.start(wasm, { ...opts, config });
    assert.equal(h.initError, want, config);
  }
});
