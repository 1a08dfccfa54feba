package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// dirSnapshot records every file's name, size and modification time
// (only the size for LOCK).
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "LOCK" {
			// Locking opens the (empty) LOCK file with O_TRUNC: its mtime
			// moves, nothing else may.
			out[e.Name()] = fmt.Sprint(fi.Size())
			continue
		}
		out[e.Name()] = fmt.Sprintf("%d %s", fi.Size(), fi.ModTime())
	}
	return out
}

func TestReaderListsAndScansWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Store names where one is a prefix of the other, processors likewise,
	// and a task whose second store has a checkpoint but no data.
	put := func(proc string, part int32, stores []string, store int, next int64, kv ...string) {
		t.Helper()
		task := db.Task(proc, part, stores)
		var recs []Change
		for i := 0; i < len(kv); i += 2 {
			recs = append(recs, Change{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		if err := task.ApplyRestored(store, recs, next); err != nil {
			t.Fatal(err)
		}
	}
	put("wc", 0, []string{"c", "counts"}, 1, 7, "the", "\x00\x00\x00\x00\x00\x00\x00\x03", "fox", "\x01")
	put("wc", 0, []string{"c", "counts"}, 0, 2)
	put("wc", 2, []string{"c", "counts"}, 1, 4, "dog", "2")
	put("wcx", 0, []string{"counts"}, 0, 1, "a", "b")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirSnapshot(t, dir)

	r, err := OpenReadOnly(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	stores, err := r.Stores()
	if err != nil {
		t.Fatal(err)
	}
	want := []StoreInfo{
		{Processor: "wc", Partition: 0, Store: "c", Checkpoint: 2, HasCheckpoint: true},
		{Processor: "wc", Partition: 0, Store: "counts", Checkpoint: 7, HasCheckpoint: true, HasData: true},
		{Processor: "wc", Partition: 2, Store: "counts", Checkpoint: 4, HasCheckpoint: true, HasData: true},
		{Processor: "wcx", Partition: 0, Store: "counts", Checkpoint: 1, HasCheckpoint: true, HasData: true},
	}
	if !reflect.DeepEqual(stores, want) {
		t.Fatalf("Stores:\n got %+v\nwant %+v", stores, want)
	}
	var got []string
	err = r.Scan("wc", 0, "counts", func(k, v []byte) error {
		got = append(got, fmt.Sprintf("%s=%x", k, v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"fox=01", "the=0000000000000003"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan wc/0 counts = %q, want %q", got, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := r.Scan("wc", 0, "counts", func(k, v []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Scan stopped by its callback: err %v after %d calls", err, n)
	}
	if err := r.Scan("wc", 9, "counts", func(k, v []byte) error { return errors.New("called") }); err != nil {
		t.Fatalf("Scan of an absent task: %v", err)
	}

	// While the reader is open, nobody can open the directory for writing.
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while a Reader is open: %v, want ErrLocked", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if after := dirSnapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("the read-only open changed the directory:\nbefore %v\nafter  %v", before, after)
	}
}

func TestReaderRefusals(t *testing.T) {
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "nope"), nil); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("missing dir: %v, want ErrNoDatabase", err)
	}
	notDB := t.TempDir()
	if err := os.WriteFile(filepath.Join(notDB, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(notDB, nil); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("a directory without a database: %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Join(notDB, "LOCK")); !os.IsNotExist(err) {
		t.Fatalf("OpenReadOnly left a LOCK file in a directory that is not a database (stat: %v)", err)
	}

	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenReadOnly(dir, nil)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenReadOnly of an open DB: %v, want ErrLocked", err)
	}
	db.Close()
	r, err := OpenReadOnly(dir, nil)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if s, err := r.Stores(); err != nil || len(s) != 0 {
		t.Fatalf("empty DB: Stores = %v, %v", s, err)
	}
	r.Close()
}

func TestDecodeKeyRoundTrip(t *testing.T) {
	for _, proc := range []string{"p", "wordcount", string(make([]byte, 200))} {
		for _, part := range []int32{0, 7, 1 << 30} {
			for _, store := range []string{"s", "counts"} {
				for _, kind := range []byte{kindCheckpoint, kindData} {
					k := storePrefix(taskPrefix(proc, part), kind, store)
					if kind == kindData {
						k = append(k, "user\x00key"...)
					}
					d, ok := decodeKey(k)
					if !ok || d.processor != proc || d.partition != part || d.store != store || d.kind != kind {
						t.Fatalf("decodeKey(%x) = %+v, %v", k, d, ok)
					}
				}
			}
		}
	}
	for _, bad := range [][]byte{nil, {taskNamespace}, {taskNamespace, 5, 'a'}, append(taskPrefix("p", 0), 9, 1, 's')} {
		if _, ok := decodeKey(bad); ok {
			t.Errorf("decodeKey(%x) accepted a malformed key", bad)
		}
	}
}

// TestScanCommitted: a live database's committed entries of one store,
// every task of one processor, by partition and key; staged writes, other
// stores and other processors (one whose name the first's extends) are
// not in it; a store with an expiry yields its stamped values, which
// Expiry.Live splits.
func TestScanCommitted(t *testing.T) {
	db := openMem(t, Options{})
	t1 := restored(t, db, "wc", 1, "counts", "other")
	t0 := restored(t, db, "wc", 0, "counts", "other")
	tx := restored(t, db, "wcx", 0, "counts")
	if err := t0.SetExpiry(0, Expiry{TTL: 100}); err != nil {
		t.Fatal(err)
	}
	t0.SetClocks(1000, 0)
	put(t, t0, 0, "b", "2")
	put(t, t0, 0, "a", "1")
	put(t, t0, 1, "a", "other store")
	t0.CommitRecord()
	put(t, t1, 0, "c", "3")
	t1.CommitRecord()
	put(t, tx, 0, "x", "other processor")
	tx.CommitRecord()
	for tk, cps := range map[*Task]map[int]int64{t0: {0: 2, 1: 1}, t1: {0: 1}, tx: {0: 1}} {
		if err := tk.Apply(cps); err != nil {
			t.Fatal(err)
		}
	}
	put(t, t1, 0, "d", "staged")
	t1.CommitRecord()
	var got []string
	err := db.ScanCommitted("wc", "counts", func(p int32, k, v []byte) error {
		if p == 0 {
			live, expired, ok := (Expiry{TTL: 100}).Live(v, 1050)
			if !ok || expired {
				t.Errorf("%s: stamped value %x: live %v, expired %v", k, v, ok, expired)
			}
			v = live
		}
		got = append(got, fmt.Sprintf("%d/%s=%s", p, k, v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0/a=1", "0/b=2", "1/c=3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ScanCommitted: %q, want %q", got, want)
	}
	if _, expired, _ := (Expiry{TTL: 100}).Live([]byte("\x00\x00\x00\x00\x00\x00\x03\xe8v"), 1100); !expired {
		t.Error("a value stamped 1000 with a TTL of 100 is alive at 1100")
	}
}
