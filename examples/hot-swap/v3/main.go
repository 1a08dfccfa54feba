// Command v3 is a flawed candidate of the hot-swap example's greeter, for
// its shadow runs: v1's greeting, except that it greets grace as "hello,
// Grace" (a change for a known subset of the names) and fails the records
// whose key is a multiple of 100 (1 % of the feeder's). Run as a shadow,
// it shows both; deployed shadow-first, it is refused.
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

var greetings = sdk.Output("greetings")

func init() {
	sdk.OnInit(greetings.Check)
	sdk.Handle(process)
}

func process(r *sdk.Record) error {
	if n, err := strconv.Atoi(string(r.Key)); err == nil && n%100 == 0 {
		return errors.New("v3 cannot greet this one")
	}
	name := r.Value
	if string(name) == "grace" {
		name = []byte("Grace")
	}
	return greetings.Emit(sdk.Out{Key: r.Key, Value: append([]byte("hello, "), name...)})
}

func main() {}
