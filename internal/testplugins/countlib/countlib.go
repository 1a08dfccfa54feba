// Package countlib is the logic of the counter test plugins (counter,
// counterv2, counterbad, counterdiff): for each record it increments count[key] in
// store "counts" and emits (key = the record's value, an input id; value =
// "<key>:<count>") to output "out". Under exactly_once every id appears once
// in the output and, per key, the emitted counts are exactly 1..n: a lost or
// repeated record shows as a missing id, a repeated id, or a gap or repeat
// in the counts. The variants differ in their bytes (a swap to another
// version of the same logic) or in which records they fail.
package countlib

import (
	"encoding/binary"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out    = sdk.Output("out")
	counts = sdk.Store("counts")
)

// Count processes one record as described in the package comment.
func Count(r *sdk.Record) error { return CountWith(r, out.Emit) }

// CountWith is Count emitting through emit (a variant that changes what
// it emits).
func CountWith(r *sdk.Record, emit func(sdk.Out) error) error {
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
	return emit(sdk.Out{Key: r.Value, Value: []byte(string(r.Key) + ":" + strconv.FormatUint(n, 10))})
}

// Emit emits o to output "out", as Count does.
func Emit(o sdk.Out) error { return out.Emit(o) }
