// Command passthrough is a wasmstream plugin that emits every input record
// unchanged to the output "out": key, value, headers and timestamp. The
// host picks the output partition by key hash. It takes no config.
//
// It is the baseline for benchmarks (the cost of the host and the ABI with
// no work in the plugin) and the demo's smoke test, so it links nothing
// beyond the SDK (and package noconfig, which links nothing else either):
// not even the bundled plugins' config reader, which adds about 180 KB.
package main

import (
	"github.com/wasmstream/wasmstream/plugins/internal/noconfig"
	"github.com/wasmstream/wasmstream/sdk"
)

var out = sdk.Output("out")

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error { return noconfig.Setup("passthrough", out) }

func process(r *sdk.Record) error {
	return out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
}

func main() {}
