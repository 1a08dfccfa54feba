// Native test of filter.ts against the SDK's fake host.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "../../../sdk/ts/fake.mjs";
import { buildPlugin } from "../testing.mjs";

const wasm = await buildPlugin(import.meta.url, "filter");

async function kept(config, values) {
  const h = await FakeHost.start(wasm, { outputs: ["out", "bad"], config });
  assert.equal(h.initError, null, config);
  return values.map((v) => h.process({ key: "k", value: v })).map((r) => r.all.map((e) => `${e.output}:${text(e.value)}`).join(""));
}

test("filter keeps the records whose field matches, and routes what is not JSON", async () => {
  const values = ['{"user":{"country":"NL","age":31}}', '{"user":{"country":"DE","age":17}}', "not json", null,
    '{"items":[{"sku":"x"},{"sku":"y"}]}'];
  assert.deepEqual(await kept('{"field":"user.country","value":"NL","invalid_output":"bad"}', values),
    [`out:${values[0]}`, "", "bad:not json", "bad:null", ""]);
  assert.deepEqual(await kept('{"field":"user.age","op":"gt","value":18}', values), [`out:${values[0]}`, "", "", "", ""]);
  assert.deepEqual(await kept('{"field":"items.*.sku","op":"in","value":["y","z"]}', values), ["", "", "", "", `out:${values[4]}`]);
  assert.deepEqual(await kept('{"field":"user.country","op":"ne","value":"NL"}', values), ["", `out:${values[1]}`, "", "", `out:${values[4]}`]);
});

test("filter refuses a bad config, naming the field", async () => {
  for (const [config, want] of [['{"field":"a","op":"like","value":1}', 'filter: config: "op": must be one of eq, ne, exists, gt, ge, lt, le, in; got "like"'],
    ['{"op":"eq","value":1}', 'filter: config: "field": required'],
    ['{"field":"a","value":1,"feild":2}', 'filter: config: unknown field "feild" (known: field, invalid_output, op, output, value)'],
    ['{"field":"a","value":1,"output":"nope"}', 'filter: config: "output": output "nope" is not declared by the processor']]) {
    const h = await FakeHost.start(wasm, { outputs: ["out", "bad"], config });
    assert.equal(h.initError, want, config);
  }
});
