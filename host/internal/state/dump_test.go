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
