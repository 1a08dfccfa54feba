// Command v2 is the second version of the hot-swap example's greeter: the
// same processor as v1 with a new format, "Hello, <Name>!", so the switch
// shows in the output.
package main

import (
	"unicode"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/sdk"
)

var greetings = sdk.Output("greetings")

func init() {
	sdk.OnInit(greetings.Check)
	sdk.Handle(process)
}

func process(r *sdk.Record) error {
	out := append([]byte("Hello, "), capitalize(r.Value)...)
	out = append(out, '!')
	return greetings.Emit(sdk.Out{Key: r.Key, Value: out})
}

// capitalize returns name with its first letter upper-cased.
func capitalize(name []byte) []byte {
	first, n := utf8.DecodeRune(name)
	if first == utf8.RuneError {
		return name
	}
	return append(utf8.AppendRune(nil, unicode.ToUpper(first)), name[n:]...)
}

func main() {}
