// The velocity processor (velocity.ts) against the fake host, as the Go,
// Rust and C SDKs' tests run their twins.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "../fake.mjs";
import { built } from "./helpers.mjs";

test("velocity", async () => {
  const h = await FakeHost.start(await built("velocity"), { outputs: ["payments", "alerts"], stores: ["recent"] });
  assert.equal(h.initError, null);
  const got = [];
  const pay = (card, sec) => {
    const rec = { key: card, value: `${card} pays`, timestamp: sec * 1000, headers: [["id", new Uint8Array([got.length])]] };
    const res = h.process(rec);
    assert.equal(res.failed(), null);
    const p = res.to("payments");
    assert.equal(p.length, 1, `${card}@${sec}: passed on ${p.length}`);
    assert.equal(text(p[0].value), rec.value);
    assert.equal(p[0].timestamp, rec.timestamp);
    assert.equal(p[0].headers.length, 1);
    for (const a of res.to("alerts")) got.push(`${card}@${sec}=${text(a.value)}`);
  };
  for (const [card, sec] of [["a", 0], ["a", 10], ["b", 15], ["a", 20], ["a", 30], ["b", 40], ["a", 60], ["a", 61], ["a", 121]]) pay(card, sec);
  assert.deepEqual(got, ["a@30=4", "a@60=4", "a@61=5"]);
  // A card is forgotten 60 s after its last payment: b is gone, a keeps the payment at 121.
  assert.deepEqual(h.state("recent").keyStrings(), ["a"]);
  assert.equal(h.state("recent").get("a").length, 8);
});

test("velocity needs its outputs and store", async () => {
  const h = await FakeHost.start(await built("velocity"), { outputs: ["payments"] });
  assert.match(h.initError, /output "alerts", store "recent"$/);
});
