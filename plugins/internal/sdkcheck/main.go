// Command sdkcheck is not a plugin to deploy: plugins/plugins_test.go runs
// it as Wasm to exercise the SDK paths the bundled plugins do not reach
// there, where a pointer or length bug would only show in a real module:
// reads that must be retried with a larger buffer (config, state_get,
// scan_next), a record larger than the first input buffer, recovered
// panics and handler errors (set_error), headers, explicit partitions.
//
// Each record's value is a command; the result is emitted to "out".
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out   = sdk.Output("out")
	store = sdk.Store("s")
)

func init() { sdk.Handle(process) }

func emit(s string) error { return out.Emit(sdk.Out{Value: []byte(s)}) }

func process(r *sdk.Record) error {
	if len(r.Value) > 64<<10 { // larger than the SDK's first input buffer
		return emit("big " + strconv.Itoa(len(r.Value)))
	}
	switch string(r.Value) {
	case "config":
		c := sdk.Config()
		return emit("config " + strconv.Itoa(len(c)) + " " + string(c[len(c)-3:]))
	case "state":
		big := make([]byte, 5000)
		for i := range big {
			big[i] = byte(i)
		}
		if err := store.Put([]byte("big"), big); err != nil {
			return err
		}
		v, ok, err := store.Get([]byte("big"))
		if err != nil || !ok || string(v) != string(big) {
			return errors.New("state: big value did not come back")
		}
		_, ok, err = store.Get([]byte("missing"))
		if err != nil || ok {
			return errors.New("state: missing key found")
		}
		return emit("state ok")
	case "scan":
		for _, k := range []string{"s/b", "s/a", "s/c"} {
			if err := store.Put([]byte(k), make([]byte, 700)); err != nil { // over the first entry buffer
				return err
			}
		}
		it, err := store.Scan([]byte("s/a"), []byte("s/c"))
		if err != nil {
			return err
		}
		defer it.Close()
		s := "scan"
		for it.Next() {
			s += " " + string(it.Key()) + "=" + strconv.Itoa(len(it.Value()))
		}
		if err := it.Err(); err != nil {
			return err
		}
		return emit(s)
	case "headers":
		return out.Emit(sdk.Out{Key: []byte{}, Value: nil, Timestamp: 7,
			Headers: []sdk.Header{{Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "h", Value: []byte("v")}}})
	case "partition":
		return out.EmitTo(2, sdk.Out{Key: r.Key, Value: []byte("p")})
	case "error":
		return errors.New("rejected by the handler")
	case "panic":
		var m map[string]int
		//lint:ignore SA5000 a deliberate runtime error, as a real bug would make
		m["x"] = 1
	case "undeclared":
		return sdk.Output("nope").Emit(sdk.Out{})
	case "toolarge":
		err := out.Emit(sdk.Out{Value: make([]byte, abi.MaxRecordSize)})
		if !errors.Is(err, abi.ErrnoTooLarge) {
			return errors.New("toolarge: got " + errString(err))
		}
		return emit("toolarge ok")
	}
	return errors.New("unknown command " + strconv.Quote(string(r.Value)))
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func main() {}
