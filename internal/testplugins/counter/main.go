// Command counter is a test plugin for the exactly-once and crash tests.
// For each record it increments count[key] in store "counts" and emits
// (key = the record's value, an input id; value = "<key>:<count>") to
// output "out". Under exactly_once every id appears once in the output and,
// per key, the emitted counts are exactly 1..n: a lost or repeated record
// shows as a missing id, a repeated id, or a gap or repeat in the counts.
//
// A record whose value starts with "trap" fails (the plugin returns an
// error), so tests can exercise the error policies.
package main

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out    = sdk.Output("out")
	counts = sdk.Store("counts")
)

func init() { sdk.Handle(process) }

func process(r *sdk.Record) error {
	if strings.HasPrefix(string(r.Value), "trap") {
		return errors.New("counter: asked to fail by the record")
	}
	var n uint64
	v, ok, err := counts.Get(r.Key)
	if err != nil {
		return err
	}
	if ok && len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	n++
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], n)
	if err := counts.Put(r.Key, buf[:]); err != nil {
		return err
	}
	return out.Emit(sdk.Out{Key: r.Value, Value: []byte(string(r.Key) + ":" + strconv.FormatUint(n, 10))})
}

func main() {}
