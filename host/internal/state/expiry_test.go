package state

import (
	"math"
	"strings"
	"testing"
)

// A store with an expiry (abi/ABI.md section 8.7): an entry is readable
// until the store's clock reaches its last write plus the TTL, absent from
// Get and Scan from that call on, renewed by a write and not by a read;
// ExpireSome deletes it as a change of the window (a tombstone in Dirty)
// within a bounded number of calls; the stamp travels in the stored value
// (what the changelog carries), so a restore of it keeps the expiry; the
// caller never sees the stamp.
func TestExpiry(t *testing.T) {
	db := openMem(t, Options{})
	tk := restored(t, db, "p", 0, "s", "plain")
	if err := tk.SetExpiry(0, Expiry{TTL: 100}); err != nil {
		t.Fatal(err)
	}
	tk.SetClocks(math.MinInt64, 0) // no stream time yet: writes stamped 0, nothing expires
	put(t, tk, 0, "early", "e")
	tk.SetClocks(1000, 0)
	put(t, tk, 0, "a", "va") // stamped 1000
	put(t, tk, 0, "b", "vb")
	put(t, tk, 1, "a", "plain") // a store without expiry is untouched
	tk.CommitRecord()
	if v, ok := mustGet(t, tk, 0, "a"); !ok || v != "va" {
		t.Fatalf("a = %q, %v; want va (no stamp visible)", v, ok)
	}
	if _, ok := mustGet(t, tk, 0, "early"); ok {
		t.Fatal("an entry written before the stream time, stamped 0, is alive at 1000 with a TTL of 100")
	}
	tk.SetClocks(1099, 0)
	put(t, tk, 0, "b", "vb2") // renewed: stamped 1099
	tk.CommitRecord()
	if _, ok := mustGet(t, tk, 0, "a"); !ok {
		t.Fatal("a expired before its TTL")
	}
	tk.SetClocks(1100, 0)
	if _, ok := mustGet(t, tk, 0, "a"); ok {
		t.Fatal("a is readable at stamp+TTL")
	}
	if keys := scanKeys(t, tk, 0); keys != "b" {
		t.Fatalf("scan at 1100: %q, want b only", keys)
	}
	if v, ok := mustGet(t, tk, 1, "a"); !ok || v != "plain" {
		t.Fatalf("plain store: %q %v", v, ok)
	}
	// Deleted in batches: one entry per call here.
	var from []byte
	deleted := 0
	for range 4 {
		next, n, err := tk.ExpireSome(0, from, 1)
		if err != nil {
			t.Fatal(err)
		}
		deleted += n
		from = next
	}
	tk.CommitRecord()
	if deleted != 2 { // a and early
		t.Fatalf("ExpireSome deleted %d, want 2", deleted)
	}
	tombs, stamped := 0, 0
	for _, c := range tk.Dirty() {
		if c.Store != 0 {
			continue
		}
		if c.Delete {
			tombs++
		} else if len(c.Value) == 8+len("vb2") {
			stamped++
		}
	}
	if tombs != 2 || stamped != 1 {
		t.Fatalf("dirty: %d tombstones (want 2), %d stamped values (want b's)", tombs, stamped)
	}
	if err := tk.Apply(map[int]int64{0: 5, 1: 5}); err != nil {
		t.Fatal(err)
	}

	// The stored value (as a restore writes it) keeps its stamp: a task
	// restored from it sees b expire at 1199.
	tk2 := restored(t, db, "q", 0, "s")
	if err := tk2.SetExpiry(0, Expiry{TTL: 100}); err != nil {
		t.Fatal(err)
	}
	raw, _, err := tk.get(tk.stores[0], []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tk2.ApplyRestored(0, []Change{{Store: 0, Key: []byte("b"), Value: raw}}, 10); err != nil {
		t.Fatal(err)
	}
	tk2.SetClocks(1198, 0)
	if _, ok := mustGet(t, tk2, 0, "b"); !ok {
		t.Fatal("restored b expired early")
	}
	tk2.SetClocks(1199, 0)
	if _, ok := mustGet(t, tk2, 0, "b"); ok {
		t.Fatal("restored b came back to life: its stamp was lost")
	}

	// A wall-clock expiry measures against the wall clock only.
	tk3 := restored(t, db, "w", 0, "s")
	if err := tk3.SetExpiry(0, Expiry{TTL: 50, Wall: true}); err != nil {
		t.Fatal(err)
	}
	tk3.SetClocks(5, 1000)
	put(t, tk3, 0, "k", "v")
	tk3.SetClocks(1_000_000, 1049)
	if _, ok := mustGet(t, tk3, 0, "k"); !ok {
		t.Fatal("wall-clock entry expired by the stream time")
	}
	tk3.SetClocks(0, 1050)
	if _, ok := mustGet(t, tk3, 0, "k"); ok {
		t.Fatal("wall-clock entry alive at stamp+TTL")
	}

	// A value without a stamp (the store held data before it got a TTL)
	// is an error that says so, not a misread.
	tk4 := restored(t, db, "old", 0, "s")
	put(t, tk4, 0, "k", "v")
	tk4.CommitRecord()
	if err := tk4.SetExpiry(0, Expiry{TTL: 10}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tk4.Get(0, []byte("k")); err == nil || !strings.Contains(err.Error(), "no expiry stamp") {
		t.Fatalf("unstamped value: %v", err)
	}
}

func put(t *testing.T, tk *Task, store int, k, v string) {
	t.Helper()
	if err := tk.Put(store, []byte(k), []byte(v)); err != nil {
		t.Fatal(err)
	}
}

func scanKeys(t *testing.T, tk *Task, store int) string {
	t.Helper()
	it, err := tk.Scan(store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var keys []string
	for {
		k, _, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return strings.Join(keys, ",")
		}
		keys = append(keys, string(k))
	}
}
