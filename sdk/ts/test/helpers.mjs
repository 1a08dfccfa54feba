// Helpers of the SDK's native tests.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildCached } from "../build.mjs";

const testDir = path.dirname(fileURLToPath(import.meta.url));

/** Builds the test processor test/NAME.ts (once per content, into test/build/) and returns the module's path. */
export function built(name) {
  return buildCached(path.join(testDir, name + ".ts"), path.join(testDir, "build"));
}
