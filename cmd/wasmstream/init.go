package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// initUsage is the help of `wasmstream init`.
const initUsage = `usage: wasmstream init NAME --lang go|rust|c [--dir DIR] [--sdk DIR]

Writes a new processor project into DIR (default ./NAME): the processor, its
native test, a build file (Makefile) and a pipeline.yaml that runs it. Then:

  make test       the processor's native test (a fake host, no Wasm, no Kafka)
  make            the plugin, NAME.wasm
  wasmstream validate -c pipeline.yaml
  wasmstream run -c pipeline.yaml

The project uses the SDK sources of a wasmstream checkout: --sdk DIR, else
$WASMSTREAM_SDK, else the checkout the target or current directory is in.
A Go project gets a replace directive to it in go.mod, a Rust project a path
dependency on DIR/sdk/rust, a C project includes DIR/sdk/c.
`

// sdkModule is the module path of the wasmstream checkout the SDKs are in.
const sdkModule = "github.com/wasmstream/wasmstream"

// projectName is what NAME may be: it becomes a Go module path, a Rust
// crate, a C file, a processor name and topic names.
var projectName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

func (e *env) initProject(args []string) int {
	fs := e.flagSet("init")
	lang := fs.String("lang", "", "go, rust or c")
	dir := fs.String("dir", "", "directory to write (default ./NAME); must not exist or be empty")
	sdk := fs.String("sdk", "", "root of a wasmstream checkout (default: $WASMSTREAM_SDK, or the checkout DIR or . is in)")
	if err := fs.Parse(args); err != nil {
		return e.flagError("init", err)
	}
	if fs.NArg() != 1 || (*lang != "go" && *lang != "rust" && *lang != "c") {
		fmt.Fprint(e.stderr, initUsage)
		return exitUsage
	}
	name := fs.Arg(0)
	if !projectName.MatchString(name) {
		fmt.Fprintf(e.stderr, "wasmstream init: name %q: use lowercase letters, digits, - and _, starting with a letter\n", name)
		return exitUsage
	}
	if *dir == "" {
		*dir = name
	}
	root, err := findSDK(*sdk, e.getenv("WASMSTREAM_SDK"), *dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init: %v\n", err)
		return exitError
	}
	files, err := scaffold(name, *lang, root)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init: %v\n", err)
		return exitError
	}
	if err := writeProject(*dir, files); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.stdout, "wrote %s (%s, SDK at %s)\nnext: cd %s && make test && make && wasmstream validate -c pipeline.yaml\n",
		*dir, *lang, root, *dir)
	return exitOK
}

func (e *env) getenv(key string) string {
	for _, kv := range e.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// findSDK returns the absolute root of the wasmstream checkout: flag, else
// env, else the first directory at or above dir (or the working directory)
// whose go.mod declares sdkModule.
func findSDK(flag, env, dir string) (string, error) {
	for _, given := range []string{flag, env} {
		if given == "" {
			continue
		}
		abs, err := filepath.Abs(given)
		if err != nil {
			return "", err
		}
		if !isSDKRoot(abs) {
			return "", fmt.Errorf("%s is not a wasmstream checkout (no go.mod declaring %s, or no sdk/ in it)", abs, sdkModule)
		}
		return abs, nil
	}
	starts := []string{dir, "."}
	for _, s := range starts {
		abs, err := filepath.Abs(s)
		if err != nil {
			continue
		}
		for d := abs; ; d = filepath.Dir(d) {
			if isSDKRoot(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("cannot find the wasmstream SDK sources: pass --sdk DIR (a checkout of " + sdkModule +
		") or set WASMSTREAM_SDK")
}

func isSDKRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "module "+sdkModule {
			_, err1 := os.Stat(filepath.Join(dir, "sdk", "rust", "Cargo.toml"))
			_, err2 := os.Stat(filepath.Join(dir, "sdk", "c", "wasmstream.h"))
			return err1 == nil && err2 == nil
		}
	}
	return false
}

// goVersion is the go directive of the checkout's go.mod: the generated
// module needs at least the version its dependency declares.
func goVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "1.26.0"
}

// writeProject writes files (relative path -> contents) under dir, which
// must not exist or be empty, so that init never overwrites anything.
func writeProject(dir string, files map[string]string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	}
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scaffold renders the project's files for lang.
func scaffold(name, lang, root string) (map[string]string, error) {
	data := struct {
		Name, Ident, SDK, GoVersion string
	}{name, strings.ReplaceAll(name, "-", "_"), root, goVersion(root)}
	var set map[string]string
	switch lang {
	case "go":
		set = goFiles
	case "rust":
		set = rustFiles
	case "c":
		set = cFiles
	}
	out := map[string]string{"pipeline.yaml": pipelineTemplate}
	for k, v := range set {
		out[k] = v
	}
	files := map[string]string{}
	for path, text := range out {
		path = strings.ReplaceAll(path, "NAME", data.Ident)
		t, err := template.New(path).Delims("[[", "]]").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", path, err)
		}
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("template %s: %w", path, err)
		}
		files[path] = b.String()
	}
	return files, nil
}

// The generated processor is the same in every language: it uppercases each
// record's value (ASCII letters), counts the records seen per key in the store
// "seen", and emits the result to "out" with the count in a header "seen".
// Its config may set "prefix", prepended to every value; the SDKs do not
// parse JSON, so the processors find it with a plain search (a real
// processor would use a JSON library).

const pipelineTemplate = `# A pipeline that runs the [[.Name]] processor. With kafka.brokers empty,
# wasmstream run starts an embedded development broker and creates the topics:
#   make && wasmstream run -c pipeline.yaml
app_id: [[.Name]]
kafka:
  brokers: []
processors:
  - name: [[.Name]]
    plugin: [[.Ident]].wasm
    inputs: [[ "[" ]][[.Name]]-in]
    outputs:
      out: [[.Name]]-out
    stores: [seen]
    config:
      prefix: ""
    on_error: dead_letter
    limits:
      memory: 16MiB
      record_timeout: 100ms
`

var goFiles = map[string]string{
	"go.mod": `module [[.Name]]

go [[.GoVersion]]

require github.com/wasmstream/wasmstream v0.0.0-00010101000000-000000000000

// The SDK (packages sdk and abi, standard library only) from a wasmstream
// checkout; written by wasmstream init (--sdk). Point it at yours.
replace github.com/wasmstream/wasmstream => [[.SDK]]
`,
	"main.go": `// Command [[.Name]] is a wasmstream processor: it uppercases each record's
// value, counts the records seen per key in the store "seen", and emits the
// result to the output "out" with the count in a header "seen".
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out  = sdk.Output("out")
	seen = sdk.Store("seen")
	// prefix is prepended to every value; from the config's "prefix".
	prefix []byte
	value  []byte
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	if err := out.Check(); err != nil {
		return err
	}
	if err := seen.Check(); err != nil {
		return err
	}
	prefix = configString(sdk.Config(), "prefix")
	return nil
}

// configString finds "key": "value" in the config (no escapes); nil if absent.
func configString(cfg []byte, key string) []byte {
	i := bytes.Index(cfg, []byte("\""+key+"\":"))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(cfg[i+len(key)+3:], " ")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return nil
	}
	return append([]byte(nil), rest[1:1+end]...)
}

func process(r *sdk.Record) error {
	if r.Value == nil {
		return errors.New("[[.Name]]: a tombstone has no value to process")
	}
	n := uint64(0)
	if v, ok, err := seen.Get(r.Key); err != nil {
		return err
	} else if ok {
		n, _ = strconv.ParseUint(string(v), 10, 64)
	}
	n++
	count := strconv.AppendUint(nil, n, 10)
	if err := seen.Put(r.Key, count); err != nil {
		return err
	}
	// Scratch reused across records: the emitted value (Emit copies it).
	value = append(value[:0], prefix...)
	for _, c := range r.Value {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		value = append(value, c)
	}
	return out.Emit(sdk.Out{Key: r.Key, Value: value, Headers: []sdk.Header{{Key: "seen", Value: count}}})
}

func main() {}
`,
	"main_test.go": `package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestProcess(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("seen"), sdktest.Config(` + "`" + `{"prefix":"> "}` + "`" + `))
	for i, want := range []string{"1", "2"} {
		res := h.Process(sdktest.Record{Key: []byte("k"), Value: []byte("hello")})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		e := res.Emitted["out"]
		if len(e) != 1 || string(e[0].Value) != "> HELLO" || string(e[0].Headers[0].Value) != want {
			t.Fatalf("record %d: emitted %+v", i, e)
		}
	}
	if res := h.Process(sdktest.Record{Key: []byte("k")}); res.Err == nil {
		t.Fatal("a tombstone was accepted")
	}
}
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test).
GO ?= go

[[.Ident]].wasm: $(wildcard *.go) go.mod
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ .

.PHONY: test
test:
	$(GO) test ./...
`,
	".gitignore": "*.wasm\nwasmstream-state/\n",
}

var rustFiles = map[string]string{
	"Cargo.toml": `[package]
name = "[[.Name]]"
version = "0.1.0"
edition = "2021"
rust-version = "1.63"
publish = false

[lib]
crate-type = ["cdylib"]
path = "src/lib.rs"

[dependencies]
# The SDK from a wasmstream checkout; written by wasmstream init (--sdk).
wasmstream = { path = "[[.SDK]]/sdk/rust" }

[profile.release]
opt-level = 3
lto = true
panic = "abort"
strip = true
codegen-units = 1

[workspace]
`,
	".cargo/config.toml": `# A 64 KiB stack instead of rustc's 1 MiB default for wasm32: the stack is
# part of every instance's memory.
[target.wasm32-wasi]
rustflags = ["-C", "link-arg=-zstack-size=65536"]

[target.wasm32-wasip1]
rustflags = ["-C", "link-arg=-zstack-size=65536"]
`,
	"src/lib.rs": `//! [[.Name]]: uppercases each record's value, counts the records seen per
//! key in the store "seen", and emits the result to the output "out" with the
//! count in a header "seen".

use std::cell::RefCell;
use wasmstream::{Header, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static SEEN: Store = Store::new("seen");

thread_local! {
    /// Prepended to every value; from the config's "prefix".
    static PREFIX: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

/// Finds "key": "value" in the config (no escapes).
fn config_string(cfg: &[u8], key: &str) -> Vec<u8> {
    let cfg = String::from_utf8_lossy(cfg);
    let pat = format!("\"{}\":", key);
    let rest = match cfg.find(&pat) {
        Some(i) => cfg[i + pat.len()..].trim_start(),
        None => return Vec::new(),
    };
    match rest.strip_prefix('"').and_then(|r| r.find('"').map(|e| &r[..e])) {
        Some(v) => v.as_bytes().to_vec(),
        None => Vec::new(),
    }
}

fn init() -> Result<()> {
    OUT.check()?;
    SEEN.check()?;
    let p = config_string(&wasmstream::config(), "prefix");
    PREFIX.with(|x| *x.borrow_mut() = p);
    Ok(())
}

fn process(r: &Record) -> Result<()> {
    let value = r.value().ok_or("[[.Name]]: a tombstone has no value to process")?;
    let key = r.key().unwrap_or(b"");
    let n: u64 = match SEEN.get(key)? {
        Some(v) => String::from_utf8_lossy(&v).parse().unwrap_or(0),
        None => 0,
    } + 1;
    let count = n.to_string();
    SEEN.put(key, count.as_bytes())?;
    let mut out = PREFIX.with(|p| p.borrow().clone());
    out.extend(value.iter().map(|b| b.to_ascii_uppercase()));
    let hs = [Header { name: b"seen", value: Some(count.as_bytes()) }];
    OUT.emit(&Out { key: r.key(), value: Some(&out), headers: &hs, timestamp: 0 })
}

wasmstream::processor!(process, init);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    #[test]
    fn process() {
        let mut h = Host::new(super::process)
            .outputs(&["out"])
            .stores(&["seen"])
            .config(r#"{"prefix":"> "}"#)
            .init(super::init);
        h.start().unwrap();
        for want in ["1", "2"] {
            let res = h.process(&Input::kv("k", "hello"));
            assert_eq!(res.error, None);
            let e = &res.emitted[0];
            assert_eq!(e.value.as_deref(), Some(&b"> HELLO"[..]));
            assert_eq!(e.headers[0].1.as_deref(), Some(want.as_bytes()));
        }
        let res = h.process(&Input { key: Some(b"k".to_vec()), ..Input::default() });
        assert!(res.error.is_some(), "a tombstone was accepted");
    }
}
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test). Debian's Rust
# (rustc 1.63 + libstd-rust-dev-wasm32) by full path; with rustup instead:
#   make CARGO=cargo RUSTC=rustc RUSTDOC=rustdoc TARGET=wasm32-wasip1
# after rustup target add wasm32-wasip1.
CARGO ?= /usr/bin/cargo
RUSTC ?= /usr/bin/rustc
RUSTDOC ?= /usr/bin/rustdoc
TARGET ?= wasm32-wasi
ENV = RUSTC=$(RUSTC) RUSTDOC=$(RUSTDOC)
# cargo's output directory: $CARGO_TARGET_DIR if set, as cargo does.
TARGET_DIR = $(or $(CARGO_TARGET_DIR),target)

[[.Ident]].wasm: $(wildcard src/*.rs) Cargo.toml
	$(ENV) $(CARGO) build --offline --release --target $(TARGET)
	cp $(TARGET_DIR)/$(TARGET)/release/[[.Ident]].wasm $@

.PHONY: test
test:
	$(ENV) $(CARGO) test --offline
`,
	".gitignore": "target/\nCargo.lock\n*.wasm\nwasmstream-state/\n",
}

var cFiles = map[string]string{
	"NAME.c": `/*
 * [[.Name]]: uppercases each record's value, counts the records seen per key
 * in the store "seen", and emits the result to the output "out" with the
 * count in a header "seen".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream.h"

static ws_output out = WS_OUTPUT("out");
static ws_store seen = WS_STORE("seen");
static char prefix[256]; /* from the config's "prefix" */
static ws_buf val;
static uint8_t *buf;
static size_t buf_cap;

int ws_init(void) {
    int32_t e = ws_output_check(&out);
    if (e < 0) return ws_fail_call("output_index", out.name, e);
    e = ws_store_check(&seen);
    if (e < 0) return ws_fail_call("store_index", seen.name, e);
    /* Finds "prefix": "..." in the config (no escapes). */
    ws_buf c = {0};
    prefix[0] = 0;
    if (ws_config(&c) > 0) {
        char *s = malloc(c.len + 1);
        if (!s) return ws_fail("[[.Name]]: out of memory");
        memcpy(s, c.data, c.len);
        s[c.len] = 0;
        char *p = strstr(s, "\"prefix\":");
        if (p) {
            p += 9;
            while (*p == ' ') p++;
            char *end = *p == '"' ? strchr(p + 1, '"') : NULL;
            if (end) snprintf(prefix, sizeof prefix, "%.*s", (int)(end - p - 1), p + 1);
        }
        free(s);
    }
    ws_buf_free(&c);
    return WS_OK;
}

int ws_process(const ws_record *r) {
    if (r->value.len < 0) return ws_fail("[[.Name]]: a tombstone has no value to process");
    const void *key = r->key.ptr;
    size_t kl = r->key.len < 0 ? 0 : (size_t)r->key.len;
    int32_t got = ws_get(&seen, key, kl, &val);
    if (got < 0) return ws_fail_call("state_get", seen.name, got);
    unsigned long long n = 0;
    if (got == 1) {
        char t[24];
        snprintf(t, sizeof t, "%.*s", (int)val.len, (const char *)val.data);
        n = strtoull(t, NULL, 10);
    }
    char count[24];
    int cl = snprintf(count, sizeof count, "%llu", n + 1);
    int32_t e = ws_put(&seen, key, kl, count, (size_t)cl);
    if (e < 0) return ws_fail_call("state_put", seen.name, e);
    size_t pl = strlen(prefix), vl = (size_t)r->value.len;
    if (pl + vl > buf_cap) {
        uint8_t *b = realloc(buf, pl + vl);
        if (!b) return ws_fail("[[.Name]]: out of memory");
        buf = b;
        buf_cap = pl + vl;
    }
    memcpy(buf, prefix, pl);
    for (size_t i = 0; i < vl; i++) buf[pl + i] = (uint8_t)toupper(r->value.ptr[i]);
    ws_header h = {ws_str("seen"), {(const uint8_t *)count, cl}};
    ws_out o = {r->key, {buf, (int32_t)(pl + vl)}, &h, 1, 0};
    e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}
`,
	"NAME_test.c": `/* The native test of [[.Ident]].c, against the C SDK's fake host. */
#include <stdio.h>
#include <string.h>

#include "wasmstream_fake.h"

int main(void) {
    const char *outs[] = {"out"}, *stores[] = {"seen"};
    ws_fake *h = ws_fake_new(outs, 1, stores, 1, "{\"prefix\":\"> \"}");
    if (ws_fake_start(h) != WS_OK) {
        fprintf(stderr, "FAIL init: %s\n", ws_fake_error(h));
        return 1;
    }
    const char *want[] = {"1", "2"};
    for (int i = 0; i < 2; i++) {
        if (ws_fake_process_kv(h, ws_str("k"), ws_str("hello"), 1) != WS_OK) {
            fprintf(stderr, "FAIL record %d: %s\n", i, ws_fake_error(h));
            return 1;
        }
        ws_record r;
        ws_header hd;
        size_t pos = 0;
        ws_fake_emitted(h, 0, &r);
        ws_next_header(&r, &pos, &hd);
        if (r.value.len != 7 || memcmp(r.value.ptr, "> HELLO", 7) || hd.value.len != 1 || hd.value.ptr[0] != want[i][0]) {
            fprintf(stderr, "FAIL record %d: emitted %.*s\n", i, (int)r.value.len, (const char *)r.value.ptr);
            return 1;
        }
    }
    if (ws_fake_process_kv(h, ws_str("k"), WS_NULL, 1) != WS_FAILED) {
        fprintf(stderr, "FAIL: a tombstone was accepted\n");
        return 1;
    }
    ws_fake_free(h);
    puts("ok");
    return 0;
}
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test, against the
# C SDK's fake host). Debian packages: clang-19 lld-19 wasi-libc
# libclang-rt-19-dev-wasm32 (or WASI_SYSROOT pointing at a wasi-sdk sysroot).
WASMSTREAM_SDK ?= [[.SDK]]
SDK = $(WASMSTREAM_SDK)/sdk/c
CLANG ?= clang-19
WASI_SYSROOT ?= /usr
WASI_FLAGS ?= --sysroot=$(WASI_SYSROOT) -isystem /usr/include/wasm32-wasi -L/usr/lib/wasm32-wasi
CC ?= cc

[[.Ident]].wasm: [[.Ident]].c $(SDK)/wasmstream.c $(SDK)/wasmstream.h
	$(CLANG) --target=wasm32-wasi $(WASI_FLAGS) -mexec-model=reactor -O2 -std=c11 -Wall -Wextra \
		-Wl,-z,stack-size=65536 -Wl,--strip-all -I$(SDK) -o $@ [[.Ident]].c $(SDK)/wasmstream.c

.PHONY: test
test:
	$(CC) -std=c11 -g -Wall -Wextra -I$(SDK) -o [[.Ident]]_test [[.Ident]]_test.c [[.Ident]].c \
		$(SDK)/wasmstream.c $(SDK)/wasmstream_fake.c
	./[[.Ident]]_test
`,
	".gitignore": "*.wasm\n[[.Ident]]_test\nwasmstream-state/\n",
}
