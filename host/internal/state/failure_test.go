package state

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/wasmstream/wasmstream/internal/diskfault"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// windows applies commit windows to tk until one fails or max have been
// applied: window w puts key "w<w>" (a value of size bytes, random, so
// that it does not compress) and moves store 0's checkpoint to w. It
// returns how many were applied and the error of the one that failed.
func windows(t *testing.T, tk *Task, from, max int, size int) (int, error) {
	t.Helper()
	val := make([]byte, size)
	for w := from; w < from+max; w++ {
		_, _ = rand.Read(val)
		if err := tk.Put(0, fmt.Appendf(nil, "w%d", w), val); err != nil {
			tk.Discard()
			return w - from, err
		}
		tk.CommitRecord()
		if err := tk.Apply(map[int]int64{0: int64(w)}); err != nil {
			tk.Discard()
			return w - from, err
		}
	}
	return max, nil
}

// consistent checks the invariant a failure must keep (I3): the store's
// checkpoint c says windows 1..c are in it, each whole, and none after.
func consistent(t *testing.T, tk *Task, upTo int) int64 {
	t.Helper()
	cp, ok, err := tk.Checkpoint(0)
	if err != nil || !ok {
		t.Fatalf("checkpoint: %d %v %v", cp, ok, err)
	}
	for w := 1; w <= upTo+1; w++ {
		_, found, err := tk.Get(0, fmt.Appendf(nil, "w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if found != (int64(w) <= cp) {
			t.Fatalf("window %d is in the store: %v, but the checkpoint is %d", w, found, cp)
		}
	}
	return cp
}

// A full disk: the write that finds no space fails with a *WriteError
// naming the task, its store, the directory and the cause; the database
// fails as a whole (counted once), refuses every later write without
// trying it, and after space is freed Recover reopens it on exactly the
// windows it had: the last one whole or not at all.
func TestFullDiskFailsTheDatabase(t *testing.T) {
	fs := diskfault.New(vfs.NewMem())
	const reserve = 16 << 20
	db, err := Open("db", Options{FS: fs, MemTableBytes: 1 << 20, WriteTimeout: 5 * time.Second, DiskReserveBytes: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tk := restored(t, db, "proc", 3, "counts")
	tk.SetName("proc/in/3")
	fs.SetQuota(fs.Used() + reserve + 8<<20)

	n, err := windows(t, tk, 1, 1000, 64<<10)
	if err == nil {
		t.Fatalf("1000 windows of 64 KiB fitted in an 8 MiB quota")
	}
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("window %d failed with %T %v, want a *WriteError", n+1, err, err)
	}
	t.Logf("after %d windows: %v", n, err)
	f := db.Failure()
	if f == nil || f.Cause != CauseNoSpace || !errors.Is(f, syscall.ENOSPC) {
		t.Fatalf("the database's failure is %v, want no space (ENOSPC)", f)
	}
	// The write that failed names its task and store (or, if the failure
	// was found first by Pebble's own work, says so), the directory and
	// the cause.
	for _, want := range []string{"db", "no space left on the device"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := db.Failures(); got[CauseNoSpace] != 1 || got[CauseIO]+got[CauseTimeout] != 0 {
		t.Errorf("failures by cause %v, want one no_space", got)
	}

	// Every later write is refused without touching the disk.
	err = tk.Put(0, []byte("late"), []byte("v"))
	if !errors.As(err, &we) || !we.Earlier || we.Cause != CauseNoSpace || !strings.Contains(err.Error(), `task proc/in/3 (store "counts")`) {
		t.Fatalf("a put after the failure: %v, want a refusal naming the task, its store and the earlier failure", err)
	}
	// Reopening needs the reserve free too: with 2 MiB free it fails again
	// (unless the reopen freed 14 MiB, which a 1 MiB memtable cannot).
	fs.SetQuota(fs.Used() + 2<<20)
	if err := db.Recover(context.Background()); err == nil {
		t.Fatal("Recover succeeded on a disk that is still full")
	} else {
		t.Logf("Recover on a full disk: %v", err)
	}
	if db.Failure() == nil {
		t.Fatal("a failed Recover cleared the failure")
	}

	fs.SetQuota(0)
	if err := db.Recover(context.Background()); err != nil {
		t.Fatalf("Recover after space was freed: %v", err)
	}
	if db.Failure() != nil {
		t.Fatal("Recover left the failure")
	}
	if _, _, err := tk.Get(0, []byte("w1")); !errors.Is(err, ErrClosed) {
		t.Fatalf("a handle from before Recover: %v, want ErrClosed", err)
	}
	tk = db.Task("proc", 3, []string{"counts"})
	cp := consistent(t, tk, n+1)
	if cp < int64(n) {
		// Every window Apply acknowledged was in Pebble's memtable and
		// write-ahead log; the log reached the disk up to where it failed.
		t.Logf("the reopened store holds %d of the %d acknowledged windows (the rest were in the log tail that did not reach the disk)", cp, n)
	}
	if got, err := windows(t, tk, int(cp)+1, 5, 64<<10); err != nil || got != 5 {
		t.Fatalf("writes after Recover: %d, %v", got, err)
	}
	if got := db.Failures(); got[CauseNoSpace] != 2 {
		t.Errorf("failures by cause after Recover %v, want two no_space (the write, and the reopen on a disk still full)", got)
	}
}

// A disk that stops answering: the write fails with CauseTimeout within
// the write timeout instead of waiting, so does every later one at once,
// Close returns at once (ErrStuck: the stuck write holds what Pebble's close
// needs), and once the disk answers again the directory can be opened
// again, consistent.
func TestStalledDiskTimesOut(t *testing.T) {
	fs := diskfault.New(vfs.NewMem())
	const timeout = 300 * time.Millisecond
	db, err := Open("db", Options{FS: fs, WriteTimeout: timeout, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	tk := restored(t, db, "proc", 0, "counts")
	if n, err := windows(t, tk, 1, 3, 100); err != nil || n != 3 {
		t.Fatalf("windows before the stall: %d %v", n, err)
	}

	fs.Stall()
	_, err = windows(t, tk, 4, 1, 100)
	var we *WriteError
	if !errors.As(err, &we) || we.Cause != CauseTimeout || !strings.Contains(err.Error(), "the disk did not answer in time") {
		t.Fatalf("a write on a stalled disk: %v, want a timeout", err)
	}
	if fs.Stalled() == 0 {
		t.Fatal("no write is stalled: the test did not stall the disk")
	}
	if _, err := windows(t, tk, 4, 1, 100); !errors.As(err, &we) || !we.Earlier {
		t.Fatalf("a write after the timeout: %v, want refused at once", err)
	}
	// Close returns (rather than waiting for the stuck write) and says so.
	if err := db.Close(); !errors.Is(err, ErrStuck) {
		t.Fatalf("Close with a write stuck: %v, want ErrStuck", err)
	}

	fs.Clear()
	var db2 *DB
	testutil.Eventually(t, 30*time.Second, func() error {
		// The stuck close finishes once the disk answers, then the lock goes.
		var err error
		if db2, err = Open("db", Options{FS: fs}); err != nil && !errors.Is(err, ErrLocked) {
			t.Fatalf("Open after the disk answered again: %v", err)
		}
		return err
	})
	defer db2.Close()
	consistent(t, db2.Task("proc", 0, []string{"counts"}), 4)
}

// A disk that fails writes with EIO (a bad sector, a lost network disk):
// the database fails (cause io) even though commits do not wait for the
// disk, and Recover after the disk is fixed reopens it consistent: every
// window synced before the fault is there, and of the later ones (written
// to the log but not synced: the changelog restores them) a prefix, each
// whole.
func TestFailingDiskFailsTheDatabase(t *testing.T) {
	fs := diskfault.New(vfs.NewMem())
	db, err := Open("db", Options{FS: fs, SyncInterval: 20 * time.Millisecond, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tk := restored(t, db, "proc", 0, "counts")
	if n, err := windows(t, tk, 1, 3, 100); err != nil || n != 3 {
		t.Fatalf("windows before the fault: %d %v", n, err)
	}
	synced := db.syncs.Load()
	testutil.Eventually(t, 30*time.Second, func() error {
		if db.syncs.Load() == synced {
			return errors.New("the three windows were not synced")
		}
		return nil
	})
	fs.Fail(syscall.EIO)
	applied := 3
	testutil.Eventually(t, 30*time.Second, func() error {
		if db.Failure() != nil {
			return nil
		}
		n, _ := windows(t, tk, applied+1, 1, 100)
		applied += n
		return errors.New("the database did not fail with the disk failing every write")
	})
	if f := db.Failure(); f.Cause != CauseIO || !errors.Is(f, syscall.EIO) {
		t.Fatalf("failure %v, want an I/O error (EIO)", f)
	}
	t.Logf("failed after %d windows: %v", applied, db.Failure())
	if _, err := windows(t, tk, applied+1, 1, 100); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("a write after the failure: %v", err)
	}
	if got := db.Failures(); got[CauseIO] != 1 {
		t.Errorf("failures by cause %v, want one io", got)
	}
	fs.Clear()
	if err := db.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp := consistent(t, db.Task("proc", 0, []string{"counts"}), applied+1)
	if cp < 3 {
		t.Errorf("the windows synced before the fault are gone: checkpoint %d", cp)
	}
}

// Pebble's fatal error on a goroutine of its own (a MANIFEST write that
// fails while a flush records its table: pebbleLogger.Fatalf) fails the
// database, with the disk's error, instead of the process: later writes
// are refused, and Close returns (ErrStuck when the goroutine that ended
// held what Pebble's close needs: only a new process reopens it).
func TestPebbleFatalFailsOnlyTheDatabase(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.Contains(op.Path, "MANIFEST") &&
			(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpCreate) {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	}))
	db, err := Open("db", Options{FS: fs, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tk := restored(t, db, "proc", 0, "counts")
	if n, err := windows(t, tk, 1, 3, 100); err != nil || n != 3 {
		t.Fatalf("windows before the fault: %d %v", n, err)
	}
	fail.Store(true)
	pdb := db.pdb
	_ = db.write("a flush", 0, func() error { return pdb.Flush() }) // fails or times out
	testutil.Eventually(t, 30*time.Second, func() error {
		if db.Failure() == nil {
			return errors.New("the database has not failed")
		}
		return nil
	})
	if f := db.Failure(); !errors.Is(f, syscall.EIO) || !strings.Contains(f.Error(), "MANIFEST") {
		t.Fatalf("failure %v, want the MANIFEST write's EIO", f)
	}
	if _, err := windows(t, tk, 4, 1, 100); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("a write after the fatal error: %v", err)
	}
	if err := db.Close(); err != nil && !errors.Is(err, ErrStuck) {
		t.Fatalf("Close: %v", err)
	}
}
