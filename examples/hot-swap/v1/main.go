// Command v1 is the first version of the hot-swap example's greeter: for
// each name on its input it emits "hello, <name>" to the "greetings"
// output, under the input's key.
package main

import "github.com/wasmstream/wasmstream/sdk"

var greetings = sdk.Output("greetings")

func init() {
	// A processor whose config lacks the output fails at init: a running
	// process, and `wasmstream deploy` before it publishes, refuse it.
	sdk.OnInit(greetings.Check)
	sdk.Handle(process)
}

func process(r *sdk.Record) error {
	return greetings.Emit(sdk.Out{Key: r.Key, Value: append([]byte("hello, "), r.Value...)})
}

func main() {}
