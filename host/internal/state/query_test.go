package state

import (
	"errors"
	"testing"
)

// Queries read what Apply committed, never what a window staged, with the
// checkpoint of the same snapshot; a store without a checkpoint is
// refused; a scan stops at its limit and at its byte bound.
func TestQueryReadsCommittedState(t *testing.T) {
	db := openMem(t, Options{})
	if _, _, _, err := db.QueryGet("p", 0, "s", []byte("a")); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("a store never restored: %v, want ErrNoCheckpoint", err)
	}
	tk := restored(t, db, "p", 0, "s")
	for _, k := range []string{"a", "b", "c"} {
		mustPut(t, tk, 0, k, "v-"+k)
	}
	tk.CommitRecord()
	if err := tk.Apply(map[int]int64{0: 7}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, tk, 0, "d", "staged") // a window not committed yet
	tk.CommitRecord()

	v, found, cp, err := db.QueryGet("p", 0, "s", []byte("b"))
	if err != nil || !found || string(v) != "v-b" || cp != 7 {
		t.Fatalf("QueryGet(b) = %q %v %d %v", v, found, cp, err)
	}
	if _, found, _, err := db.QueryGet("p", 0, "s", []byte("d")); err != nil || found {
		t.Fatalf("a staged key was read: found %v, %v", found, err)
	}
	if _, _, _, err := db.QueryGet("p", 1, "s", []byte("a")); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("another partition: %v, want ErrNoCheckpoint", err)
	}
	kvs, more, cp, err := db.QueryScan("p", 0, "s", nil, nil, 2, 1<<20)
	if err != nil || !more || len(kvs) != 2 || string(kvs[1].Key) != "b" || cp != 7 {
		t.Fatalf("QueryScan limit 2 = %v %v %d %v", kvs, more, cp, err)
	}
	kvs, more, _, err = db.QueryScan("p", 0, "s", []byte("b"), nil, 10, 1<<20)
	if err != nil || more || len(kvs) != 2 || string(kvs[0].Key) != "b" || string(kvs[1].Value) != "v-c" {
		t.Fatalf("QueryScan from b = %v %v %v", kvs, more, err)
	}
	kvs, more, _, err = db.QueryScan("p", 0, "s", nil, nil, 10, 1)
	if err != nil || !more || len(kvs) != 1 {
		t.Fatalf("QueryScan of 1 byte = %v %v %v, want one item and more", kvs, more, err)
	}
	kvs, _, _, err = db.QueryScan("p", 0, "s", []byte("a"), []byte("c"), 10, 1<<20)
	if err != nil || len(kvs) != 2 {
		t.Fatalf("QueryScan [a, c) = %v %v", kvs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.QueryGet("p", 0, "s", []byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed database: %v, want ErrClosed", err)
	}
}
