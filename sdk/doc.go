// Package sdk is the Go SDK for wasmstream plugins: stream processors that
// run as WebAssembly modules inside the wasmstream host, one call per input
// record.
//
// A plugin is a main package built with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o p.wasm ./myplugin
//
// and looks like this:
//
//	package main
//
//	import "github.com/wasmstream/wasmstream/sdk"
//
//	var out = sdk.Output("enriched") // resolved when the instance starts
//
//	func init() { sdk.Handle(process) }
//
//	func process(r *sdk.Record) error {
//		return out.Forward(r) // the record as it came, without a copy
//	}
//
//	func main() {} // never called: c-shared runs init functions only
//
// The SDK provides the module's exports (the ABI version marker,
// wasmstream_input, wasmstream_process, wasmstream_init) itself; a plugin
// only registers a handler with Handle and, optionally, an init hook with
// OnInit. Everything the plugin may do goes through this package: read the
// record, Emit (or Forward) to declared outputs, read and write declared
// state stores, read its Config, Log. The contract underneath is
// abi/ABI.md.
//
// Outputs and stores made while the plugin starts (package variables, or
// in the OnInit hook) are resolved when the instance starts: a deployment
// whose config lacks one fails to start, and `wasmstream validate` reports
// it, naming every missing name and the config field to add it to.
//
// # Errors and failures
//
// A handler that returns an error fails the record: the SDK passes the
// error's text to the host (set_error) and the host applies the processor's
// error policy (fail, skip or dead-letter). A handler that panics fails the
// record the same way with the text "panic: <value>"; the panic is
// recovered, so the instance survives. A failed record's emits and state
// writes are discarded by the host as a whole.
//
// Host calls that fail return a *HostError that wraps an abi.Errno, so
// callers can test errors.Is(err, abi.ErrnoTooLarge).
//
// # Lifetimes
//
// A Record's byte slices alias the SDK's input buffer and are valid only
// during the handler call; copy what must outlive it. The plugin's memory
// should not hold anything that matters between records either: after a
// trap the host replaces the instance. State belongs in stores.
//
// # Weight
//
// Every plugin links this package, so it imports only the standard library
// packages it cannot do without (no fmt, no encoding/json): a Go plugin is
// about 1.9 MB and each extra megabyte costs compile and instantiate time in
// the host. Config returns the raw JSON bytes; a plugin decides how to parse
// them.
//
// # Time
//
// Package sdk/timer adds timers (event time and processing time), the
// task's stream and wall clocks, and a commit-point hook that calls the
// plugin once per commit window per key it marked; package sdk/window
// builds tumbling, hopping and session windows on them (abi/ABI.md section
// 8). Only a plugin that imports sdk/timer carries its exports.
//
// # State migration
//
// Package sdk/migrate lets a version rewrite the stores another version
// wrote (JSON to binary, a renamed key) when it replaces it:
// migrate.Handle(func(from string) error) runs once per task, before the
// version's first record, with the store API available and the old
// version's ID; its writes commit with the swap, and a failure rolls the
// version back (abi/ABI.md section 13). sdktest.Host.Migrate runs it in a
// test. Only a plugin that imports sdk/migrate carries the export.
//
// # Cheap processors
//
// Go compiled to Wasm is slow compute: every call, memory access and
// allocation costs several times what it does natively, and the garbage
// collector runs inside the record that allocated. What a processor does
// per record is what it costs; the rules that matter, measured on
// plugins/wordcount (host/internal/conformance BenchmarkPolyglot: a 10-word
// line went from 31.6 to 14.5 us of CPU through the engine, 41.8 to 26.2
// us end to end with Kafka):
//
//   - Allocate nothing per record. Keep scratch slices in package
//     variables and reslice them ([:0]); read state with
//     StoreHandle.AppendGet into a reused buffer, not Get (which copies
//     into a new slice); Emit copies what it sends, so its Out may point
//     at scratch.
//   - Emit the input's own slices when they are the output: a record
//     emitted with the input's key and value (and headers) is sent as the
//     input buffer itself, with no encoding or copy.
//   - Prefer slices and comparisons to maps and strings for the few items
//     of one record: a map insert needs a string (an allocation); m[string(b)]
//     lookups and string(a) == string(b) comparisons do not allocate.
//   - Take the ASCII fast path before package unicode: its tables are
//     lookups through several calls per rune.
//   - Keep per-byte loops small: Go's Wasm sends every branch through its
//     function's dispatch table and keeps what does not fit its few
//     registers in memory, so one table lookup beats a chain of
//     comparisons, and rare cases belong in a function of their own
//     (plugins/internal/words).
//   - A buffer on the stack ([8]byte for a state value) may be passed to
//     Put, Emit and the other calls: the host keeps no pointer into plugin
//     memory, so it stays on the stack.
//   - Keep encoding/json and fmt out (see Weight).
//
// For the cheapest plugins, write them in Rust (sdk/rust) or C (sdk/c): the
// same wordcount costs 9.6 us (Rust) and 7.6 us (C), most of it the host's
// state and emit calls, and an instance uses 128 KiB instead of 2.6 MiB.
//
// # Testing
//
// Outside GOOS=wasip1 the SDK's host calls go to an in-process fake host,
// so plugins are unit-tested with plain `go test` through package
// sdk/sdktest.
package sdk
