package state

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// TestIntervalSyncMakesCommitsDurable: commits applied without fsync are
// in a crash image (only synced data survives) once the interval syncer
// has run, and not before; with the syncer off they are lost. A crash
// image keeps nothing unsynced (UnsyncedDataPercent 0), which is what a
// power loss leaves and more than a SIGKILL takes (see
// internal/chaos TestRestartAfterSIGKILLReadsOnlyTheTail).
func TestIntervalSyncMakesCommitsDurable(t *testing.T) {
	for _, interval := range []time.Duration{20 * time.Millisecond, -1} {
		fs := vfs.NewCrashableMem()
		db, err := Open("db", Options{FS: fs, SyncInterval: interval})
		if err != nil {
			t.Fatal(err)
		}
		tk := restored(t, db, "p", 0, "s")
		for w := int64(1); w <= 5; w++ {
			mustPut(t, tk, 0, "n", "v")
			tk.CommitRecord()
			if err := tk.Apply(map[int]int64{0: w}); err != nil {
				t.Fatal(err)
			}
		}
		if interval > 0 {
			testutil.Eventually(t, 10*time.Second, func() error {
				if db.syncs.Load() == 0 {
					return errors.New("the interval syncer did not sync")
				}
				return nil
			})
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		img := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db2, err := Open("db", Options{FS: img})
		if err != nil {
			t.Fatal(err)
		}
		cp, ok, err := db2.Task("p", 0, []string{"s"}).Checkpoint(0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case interval > 0 && (!ok || cp != 5):
			t.Errorf("sync_interval %v: crash image has checkpoint %d (found %v), want 5", interval, cp, ok)
		case interval < 0 && ok && cp == 5:
			t.Errorf("syncer off: the crash image kept the unsynced commits; the test cannot tell the syncer's effect")
		}
		db2.Close()
	}
}
