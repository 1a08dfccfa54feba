// Package conformance holds the ABI conformance suite of the SDKs (see
// README.md): one processor per language under guest/, built and run
// through the engine by this package's tests, which compare their outputs
// byte for byte. It also runs the bundled plugins written in Rust, C and
// TypeScript (plugins/rust, plugins/c, plugins/ts) against the Go ones, and benchmarks every
// language next to the raw wazero floor. It has no code of its own outside
// tests.
package conformance
