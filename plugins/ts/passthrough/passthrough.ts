// passthrough: emits every input record unchanged to the output "out"
// (key, value, headers, timestamp; the host picks the partition by key
// hash), like plugins/passthrough in Go. It takes no config.

import { Output, Record, handle, onInit, config, fail, str } from "../../../sdk/ts";
export * from "../../../sdk/ts/exports";

const out = new Output("out");

onInit((): void => {
  // Empty, null or {} (JSON whitespace allowed).
  const c = config();
  let s = "";
  for (let i = 0; i < c.length; i++) {
    const b = c[i];
    if (b != 0x20 && b != 0x09 && b != 0x0a && b != 0x0d) s += String.fromCharCode(b);
  }
  if (s != "" && s != "null" && s != "{}") fail("passthrough: config: takes no config; got " + str(c));
});

// The record as it came: the SDK hands the host its input bytes, not a copy.
handle((r: Record): void => {
  out.forward(r);
});
