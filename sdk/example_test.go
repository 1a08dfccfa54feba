package sdk_test

import (
	"encoding/binary"

	"github.com/wasmstream/wasmstream/sdk"
)

// A stateful processor: count records per key and emit the running count.
// In a plugin, the two variables are package-level and the calls to OnInit
// and Handle sit in func init.
func Example() {
	var (
		seen = sdk.Store("seen")
		out  = sdk.Output("counts")
	)
	sdk.OnInit(func() error {
		// Fail at start, not on the first record, if the deployment
		// does not declare what the plugin uses.
		if err := seen.Check(); err != nil {
			return err
		}
		return out.Check()
	})
	sdk.Handle(func(r *sdk.Record) error {
		v, _, err := seen.Get(r.Key)
		if err != nil {
			return err
		}
		var n uint64
		if len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		n++
		v = binary.BigEndian.AppendUint64(v[:0], n)
		if err := seen.Put(r.Key, v); err != nil {
			return err
		}
		return out.Emit(sdk.Out{Key: r.Key, Value: v})
	})
}

func ExampleStoreHandle_ScanPrefix() {
	sessions := sdk.Store("sessions")
	sdk.Handle(func(r *sdk.Record) error {
		it, err := sessions.ScanPrefix(append([]byte("user/"), r.Key...))
		if err != nil {
			return err
		}
		defer it.Close()
		for it.Next() {
			sdk.LogDebug("session " + string(it.Key()))
		}
		return it.Err()
	})
}
