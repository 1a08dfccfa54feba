// Command counterv2 is counter's logic in other bytes: a second version of
// the same processor for the hot-swap tests, whose counts must continue
// across the swap exactly.
package main

import (
	"errors"
	"strings"

	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
)

func init() {
	sdk.OnInit(func() error {
		sdk.Log(sdk.LevelDebug, "counter v2 starting")
		return nil
	})
	sdk.Handle(process)
}

func process(r *sdk.Record) error {
	if strings.HasPrefix(string(r.Value), "trap") {
		return errors.New("counter v2: asked to fail by the record")
	}
	return countlib.Count(r)
}

func main() {}
