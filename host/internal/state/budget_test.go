package state

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A task's disk budget (limits.state_disk): distinct keys of random values
// fill it (the budget is on disk: zeros would compress away), and the
// write past it is refused with a *DiskBudgetError naming the task, the
// store and the figures (ErrDiskBudget). A refused or aborted record's
// bytes are not kept against the task; deletes and the host's own writes
// (PutHost) are always taken; once deleted keys are compacted away the
// next window's estimate lets writes in again, and so after a wipe.
func TestDiskBudget(t *testing.T) {
	db, err := Open("db", Options{FS: vfs.NewMem(), MemTableBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tk := restored(t, db, "proc", 1, "counts", "_time")
	tk.SetName("proc/in/1")
	const budget = 1 << 20
	tk.SetDiskBudget(budget)
	val := make([]byte, 10<<10)
	cp := int64(0)
	apply := func() {
		t.Helper()
		cp++
		if err := tk.Apply(map[int]int64{0: cp, 1: cp}); err != nil {
			t.Fatal(err)
		}
	}

	// fill puts distinct keys from key i on, a window of 8 records each,
	// until a put is refused; it returns the next key and the refusal.
	fill := func(i int) (int, error) {
		for ; ; i++ {
			_, _ = rand.Read(val) // incompressible: the budget is on disk
			err := tk.Put(0, fmt.Appendf(nil, "k%05d", i), val)
			if err != nil {
				tk.AbortRecord()
				apply()
				return i, err
			}
			tk.CommitRecord()
			if i%8 == 7 {
				apply()
			}
		}
	}
	n, err := fill(0)
	var be *DiskBudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrDiskBudget) {
		t.Fatalf("after %d puts of 10 KiB: %v, want a *DiskBudgetError", n, err)
	}
	if be.Task != "proc/in/1" || be.Store != "counts" || be.Budget != budget || be.Used+int64(be.Size) <= budget {
		t.Fatalf("refusal %+v", be)
	}
	if n < 50 || n > 110 {
		t.Fatalf("%d puts of 10 KiB before a 1 MiB budget refused one", n)
	}
	t.Logf("refused after %d puts: %v", n, err)

	// Still full: another put is refused, while a delete and the host's
	// own write are taken.
	if err := tk.Put(0, []byte("more"), val); !errors.Is(err, ErrDiskBudget) {
		t.Fatalf("a put when full: %v", err)
	}
	if err := tk.PutHost(1, []byte("stream"), []byte("12345678")); err != nil {
		t.Fatalf("the host's own write when full: %v", err)
	}
	for i := range n {
		if err := tk.Delete(0, fmt.Appendf(nil, "k%05d", i)); err != nil {
			t.Fatalf("a delete when full: %v", err)
		}
	}
	tk.CommitRecord()
	apply()
	// The deleted keys are gone from the disk once compacted: the next
	// estimate says so.
	if err := db.pdb.Compact(context.Background(), tk.prefix, tk.end, false); err != nil {
		t.Fatal(err)
	}
	m, err := fill(n)
	if !errors.Is(err, ErrDiskBudget) || m-n < 50 {
		t.Fatalf("after deleting and compacting, %d more puts then %v", m-n, err)
	}

	// A wipe (a range delete) starts the account over, and frees the
	// budget once compacted.
	if err := tk.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Compact(context.Background(), tk.prefix, tk.end, false); err != nil {
		t.Fatal(err)
	}
	tk = restored(t, db, "proc", 1, "counts", "_time")
	tk.SetDiskBudget(budget)
	cp = 0
	if k, err := fill(0); !errors.Is(err, ErrDiskBudget) || k < 50 {
		t.Fatalf("after a wipe: %d puts then %v", k, err)
	}
}
