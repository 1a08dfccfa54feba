package scaffold

import (
	"io/fs"
	"strings"
)

var rustLang = &Lang{
	Name:   "rust",
	Title:  "Rust",
	Files:  rustFiles,
	SDK:    rustSDK,
	Marker: "Cargo.toml",
}

// rustSDK is the crate sdk/rust: its Cargo.toml and src/. The project
// depends on it by a path inside the project.
func rustSDK(src fs.FS) (map[string][]byte, error) {
	inSrc := func(p string) bool { return p == "sdk/rust/src" || strings.HasPrefix(p, "sdk/rust/src/") }
	return copyTree(src, "sdk/rust", "", func(p string, d fs.DirEntry) bool {
		return inSrc(p) || p == "sdk/rust/Cargo.toml"
	})
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
# The wasmstream SDK, vendored in [[.SDKDir]]/ by wasmstream init
# ("wasmstream init --update-sdk" replaces it).
wasmstream = { path = "[[.SDKDir]]" }

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

static OUT: Output = wasmstream::output!("out");
static SEEN: Store = wasmstream::store!("seen");

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
# Optional: binaryen's optimizer (npm install binaryen, or Debian's
# binaryen), e.g. make WASM_OPT=wasm-opt. It took 8-15 % off the CPU per
# record of wasmstream's own Rust plugins. Sign the module after it.
WASM_OPT ?=
WASM_OPT_FLAGS ?= -O3

[[.Ident]].wasm: $(wildcard src/*.rs) Cargo.toml $(shell find [[.SDKDir]] -name '*.rs')
	$(ENV) $(CARGO) build --offline --release --target $(TARGET)
	cp $(TARGET_DIR)/$(TARGET)/release/[[.Ident]].wasm $@
	$(if $(WASM_OPT),$(WASM_OPT) $(WASM_OPT_FLAGS) $@ -o $@)

.PHONY: test
test:
	$(ENV) $(CARGO) test --offline
`,
	".gitignore": "target/\nCargo.lock\n*.wasm\nwasmstream-state/\n",
}
