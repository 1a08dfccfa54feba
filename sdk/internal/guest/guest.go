// Package guest lets the SDK's optional packages (sdk/timer) run their
// Wasm exports through the SDK's own machinery: the input buffer the host
// writes into, and the way a call reports failure (set_error, recovered
// panics). Package sdk fills it in from an init function; it is not an
// API.
//
// It exists because an optional export must live in a package of its own:
// a c-shared build exports every //go:wasmexport function of every linked
// package, and the host detects the optional exports by name, so a plugin
// that does not import sdk/timer must not carry wasmstream_on_timer.
package guest

import "github.com/wasmstream/wasmstream/abi"

var (
	// Input returns the buffer last handed to the host by
	// wasmstream_input, where the host wrote the current call's input.
	Input func() []byte
	// Run runs fn as one call into the plugin (a callback export), the way
	// process runs the record handler: an error or a panic fails the call
	// with its text (set_error), and emits that leave their timestamp to
	// the SDK get ts.
	Run func(ts int64, fn func() error) abi.Status
	// Fail fails the current call with msg (set_error) and returns
	// StatusFailed.
	Fail func(msg string) abi.Status
	// Trigger runs one trigger of a batch (abi/ABI.md section 10): the
	// timer or commit callback its kind names, as wasmstream_on_timer or
	// wasmstream_on_commit would. Set by package sdk/timer; nil in a
	// plugin that does not import it.
	Trigger func(trig []byte) abi.Status
)
