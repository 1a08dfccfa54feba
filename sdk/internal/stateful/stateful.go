// Package stateful holds what the SDK's stateful helpers (sdk/join,
// sdk/window) share: the check of a name, the layout of their state keys,
// time arithmetic that saturates, and what they do with a late record.
package stateful

import (
	"encoding/binary"
	"math"

	"github.com/wasmstream/wasmstream/sdk"
)

// ContainsZero reports whether name has a zero byte: a helper's state keys
// start with its name and a zero byte, so a name with one could reach into
// another helper's keys.
func ContainsZero(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return true
		}
	}
	return false
}

// AppendKey appends a state key to buf: prefix, tag, key's length (u32),
// key, then each of vals sortable (Sortable, 8 bytes big-endian), so keys
// of one prefix, tag and record key sort by vals.
func AppendKey(buf, prefix []byte, tag byte, key []byte, vals ...int64) []byte {
	buf = append(buf, prefix...)
	buf = append(buf, tag)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(key)))
	buf = append(buf, key...)
	for _, v := range vals {
		buf = binary.BigEndian.AppendUint64(buf, Sortable(v))
	}
	return buf
}

// ParseKey splits a key that AppendKey made with prefix and n values: its
// tag, record key (sharing k's memory, capacity capped) and first value.
// ok is false for a key of any other shape.
func ParseKey(k, prefix []byte, n int) (tag byte, key []byte, first int64, ok bool) {
	p := len(prefix)
	if n < 1 || len(k) < p+1+4+8*n || string(k[:p]) != string(prefix) {
		return 0, nil, 0, false
	}
	l := int(binary.BigEndian.Uint32(k[p+1:]))
	if len(k) != p+1+4+l+8*n {
		return 0, nil, 0, false
	}
	return k[p], k[p+5 : p+5+l : p+5+l], FromSortable(k[p+5+l:]), true
}

// Sortable maps v to a uint64 whose big-endian bytes sort as v does.
func Sortable(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// FromSortable is the int64 of the first 8 bytes of b, written by Sortable.
func FromSortable(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// Sat is a+b clamped to the int64 range: windows near the ends of time do
// not wrap.
func Sat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// PrefixEnd is the smallest key above every key starting with p (nil: no
// such key, p is all 0xff).
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Late records r as late: the count under key in store becomes seen+1
// (seen: the count the caller read), and when out is not nil r goes to
// it unchanged but for the header {header: name} added.
func Late(store *sdk.StoreHandle, key []byte, seen uint64, out *sdk.OutputHandle, header, name string, r *sdk.Record) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seen+1)
	if err := store.Put(key, b[:]); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	hs := make([]sdk.Header, len(r.Headers), len(r.Headers)+1)
	copy(hs, r.Headers)
	hs = append(hs, sdk.Header{Key: header, Value: []byte(name)})
	return out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp})
}
