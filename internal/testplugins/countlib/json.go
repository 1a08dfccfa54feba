package countlib

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

// The state-migration pair (abi/ABI.md section 13): countjson keeps each
// count as JSON, {"n":5}; countmigrate keeps it in Count's binary layout
// (8 bytes, big-endian) and migrates the JSON layout to it. Both emit what
// Count emits, so the counts must continue across the swap exactly.

type jsonCount struct {
	N uint64 `json:"n"`
}

// CountJSON is Count with the count stored as JSON. A value in another
// layout fails the record.
func CountJSON(r *sdk.Record) error {
	var c jsonCount
	v, ok, err := counts.Get(r.Key)
	if err != nil {
		return err
	}
	if ok {
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("countjson: key %q holds %x, not a JSON count: %w", r.Key, v, err)
		}
	}
	c.N++
	b, _ := json.Marshal(c)
	if err := counts.Put(r.Key, b); err != nil {
		return err
	}
	return out.Emit(sdk.Out{Key: r.Value, Value: []byte(string(r.Key) + ":" + strconv.FormatUint(c.N, 10))})
}

// CountBinary is Count, but a value that is not 8 bytes (a JSON count not
// migrated) fails the record instead of counting from 0.
func CountBinary(r *sdk.Record) error {
	if v, ok, err := counts.Get(r.Key); err != nil {
		return err
	} else if ok && len(v) != 8 {
		return fmt.Errorf("countmigrate: key %q holds %q, not a binary count: the state was not migrated", r.Key, v)
	}
	return Count(r)
}

// MigrateJSON rewrites every JSON count of the store in the binary layout.
// It reads the whole store first and then writes: the test stores are small.
func MigrateJSON(from string) error {
	it, err := counts.Scan(nil, nil)
	if err != nil {
		return err
	}
	type entry struct{ key, value []byte }
	var all []entry
	for it.Next() {
		all = append(all, entry{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	if err := it.Close(); err != nil {
		return err
	}
	sdk.Log(sdk.LevelInfo, fmt.Sprintf("countmigrate: migrating %d counts from version %s", len(all), from))
	for _, e := range all {
		var c jsonCount
		if err := json.Unmarshal(e.value, &c); err != nil {
			return fmt.Errorf("countmigrate: key %q holds %x, not a JSON count: %w", e.key, e.value, err)
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], c.N)
		if err := counts.Put(e.key, buf[:]); err != nil {
			return err
		}
	}
	return nil
}
