#!/usr/bin/env node
// Builds a wasmstream plugin written in TypeScript (AssemblyScript) with
// the flags the SDK needs:
//
//     node wasmstream-sdk/build.mjs processor.ts -o processor.wasm
//
// or, from JavaScript (the native tests), build(entry, out).
//
// The flags: the incremental garbage collector (a plugin instance lives
// for millions of records; README.md says why this runtime), _initialize
// as the start function (the WASI reactor convention: the host calls it
// first, and the plugin's top level registers its handlers there), and
// abort, trace and seed, which AssemblyScript would import from "env" (a
// wasmstream host refuses any import outside "wasmstream" and
// "wasi_snapshot_preview1"), redirected to the SDK (assembly/runtime.ts).
// The compiler is the one package.json pins (npm ci in this directory).

import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const sdkDir = path.dirname(fileURLToPath(import.meta.url));

/**
 * The asc arguments that build entry into out. The compiler runs in the
 * entry's directory (--baseDir): the element paths of --use are relative
 * to it.
 */
export function ascArgs(entry, out) {
  const base = path.dirname(path.resolve(entry));
  const rt = path.relative(base, path.join(sdkDir, "assembly", "runtime")).split(path.sep).join("/");
  return [
    path.basename(entry),
    "--baseDir", base,
    "-o", path.relative(base, path.resolve(out)),
    "--runtime", "incremental",
    "--optimizeLevel", "3", "--shrinkLevel", "0",
    "--exportStart", "_initialize",
    "--use", `abort=${rt}/abortHandler`,
    "--use", `trace=${rt}/traceHandler`,
    "--use", `seed=${rt}/seedHandler`,
  ];
}

/** Builds entry (a .ts file) into out (a .wasm file); throws with the compiler's output on failure. */
export async function build(entry, out, extra = []) {
  let asc;
  try {
    asc = (await import("assemblyscript/asc")).default;
  } catch (e) {
    throw new Error(`wasmstream-sdk: the AssemblyScript compiler is not installed in ${sdkDir}/node_modules: ` +
      `run \`npm ci\` there (in the wasmstream repository: make toolchains): ${e.message}`);
  }
  let output = "";
  const sink = { write(s) { output += s; return true; } };
  const { error } = await asc.main([...ascArgs(entry, out), ...extra], { stdout: sink, stderr: sink });
  if (error) throw new Error(`wasmstream-sdk: asc ${entry}: ${error.message}\n${output}${hint(entry, output)}`);
  return out;
}

/**
 * The fix of the first mistake a newcomer makes, when the compiler's
 * output shows it: an entry that does not re-export the SDK's exports
 * leaves the runtime handlers that --use names undefined, which asc
 * reports as "Element '.../abortHandler' not found".
 */
export function hint(entry, output) {
  if (!/Element '[^']*runtime\/(abort|trace|seed)Handler' not found/.test(output)) return "";
  let rel = path.relative(path.dirname(path.resolve(entry)), path.join(sdkDir, "exports")).split(path.sep).join("/");
  if (!rel.startsWith(".")) rel = `./${rel}`;
  return `\n${entry} does not export the SDK's exports (the functions the host calls): ` +
    `add the line\n\n    export * from "${rel}";\n\nto ${entry} (and "${rel.replace(/exports$/, "time-exports")}" too if it uses timers)\n`;
}

/** The .ts files of dir (not its subdirectories), sorted. */
async function tsFiles(dir) {
  return (await readdir(dir)).filter((f) => f.endsWith(".ts")).sort().map((f) => path.join(dir, f));
}

/**
 * build, once per content: the module goes to cacheDir under a name made
 * of the entry's name and a hash of the SDK's sources, this script and the
 * .ts files of the entry's directory; a later call with the same sources
 * returns it without compiling (the compiler takes seconds).
 */
export async function buildCached(entry, cacheDir = path.join(os.tmpdir(), `wasmstream-ts-build-${process.getuid ? process.getuid() : 0}`)) {
  const h = createHash("sha256");
  const files = [...(await tsFiles(sdkDir)), ...(await tsFiles(path.join(sdkDir, "assembly"))), fileURLToPath(import.meta.url),
    ...(await tsFiles(path.dirname(path.resolve(entry))))];
  for (const f of files) h.update(f).update("\0").update(await readFile(f));
  const name = path.basename(entry, ".ts");
  const out = path.join(cacheDir, `${name}-${h.digest("hex").slice(0, 16)}.wasm`);
  try {
    await stat(out);
    return out;
  } catch {
    // not built yet
  }
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${out}.tmp${process.pid}`;
  await build(entry, tmp);
  await rename(tmp, out);
  // Older builds of the same entry are stale.
  for (const f of await readdir(cacheDir)) {
    if (f.startsWith(`${name}-`) && f.endsWith(".wasm") && f !== path.basename(out) && /^[0-9a-f]{16}\.wasm$/.test(f.slice(name.length + 1))) {
      await rm(path.join(cacheDir, f), { force: true });
    }
  }
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const o = args.indexOf("-o");
  if (args.length < 3 || o < 0 || o + 1 >= args.length) {
    console.error("usage: node build.mjs ENTRY.ts -o OUT.wasm [asc flags]");
    process.exit(2);
  }
  const out = args[o + 1];
  const rest = args.filter((_, i) => i !== o && i !== o + 1);
  const entry = rest.shift();
  build(entry, out, rest).catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}
