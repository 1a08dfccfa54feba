// Command counterbad is a broken new version of counter for the automatic
// rollback tests: it fails one record in three (by a hash of the record's
// value, so the same records fail every time), after counting it.
package main

import (
	"errors"
	"hash/fnv"

	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
)

func init() { sdk.Handle(process) }

func process(r *sdk.Record) error {
	if err := countlib.Count(r); err != nil {
		return err
	}
	h := fnv.New32a()
	h.Write(r.Value)
	if h.Sum32()%3 == 0 {
		// After the state write and the emit: the host must drop both.
		return errors.New("counterbad: fails this record")
	}
	return nil
}

func main() {}
