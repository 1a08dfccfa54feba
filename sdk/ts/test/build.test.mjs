// build.mjs: a newcomer's first mistake, a processor that does not
// re-export the SDK's exports, gets the line to add in the error.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "../build.mjs";

const sdkDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

test("a processor without the SDK's exports is told to add them", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "wasmstream-ts-build-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const entry = path.join(dir, "p.ts");
  const sdk = path.relative(dir, sdkDir).split(path.sep).join("/");
  await writeFile(entry, `import { Record, handle } from "${sdk}";\nhandle((r: Record): void => {});\n`);
  await assert.rejects(build(entry, path.join(dir, "p.wasm")), (e) => {
    assert.match(e.message, /abortHandler' not found/);
    assert.ok(e.message.includes(`p.ts does not export the SDK's exports`), e.message);
    assert.ok(e.message.includes(`export * from "${sdk}/exports";`), e.message);
    return true;
  });
  // With the line, it builds.
  await writeFile(entry, `import { Record, handle } from "${sdk}";\nexport * from "${sdk}/exports";\nhandle((r: Record): void => {});\n`);
  await build(entry, path.join(dir, "p.wasm"));
});
