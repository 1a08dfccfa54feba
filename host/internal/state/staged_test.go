package state

import (
	"fmt"
	"testing"
)

// A record's writes are found by key whether scanned (few) or indexed
// (many), the latest write to a key wins, and a reset leaves nothing of
// them: not the keys, not the values, even though the buffers are reused.
func TestRecordWrites(t *testing.T) {
	var w recordWrites
	for _, n := range []int{1, scanMax, scanMax + 1, 3 * scanMax} {
		for round := 0; round < 2; round++ {
			for i := 0; i < n; i++ {
				w.set(fmt.Appendf(nil, "key-%d", i), entry{val: fmt.Appendf(nil, "v%d-%d", round, i)})
			}
			// Rewrite every other key: one entry each still.
			for i := 0; i < n; i += 2 {
				w.set(fmt.Appendf(nil, "key-%d", i), entry{del: true})
			}
			if w.len() != n {
				t.Fatalf("%d keys, round %d: len %d", n, round, w.len())
			}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("key-%d", i)
				j, js := w.find([]byte(k)), w.findString(k)
				if j < 0 || j != js {
					t.Fatalf("%d keys: find(%s) = %d, findString = %d", n, k, j, js)
				}
				e := w.ents[j]
				switch {
				case string(w.keys[j]) != k:
					t.Fatalf("%d keys: position %d holds key %q, want %q", n, j, w.keys[j], k)
				case i%2 == 0 && !e.del:
					t.Fatalf("%d keys: %s: %+v, want the later delete", n, k, e)
				case i%2 == 1 && string(e.val) != fmt.Sprintf("v%d-%d", round, i):
					t.Fatalf("%d keys: %s = %q, want this round's value", n, k, e.val)
				}
			}
			if w.find([]byte("key-missing")) != -1 || w.findString(fmt.Sprintf("key-%d", n)) != -1 {
				t.Fatalf("%d keys: a key never written is found", n)
			}
			w.reset()
			if w.len() != 0 || w.find([]byte("key-0")) != -1 {
				t.Fatalf("%d keys: after reset: len %d, key-0 at %d", n, w.len(), w.find([]byte("key-0")))
			}
		}
	}
	// A key's bytes are its own: the caller's slice may change after set.
	k := []byte("mutable")
	w.set(k, entry{val: []byte("x")})
	k[0] = 'M'
	if w.find([]byte("mutable")) != 0 || w.find(k) != -1 {
		t.Fatal("set kept the caller's key bytes instead of a copy")
	}
}

// The window's writes: one entry per key, the latest winning, the key
// reported once (when new), and nothing after a reset.
func TestWindowWrites(t *testing.T) {
	var w windowWrites
	if _, ok := w.get([]byte("a")); ok {
		t.Fatal("the zero window holds a key")
	}
	for round := 0; round < 2; round++ {
		if k, added := w.set([]byte("a"), entry{val: []byte("1")}); !added || k != "a" {
			t.Fatalf("round %d: first set of a: %q %v", round, k, added)
		}
		if k, added := w.set([]byte("a"), entry{val: []byte("2")}); added || k != "" {
			t.Fatalf("round %d: second set of a: %q %v", round, k, added)
		}
		w.set([]byte("b"), entry{del: true})
		if e, ok := w.get([]byte("a")); !ok || string(e.val) != "2" || w.at("a").del || !w.at("b").del || w.len() != 2 {
			t.Fatalf("round %d: a = %+v %v, b = %+v, len %d", round, e, ok, w.at("b"), w.len())
		}
		w.reset()
		if _, ok := w.get([]byte("a")); ok || w.len() != 0 {
			t.Fatalf("round %d: a window holds a key after reset", round)
		}
	}
}

// A record that writes more keys than are scanned (the indexed path) reads
// its own writes, shows them to a scan over the window's, loses all of
// them on abort, and on success leaves one change per key, the latest.
func TestRecordWithManyKeys(t *testing.T) {
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tk := restored(t, db, "p", 0, "s")
	defer tk.Close()
	const n = 4 * scanMax
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	write := func(tag string) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := tk.Put(0, key(i), []byte(tag+"-first")); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i += 3 {
			if err := tk.Put(0, key(i), []byte(tag)); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i < n; i += 3 {
			if err := tk.Delete(0, key(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(i int, tag string) (string, bool) {
		switch i % 3 {
		case 0:
			return tag, true
		case 1:
			return "", false
		}
		return tag + "-first", true
	}
	check := func(what, tag string) {
		t.Helper()
		for i := 0; i < n; i++ {
			v, found, err := tk.Get(0, key(i))
			wv, wfound := want(i, tag)
			if err != nil || found != wfound || string(v) != wv {
				t.Fatalf("%s: %s = %q, %v, %v; want %q, %v", what, key(i), v, found, err, wv, wfound)
			}
		}
		it, err := tk.Scan(0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		seen := 0
		for {
			k, v, ok, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			var i int
			fmt.Sscanf(string(k), "k%03d", &i)
			if wv, wfound := want(i, tag); !wfound || string(v) != wv {
				t.Fatalf("%s: scan: %s = %q, want %q (found %v)", what, k, v, wv, wfound)
			}
			seen++
		}
		if seen != n-(n+1)/3 {
			t.Fatalf("%s: scan saw %d keys, want %d", what, seen, n-(n+1)/3)
		}
	}

	write("aborted")
	check("within the record", "aborted")
	tk.AbortRecord()
	for i := 0; i < n; i++ {
		if _, found, _ := tk.Get(0, key(i)); found {
			t.Fatalf("after abort: %s found", key(i))
		}
	}
	write("kept")
	tk.CommitRecord()
	check("after the record", "kept")
	if d := tk.Dirty(); len(d) != n {
		t.Fatalf("Dirty: %d changes, want one per key (%d)", len(d), n)
	}
}
