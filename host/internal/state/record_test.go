package state

import (
	"fmt"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/keymap"
)

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
	const n = 4 * keymap.ScanMax
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
