package state

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/keymap"
)

// A record that writes more keys than are scanned (the indexed path) reads
// its own writes, shows them to a scan over the window's, loses all of
// them on abort, and on success leaves one change per key, the latest.
func TestRecordWithManyKeys(t *testing.T) {
	tk := restored(t, openMem(t, Options{}), "p", 0, "s")
	defer tk.Close()
	const n = 4 * keymap.ScanMax
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	// Every key is written, then every third rewritten and every third
	// (from the second) deleted.
	write := func(tag string) {
		t.Helper()
		for i := 0; i < n; i++ {
			mustPut(t, tk, 0, key(i), tag+"-first")
		}
		for i := 0; i < n; i += 3 {
			mustPut(t, tk, 0, key(i), tag)
		}
		for i := 1; i < n; i += 3 {
			if err := tk.Delete(0, []byte(key(i))); err != nil {
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
		var wantScan []kv
		for i := 0; i < n; i++ {
			v, found := mustGet(t, tk, 0, key(i))
			wv, wfound := want(i, tag)
			if found != wfound || v != wv {
				t.Fatalf("%s: %s = %q, %v; want %q, %v", what, key(i), v, found, wv, wfound)
			}
			if wfound {
				wantScan = append(wantScan, kv{key(i), wv})
			}
		}
		if got := scanAll(t, tk, 0, "", ""); !slices.Equal(got, wantScan) {
			t.Fatalf("%s: scan = %q, want %q", what, got, wantScan)
		}
	}

	write("aborted")
	check("within the record", "aborted")
	tk.AbortRecord()
	for i := 0; i < n; i++ {
		if _, found := mustGet(t, tk, 0, key(i)); found {
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
