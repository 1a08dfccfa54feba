// Helpers of the SDK's native tests: build a test processor (test/NAME.ts)
// with the SDK's build script, once per content of the SDK and the
// processor, into test/build/.

import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "../build.mjs";

const testDir = path.dirname(fileURLToPath(import.meta.url));
const sdkDir = path.dirname(testDir);

async function sources() {
  const files = [];
  for (const dir of [sdkDir, path.join(sdkDir, "assembly")]) {
    for (const f of (await readdir(dir)).sort()) {
      if (f.endsWith(".ts")) files.push(path.join(dir, f));
    }
  }
  return files;
}

/** Builds test/NAME.ts (if it changed since the last build) and returns the module's path. */
export async function built(name) {
  const entry = path.join(testDir, name + ".ts");
  const h = createHash("sha256");
  for (const f of [...(await sources()), entry, path.join(sdkDir, "build.mjs")]) h.update(f).update(await readFile(f));
  const out = path.join(testDir, "build", `${name}-${h.digest("hex").slice(0, 16)}.wasm`);
  try {
    await stat(out);
    return out;
  } catch {
    // not built yet
  }
  await mkdir(path.dirname(out), { recursive: true });
  const tmp = `${out}.tmp${process.pid}`;
  await build(entry, tmp);
  await rename(tmp, out);
  return out;
}
