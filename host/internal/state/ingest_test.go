package state

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIngestThenProcess: restored data that was ingested is read like any
// other (Get, Scan, the cache), is shadowed by commit windows applied after
// it and shadows those applied before it, whatever moves the LSM makes
// afterwards (flush, compaction, reopening), and a wipe removes it with its
// checkpoint.
func TestIngestThenProcess(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{FS: fs, IngestRestoredBytes: 1}
	db := openMem(t, opts)
	ingests := func() uint64 { return db.pdb.Metrics().Ingest.Count }
	tk := db.Task("p", 0, []string{"s"})
	restore := func(cp int64, recs ...Change) {
		t.Helper()
		before := ingests()
		if err := tk.ApplyRestored(0, recs, cp); err != nil {
			t.Fatal(err)
		}
		if ingests() != before+1 {
			t.Fatal("ApplyRestored did not ingest")
		}
	}
	set := func(k, v string) Change { return Change{Key: []byte(k), Value: []byte(v)} }
	window := func(cp int64, kvs ...string) {
		t.Helper()
		for i := 0; i < len(kvs); i += 2 {
			mustPut(t, tk, 0, kvs[i], kvs[i+1])
		}
		tk.CommitRecord()
		if err := tk.Apply(map[int]int64{0: cp}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want ...kv) {
		t.Helper()
		if got := scanAll(t, tk, 0, "", ""); !slices.Equal(got, want) {
			t.Fatalf("%s: store = %q, want %q", what, got, want)
		}
		for _, e := range want {
			if v, ok := mustGet(t, tk, 0, e.k); !ok || v != e.v {
				t.Fatalf("%s: Get(%q) = %q %v, want %q", what, e.k, v, ok, e.v)
			}
		}
	}

	restore(3, set("a", "r1"), set("b", "r1"), Change{Key: []byte("c"), Delete: true})
	check("restored", kv{"a", "r1"}, kv{"b", "r1"})

	// Processing after the restore: its writes win, read through the
	// overlay, the pending set, then Pebble.
	mustPut(t, tk, 0, "a", "p1")
	if v, _ := mustGet(t, tk, 0, "a"); v != "p1" {
		t.Fatalf("overlay read %q", v)
	}
	tk.CommitRecord()
	if got := scanAll(t, tk, 0, "", ""); !slices.Equal(got, []kv{{"a", "p1"}, {"b", "r1"}}) {
		t.Fatalf("pending scan %q", got)
	}
	if err := tk.ApplyRestored(0, []Change{set("x", "y")}, 4); err == nil {
		t.Fatal("ApplyRestored with pending writes accepted")
	}
	if err := tk.Apply(map[int]int64{0: 4}); err != nil {
		t.Fatal(err)
	}
	window(5, "c", "p2")
	check("processed", kv{"a", "p1"}, kv{"b", "r1"}, kv{"c", "p2"})

	// A new assignment restores the changelog's tail: the ingest lands on
	// top of the windows still in the memtable.
	tk = db.Task("p", 0, []string{"s"})
	restore(7, set("b", "r2"), set("c", "r2"), set("c", "r3"))
	check("restored over processed", kv{"a", "p1"}, kv{"b", "r2"}, kv{"c", "r3"})
	window(8, "b", "p3")
	check("processed over restored", kv{"a", "p1"}, kv{"b", "p3"}, kv{"c", "r3"})

	if err := db.pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Compact(t.Context(), tk.prefix, tk.end, true); err != nil {
		t.Fatal(err)
	}
	check("after a flush and a compaction", kv{"a", "p1"}, kv{"b", "p3"}, kv{"c", "r3"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, opts)
	tk = db.Task("p", 0, []string{"s"})
	check("reopened", kv{"a", "p1"}, kv{"b", "p3"}, kv{"c", "r3"})
	wantCheckpoint(t, tk, 0, 8, true)

	restore(9, set("d", "r4"))
	if err := tk.Wipe(); err != nil {
		t.Fatal(err)
	}
	check("wiped")
	wantCheckpoint(t, tk, 0, 0, false)
	restore(10, set("e", "r5")) // ingested over the wipe's range deletion
	check("restored after the wipe", kv{"e", "r5"})
	wantCheckpoint(t, tk, 0, 10, true)
}

// TestIngestDirectory: ingestion leaves no file behind, and Open removes
// tables a crash left before their ingest.
func TestIngestDirectory(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{FS: fs, IngestRestoredBytes: 1}
	db := openMem(t, opts)
	tk := db.Task("p", 0, []string{"s"})
	for i := range 3 {
		if err := tk.ApplyRestored(0, []Change{{Key: []byte{byte(i)}, Value: []byte("v")}}, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	dir := fs.PathJoin("db", ingestDirName)
	if names, err := fs.List(dir); err != nil || len(names) != 0 {
		t.Fatalf("%s after ingests: %q, %v", dir, names, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(fs.PathJoin(dir, "7.sst"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	db = openMem(t, opts)
	if names, err := fs.List(dir); err != nil || len(names) != 0 {
		t.Fatalf("%s after Open: %q, %v", dir, names, err)
	}
	wantCheckpoint(t, db.Task("p", 0, []string{"s"}), 0, 3, true)
}

// TestIngestLeavesOthersInMemtable: an ingest that overlaps a memtable
// costs a flush of it (Pebble waits for it, or queues the ingest behind it
// and rotates the memtable). The tables of a restored batch hold only that
// store's data keys and its checkpoint key, so another task's writes, and
// the task's other stores' writes, still in the memtable never overlap
// them: with the checkpoint inside the data table its range would span
// the checkpoints of the stores named after it and the data of those named
// before it.
func TestIngestLeavesOthersInMemtable(t *testing.T) {
	db := openMem(t, Options{IngestRestoredBytes: 1})
	q := restored(t, db, "q", 0, "s")
	p := restored(t, db, "p", 0, "a", "b", "c")
	if err := db.pdb.Flush(); err != nil { // store b's checkpoint leaves the memtable
		t.Fatal(err)
	}
	for round := range 3 {
		mustPut(t, q, 0, "k", "v")
		q.CommitRecord()
		if err := q.Apply(map[int]int64{0: int64(round + 1)}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []int{0, 2} { // stores a and c: restored through batches
			recs := []Change{{Key: []byte("k"), Value: []byte("v")}}
			if err := p.ApplyRestored(s, recs[:0], int64(round+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.pdb.Set(p.stores[0].data, []byte("a's data"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.pdb.Set(append(append([]byte(nil), p.stores[2].data...), 0xff), []byte("c's data"), nil); err != nil {
			t.Fatal(err)
		}
		before := db.pdb.Metrics()
		recs := []Change{{Key: []byte{}, Value: []byte("x")}, {Key: []byte{0xff, 0xff}, Value: []byte("y")}}
		if err := p.ApplyRestored(1, recs, int64(round+1)); err != nil {
			t.Fatal(err)
		}
		if db.pdb.Metrics().Ingest.Count != before.Ingest.Count+1 {
			t.Fatal("store b's batch was not ingested")
		}
		// One flush now takes the memtable with the other writes. Had the
		// ingest overlapped it, Pebble would have queued the ingest behind
		// it (flushed "as ingest") or flushed it already.
		if err := db.pdb.Flush(); err != nil {
			t.Fatal(err)
		}
		after := db.pdb.Metrics()
		if after.Flush.Count != before.Flush.Count+1 || after.Flush.AsIngestCount != before.Flush.AsIngestCount {
			t.Fatalf("round %d: ingesting store b's batch overlapped the memtable (flushes %d -> %d, as ingest %d -> %d)",
				round, before.Flush.Count, after.Flush.Count, before.Flush.AsIngestCount, after.Flush.AsIngestCount)
		}
	}
}
