// Command counter is a test plugin for the exactly-once, crash and swap
// tests: see package countlib for what it does.
//
// A record whose value starts with "trap" fails (the plugin returns an
// error), so tests can exercise the error policies.
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
		return errors.New("counter: asked to fail by the record")
	}
	return countlib.Count(r)
}

func main() {}
