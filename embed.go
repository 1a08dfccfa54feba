// Package wasmstream holds the sources of the SDKs as this module is built,
// for `wasmstream init`, which copies them into the projects it writes.
//
// The files are the repository's own (go:embed reads them at build time),
// not a copy kept beside them, so a binary always carries the SDK of the
// commit it was built from. go:embed cannot reach a parent directory,
// which is why this package sits at the module root. The patterns name
// what a project needs to build and to run its native tests:
//
//   - Go: the non-test Go files of sdk/ and its packages (sdk/sdktest, the
//     fake host, included) and of abi/, which the SDK imports, plus go.mod
//     for the go directive; test files are embedded by the globs and
//     dropped when copied.
//   - Rust: the crate sdk/rust: its Cargo.toml and src/ (all: keeps files
//     such as src/__rt.rs that a plain directory pattern would skip).
//   - C: the sources and headers at the top of sdk/c (the SDK and its fake
//     host; not its own tests).
//   - TypeScript: the .ts sources at the top of sdk/ts and in its
//     assembly/, its build script and fake host (.mjs), and the
//     package.json and package-lock.json that pin the compiler (not its
//     tests, not its node_modules).
//
// TestSDKEmbedsEveryFile checks these patterns against the tree, so a new
// SDK package or file that they miss fails the build's tests.
package wasmstream

import "embed"

// SDK is the SDK sources, at their paths in the repository (sdk/c/wasmstream.h).
//
//go:embed go.mod abi/*.go sdk/*.go sdk/*/*.go sdk/*/*/*.go
//go:embed sdk/rust/Cargo.toml all:sdk/rust/src
//go:embed sdk/c/*.c sdk/c/*.h
//go:embed sdk/ts/*.ts sdk/ts/*.mjs sdk/ts/*.json sdk/ts/assembly/*.ts
var SDK embed.FS
