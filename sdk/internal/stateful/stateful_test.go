package stateful

import (
	"bytes"
	"math"
	"testing"
)

// Keys round-trip, sort by their values (negative ones included), and
// anything of another shape does not parse.
func TestKeys(t *testing.T) {
	prefix := []byte("p/")
	var last []byte
	for _, v := range []int64{math.MinInt64, -5, -1, 0, 1, 7, math.MaxInt64} {
		k := AppendKey(nil, prefix, 'w', []byte("key"), v, 42)
		tag, key, first, ok := ParseKey(k, prefix, 2)
		if !ok || tag != 'w' || string(key) != "key" || first != v || cap(key) != len(key) {
			t.Fatalf("ParseKey(AppendKey(%d)) = %c %q %d %v", v, tag, key, first, ok)
		}
		if last != nil && bytes.Compare(last, k) >= 0 {
			t.Fatalf("key of %d does not sort after the one before", v)
		}
		last = k
	}
	k := AppendKey(nil, prefix, 'w', []byte("key"), 1)
	for _, bad := range [][]byte{k[:len(k)-1], append(k, 0), []byte("q/" + string(k[2:])), nil} {
		if _, _, _, ok := ParseKey(bad, prefix, 1); ok {
			t.Errorf("ParseKey(%q) parsed", bad)
		}
	}
	if _, _, _, ok := ParseKey(k, prefix, 2); ok {
		t.Error("a key with one value parsed as one with two")
	}
}

func TestSatAndPrefixEnd(t *testing.T) {
	if Sat(math.MaxInt64, 1) != math.MaxInt64 || Sat(math.MinInt64, -1) != math.MinInt64 || Sat(3, -5) != -2 {
		t.Fatal("Sat does not clamp")
	}
	if got := PrefixEnd([]byte{'a', 0xff}); !bytes.Equal(got, []byte{'b'}) {
		t.Fatalf("PrefixEnd(a\\xff) = %q", got)
	}
	if PrefixEnd([]byte{0xff, 0xff}) != nil {
		t.Fatal("PrefixEnd of all 0xff is not nil")
	}
}
