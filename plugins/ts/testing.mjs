// Helpers of the TypeScript plugins' native tests.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildCached } from "../../sdk/ts/build.mjs";

/** Builds the plugin name.ts beside the calling test (its import.meta.url), once per content, and returns the module's path. */
export function buildPlugin(testURL, name) {
  return buildCached(path.join(path.dirname(fileURLToPath(testURL)), name + ".ts"));
}
