// Native test of passthrough.ts against the SDK's fake host.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, encodeRecord } from "../../../sdk/ts/fake.mjs";
import { buildPlugin } from "../testing.mjs";

const wasm = await buildPlugin(import.meta.url, "passthrough");

test("passthrough emits every record unchanged, the host picking the partition", async () => {
  const h = await FakeHost.start(wasm, { outputs: ["out"], config: " {} " });
  assert.equal(h.initError, null);
  const rec = { key: null, value: "v", timestamp: 7, offset: 9, partition: 3, headers: [["h", null], ["e", ""]] };
  for (const results of [[h.process(rec)], h.processBatch([rec, rec])]) {
    for (const res of results) {
      assert.equal(res.error, null);
      assert.equal(res.all.length, 1);
      const want = encodeRecord({ ...rec, offset: -1, partition: -1 });
      assert.deepEqual(res.all[0].raw, want);
    }
  }
});

test("passthrough takes no config", async () => {
  const h = await FakeHost.start(wasm, { outputs: ["out"], config: '{"x":1}' });
  assert.equal(h.initError, 'passthrough: config: takes no config; got {"x":1}');
});
