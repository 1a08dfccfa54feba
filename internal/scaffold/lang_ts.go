package scaffold

import (
	"io/fs"
	"path"
)

var tsLang = &Lang{
	Name:   "ts",
	Title:  "TypeScript (AssemblyScript)",
	Files:  tsFiles,
	SDK:    tsSDK,
	Marker: SDKDir + "/build.mjs",
}

// tsSDK is the TypeScript SDK of sdk/ts: its sources (the .ts files at its
// top and in assembly/), its build script and fake host (.mjs), and the
// package.json and package-lock.json that pin the AssemblyScript compiler
// (the project's Makefile runs npm ci in the vendored directory). Not its
// own tests, not its node_modules.
func tsSDK(src fs.FS) (map[string][]byte, error) {
	return copyTree(src, "sdk/ts", "", func(p string, d fs.DirEntry) bool {
		if d.IsDir() {
			return p == "sdk/ts/assembly"
		}
		switch path.Ext(p) {
		case ".ts":
			return true
		case ".mjs", ".json":
			return path.Dir(p) == "sdk/ts"
		}
		return false
	})
}

// tsProcessor is the generated processor, the same in every language
// (pipeline.go).
const tsProcessor = `// [[.Name]]: uppercases each record's value, counts the records seen per
// key in the store "seen", and emits the result to the output "out" with
// the count in a header "seen". Its config may set "prefix", prepended to
// every value.
//
// The SDK is in ./[[.SDKDir]] ("wasmstream init --update-sdk" replaces
// it); its README.md says how errors work (fail, takeError). Register the
// handlers at the end of the file: the top level runs in order when the
// instance starts.

import { Output, Store, Record, Header, handle, onInit, config, fail, str, utf8 } from "./[[.SDKDir]]";
// The ABI's exports; add "./[[.SDKDir]]/time-exports" too for timers.
export * from "./[[.SDKDir]]/exports";

const out = new Output("out");
const seen = new Store("seen");
/** Prepended to every value; from the config's "prefix". */
let prefix = "";

/** Finds "prefix": "..." in the config (no escapes: the SDK reads no JSON). */
function setup(): void {
  const c = str(config());
  const at = c.indexOf("\"prefix\":");
  if (at < 0) return;
  let i = at + 9;
  while (c.charAt(i) == " ") i++;
  const end = c.indexOf("\"", i + 1);
  if (c.charAt(i) == "\"" && end > i) prefix = c.substring(i + 1, end);
}

function process(r: Record): void {
  const v = r.value;
  if (v === null) {
    fail("[[.Name]]: a tombstone has no value to process");
    return;
  }
  const stored = seen.get(r.key);
  const n = (stored === null ? 0 : U64.parseInt(str(stored))) + 1;
  const count = utf8(n.toString());
  seen.put(r.key, count);
  // The prefix, then the value with its ASCII letters uppercased.
  const pre = utf8(prefix);
  const value = new Uint8Array(pre.length + v.length);
  value.set(pre);
  for (let i = 0; i < v.length; i++) {
    const c = v[i];
    value[pre.length + i] = c >= 0x61 && c <= 0x7a ? c - 0x20 : c;
  }
  out.emit(r.key, value, [new Header("seen", count)]);
}

onInit(setup);
handle(process);
`

var tsFiles = map[string]string{
	"NAME.ts": tsProcessor,
	"NAME.test.mjs": `// The native test of [[.Ident]].ts: its module ([[.Ident]].wasm, which
// make test builds first) against the SDK's fake host, under node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeHost, text } from "./[[.SDKDir]]/fake.mjs";

test("[[.Name]] uppercases values and counts records per key", async () => {
  const h = await FakeHost.start(new URL("./[[.Ident]].wasm", import.meta.url), {
    outputs: ["out"], stores: ["seen"], config: '{"prefix":"> "}',
  });
  assert.equal(h.initError, null);
  for (const want of ["1", "2"]) {
    const res = h.process({ key: "k", value: "hello" });
    assert.equal(res.error, null);
    const e = res.to("out");
    assert.equal(e.length, 1);
    assert.equal(text(e[0].value), "> HELLO");
    assert.equal(text(e[0].headers[0].value), want);
  }
  assert.notEqual(h.process({ key: "k", value: null }).error, null, "a tombstone was accepted");
});
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test, under node,
# against the SDK's fake host). The SDK is in [[.SDKDir]]/ ("wasmstream init
# --update-sdk" replaces it). Needs node 20 or later and npm (Debian:
# nodejs npm).
SDK = [[.SDKDir]]
NODE ?= node
NPM ?= npm
# The AssemblyScript compiler that [[.SDKDir]]/package-lock.json pins,
# installed into [[.SDKDir]]/node_modules by npm ci: from npm's cache when
# it is there (offline), else from the registry, once per machine; again
# whenever the SDK, and so the lockfile, changes.
ASC = $(SDK)/node_modules/assemblyscript/package.json

[[.Ident]].wasm: [[.Ident]].ts $(wildcard $(SDK)/*.ts $(SDK)/assembly/*.ts) $(SDK)/build.mjs $(ASC)
	$(NODE) $(SDK)/build.mjs [[.Ident]].ts -o $@

$(ASC): $(SDK)/package-lock.json
	cd $(SDK) && $(NPM) ci --prefer-offline --no-audit --no-fund
	@touch $@

.PHONY: test
test: [[.Ident]].wasm
	$(NODE) --test [[.Ident]].test.mjs
`,
	".gitignore": "*.wasm\n" + SDKDir + "/node_modules/\nwasmstream-state/\n",
}
