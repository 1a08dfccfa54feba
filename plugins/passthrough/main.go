// Command passthrough is a wasmstream plugin that emits every input record
// unchanged to the output "out": key, value, headers and timestamp. The
// host picks the output partition by key hash. It takes no config.
//
// It is the baseline for benchmarks (the cost of the host and the ABI with
// no work in the plugin) and the demo's smoke test, so it links nothing
// beyond the SDK: not even the bundled plugins' config reader, which adds
// about 180 KB.
package main

import (
	"errors"

	"github.com/wasmstream/wasmstream/sdk"
)

var out = sdk.Output("out")

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	if !emptyConfig(sdk.Config()) {
		return errors.New("passthrough: config: takes no config; got " + string(sdk.Config()))
	}
	if err := out.Check(); err != nil {
		return errors.New("passthrough: " + err.Error())
	}
	return nil
}

// emptyConfig reports whether c is empty, null or {} (JSON whitespace
// allowed), written out to keep package bytes and its Unicode tables out.
func emptyConfig(c []byte) bool {
	var s []byte
	for _, b := range c {
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			s = append(s, b)
		}
	}
	switch string(s) {
	case "", "null", "{}":
		return true
	}
	return false
}

func process(r *sdk.Record) error {
	return out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
}

func main() {}
