// State migration (abi/ABI.md section 13) with the SDK against the fake
// host: the Go SDK's sdk/migrate tests, ported. The processor is migrate.ts.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost } from "../fake.mjs";
import { built } from "./helpers.mjs";

async function host() {
  const h = await FakeHost.start(await built("migrate"), { outputs: ["out"], stores: ["counts"] });
  assert.equal(h.initError, null);
  h.state("counts").put("a", '{"n":5}');
  h.state("counts").put("b", '{"n":12}');
  return h;
}

function be(n) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

test("a migration rewrites JSON counts as binary", async () => {
  const h = await host();
  const res = h.migrate("v1@0123456789ab");
  assert.equal(res.error, null);
  assert.deepEqual(h.state("counts").get("a"), be(5));
  assert.deepEqual(h.state("counts").get("b"), be(12));
});

test("a failed migration leaves the stores as they were; emit and timers are refused", async () => {
  const h = await host();
  let res = h.migrate("v0@0123456789ab");
  assert.match(res.error, /no migration from v0@/);
  res = h.migrate("bad@0123456789ab");
  assert.match(res.error, /the migration fails/);
  assert.deepEqual(res.all, []);
  assert.equal(h.state("counts").get("half"), null);
  assert.deepEqual(new TextDecoder().decode(h.state("counts").get("a")), '{"n":5}');
});
