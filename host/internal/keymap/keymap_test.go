package keymap

import (
	"fmt"
	"testing"
)

// A Scratch finds its keys whether scanned (few) or indexed (many), the
// latest Set of a key wins, and a Reset leaves nothing, though the buffers
// are reused.
func TestScratch(t *testing.T) {
	var s Scratch[string]
	for _, n := range []int{1, ScanMax, ScanMax + 1, 3 * ScanMax} {
		for round := 0; round < 2; round++ {
			for i := 0; i < n; i++ {
				s.Set(fmt.Appendf(nil, "key-%d", i), fmt.Sprintf("first-%d-%d", round, i))
			}
			for i := 0; i < n; i += 2 {
				s.Set(fmt.Appendf(nil, "key-%d", i), fmt.Sprintf("second-%d-%d", round, i))
			}
			if s.Len() != n || len(s.Keys()) != n || len(s.Values()) != n {
				t.Fatalf("%d keys, round %d: Len %d", n, round, s.Len())
			}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("key-%d", i)
				j, js := s.Find([]byte(k)), s.FindString(k)
				if j != i || js != i {
					t.Fatalf("%d keys: Find(%s) = %d, FindString = %d; want %d (the order first set)", n, k, j, js, i)
				}
				want := fmt.Sprintf("first-%d-%d", round, i)
				if i%2 == 0 {
					want = fmt.Sprintf("second-%d-%d", round, i)
				}
				if string(s.Keys()[j]) != k || s.Values()[j] != want {
					t.Fatalf("%d keys: position %d holds %q = %q, want %q = %q", n, j, s.Keys()[j], s.Values()[j], k, want)
				}
			}
			if s.Find([]byte("key-missing")) != -1 || s.FindString(fmt.Sprintf("key-%d", n)) != -1 {
				t.Fatalf("%d keys: a key never set is found", n)
			}
			s.Reset()
			if s.Len() != 0 || s.Find([]byte("key-0")) != -1 || s.FindString("key-0") != -1 {
				t.Fatalf("%d keys: a key is found after Reset", n)
			}
		}
	}
	// The key bytes are the Scratch's own: the caller may change its slice.
	k := []byte("mutable")
	s.Set(k, "x")
	k[0] = 'M'
	if s.Find([]byte("mutable")) != 0 || s.Find(k) != -1 {
		t.Fatal("Set kept the caller's key bytes instead of a copy")
	}
	// A key cannot grow into the next one's bytes.
	s.Set([]byte("next"), "y")
	_ = append(s.Keys()[0], "-grown"...)
	if string(s.Keys()[1]) != "next" {
		t.Fatalf("an append to one key changed the next: %q", s.Keys()[1])
	}
}

// A Window holds one value per key, the latest winning, reports a key as
// new once, and holds nothing after a Reset.
func TestWindow(t *testing.T) {
	var w Window[int]
	if _, ok := w.Get([]byte("a")); ok || w.Has([]byte("a")) || w.Len() != 0 {
		t.Fatal("the zero Window holds a key")
	}
	for round := 0; round < 2; round++ {
		if k, added := w.Set([]byte("a"), 1); !added || k != "a" {
			t.Fatalf("round %d: first Set of a: %q %v", round, k, added)
		}
		if k, added := w.Set([]byte("a"), 2); added || k != "" {
			t.Fatalf("round %d: second Set of a: %q %v", round, k, added)
		}
		w.Set([]byte("b"), 3)
		if v, ok := w.Get([]byte("a")); !ok || v != 2 || w.At("b") != 3 || !w.Has([]byte("b")) || w.Len() != 2 {
			t.Fatalf("round %d: a = %d %v, b = %d, Len %d", round, v, ok, w.At("b"), w.Len())
		}
		all := map[string]int{}
		for k, v := range w.All() {
			all[k] = v
		}
		if len(all) != 2 || all["a"] != 2 || all["b"] != 3 {
			t.Fatalf("round %d: All yields %v", round, all)
		}
		w.Reset()
		if _, ok := w.Get([]byte("a")); ok || w.Len() != 0 {
			t.Fatalf("round %d: a key is found after Reset", round)
		}
	}
}

// A Window's remembered key answers only for itself: lookups that
// alternate keys, and keys that are prefixes of each other, find their own
// values; All yields the keys in the order first set.
func TestWindowLastKey(t *testing.T) {
	var w Window[int]
	keys := []string{"ab", "a", "abc", "b", ""}
	for n, k := range keys {
		w.Set([]byte(k), n)
	}
	for round := range 3 {
		for n, k := range keys {
			if v, ok := w.Get([]byte(k)); !ok || v != n+10*round {
				t.Fatalf("round %d: Get(%q) = %d %v, want %d", round, k, v, ok, n+10*round)
			}
			if _, added := w.Set([]byte(k), n+10*(round+1)); added {
				t.Fatalf("round %d: Set(%q) after Get added it again", round, k)
			}
			if w.Has([]byte(k + "x")) {
				t.Fatalf("round %d: Has(%q) right after %q", round, k+"x", k)
			}
		}
	}
	var order []string
	for k := range w.All() {
		order = append(order, k)
	}
	if fmt.Sprint(order) != fmt.Sprint(keys) || w.Len() != len(keys) {
		t.Fatalf("All yields %q, want %q", order, keys)
	}
	w.Reset()
	if w.Has([]byte("")) || w.Has([]byte("b")) {
		t.Fatal("a key is found after Reset")
	}
}
