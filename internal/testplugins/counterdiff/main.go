// Command counterdiff is counter with a planted difference, for replay's
// --diff-against tests: for the keys ending in 7 (k7, k17, k27) it emits
// the count with a "!" after it; every other key's output, and its state,
// are counter's. Like counter, it fails a record whose value starts with
// "trap".
package main

import (
	"errors"
	"strings"

	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
)

func init() { sdk.Handle(process) }

func process(r *sdk.Record) error {
	if strings.HasPrefix(string(r.Value), "trap") {
		return errors.New("counterdiff: asked to fail by the record")
	}
	if !strings.HasSuffix(string(r.Key), "7") {
		return countlib.Count(r)
	}
	return countlib.CountWith(r, func(o sdk.Out) error {
		o.Value = append(o.Value, '!')
		return countlib.Emit(o)
	})
}

func main() {}
