package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// slowInitIterations is how long slowinit's init spins: about a second on
// the machines the tests run on (measured by each test, which asserts only
// ratios against it).
const slowInitIterations = 1 << 28

// processAfterTraps alternates a trapping record and a good one n times
// and returns the slowest good record: each runs on a replacement of the
// instance its trap discarded. Each good record must find what init left
// and count itself as the instance's first record.
func processAfterTraps(t *testing.T, i *Instance, sink *sinkCapture, n int) time.Duration {
	t.Helper()
	var worst time.Duration
	for k := range n {
		if err := i.Process(bg, rec("boom", "")); !IsTrap(err) {
			t.Fatalf("trap %d: %v", k, err)
		}
		start := time.Now()
		err := i.Process(bg, rec("ok__", ""))
		worst = max(worst, time.Since(start))
		if err != nil {
			t.Fatalf("record %d after a trap: %v", k, err)
		}
		if got := sink.take(); len(got) != 1 || got[0].rec.Partition != 1 {
			t.Fatalf("record %d after a trap reported %+v, want partition 1 (a fresh instance with init's memory and globals)", k, got)
		}
	}
	return worst
}

// After a trap the next record does not wait for a new instance's init
// (RATIONALE.md, "A trapped instance is replaced from a snapshot"): the replacement is restored from the snapshot of the
// first instance's init. With an init of about a second and every other
// record trapping, a record after a trap takes a small fraction of the
// init; the same instance without its snapshot (the fallback for a module
// that writes its tables) runs init on the record path, as before.
func TestReplacementSkipsInit(t *testing.T) {
	r, logs := newRuntime(t, Options{InitTimeout: time.Minute})
	m := compileFile(t, r, "slowinit")
	if m.snapshotGlobals != 2 {
		t.Fatalf("snapshotGlobals = %d, want slowinit's 2 mutable globals", m.snapshotGlobals)
	}
	cfg := binary.LittleEndian.AppendUint64(nil, slowInitIterations)
	start := time.Now()
	i, sink := instantiate(t, m, Binding{Outputs: []string{"o"}, Config: cfg})
	initTook := time.Since(start)
	if i.snap == nil || m.SnapshotBytes() != PageSize {
		t.Fatalf("no snapshot after the start (%d bytes held)", m.SnapshotBytes())
	}
	worst := processAfterTraps(t, i, sink, 5)
	if worst*20 > initTook {
		t.Errorf("a record after a trap took %v, over 1/20 of the init's %v: it waited for an init", worst, initTook)
	}
	// Baseline: the replacement runs init again.
	m.dropSnapshot(i.snap)
	i.snap = nil
	reinit := processAfterTraps(t, i, sink, 1)
	t.Logf("init %v; the slowest record after a trap: %v restored from the snapshot (%.4f of the init), %v with init run again (%.2f)",
		initTook, worst, float64(worst)/float64(initTook), reinit, float64(reinit)/float64(initTook))
	if reinit*5 < initTook {
		t.Errorf("the baseline record after a trap took %v, under a fifth of the init's %v: does init run at all?", reinit, initTook)
	}
	if len(logs.find("restoring")) != 0 {
		t.Errorf("a restore failed: %v", logs.find("restoring"))
	}
}

// Instances whose inits leave the same state share one snapshot, released
// with the last of them.
func TestSnapshotsShared(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "slowinit")
	var insts []*Instance
	for range 3 {
		i, _ := instantiate(t, m, Binding{Outputs: []string{"o"}})
		insts = append(insts, i)
	}
	other, _ := instantiate(t, m, Binding{Outputs: []string{"o"}, Config: binary.LittleEndian.AppendUint64(nil, 7)})
	if got := m.SnapshotBytes(); got != 2*PageSize || r.Counts().SnapshotBytes != got {
		t.Fatalf("%d bytes of snapshots (the runtime counts %d), want two (three equal inits and another config)", got, r.Counts().SnapshotBytes)
	}
	for _, i := range insts {
		_ = i.Close(bg)
	}
	_ = other.Close(bg)
	if got := m.SnapshotBytes(); got != 0 || r.Counts().SnapshotBytes != 0 {
		t.Fatalf("%d bytes of snapshots after every instance closed (the runtime counts %d)", got, r.Counts().SnapshotBytes)
	}
	if len(m.snaps) != 0 {
		t.Fatalf("%d snapshots kept", len(m.snaps))
	}
}

// A start stops when its context ends (a host that stops does not wait for
// an init): an init of about a second is interrupted within a small part
// of it, with an error matching ErrClosed.
func TestStartStopsWithItsContext(t *testing.T) {
	r, _ := newRuntime(t, Options{InitTimeout: time.Minute})
	m := compileFile(t, r, "slowinit")
	cfg := binary.LittleEndian.AppendUint64(nil, slowInitIterations)
	start := time.Now()
	i, _ := instantiate(t, m, Binding{Outputs: []string{"o"}, Config: cfg})
	initTook := time.Since(start)
	_ = i.Close(bg)

	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(initTook/20, cancel)
	start = time.Now()
	i, err := m.Instantiate(ctx, Binding{Outputs: []string{"o"}, Sink: &sinkCapture{}, Config: cfg})
	took := time.Since(start)
	if i != nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, %v; want no instance and ErrClosed", i, err)
	}
	t.Logf("init %v; a start canceled after %v returned after %v: %v", initTook, initTook/20, took, err)
	if took*4 > initTook {
		t.Errorf("the canceled start took %v, over a quarter of the init's %v", took, initTook)
	}
	// A context already done: no guest code runs.
	start = time.Now()
	if _, err := m.Instantiate(ctx, Binding{Outputs: []string{"o"}, Sink: &sinkCapture{}, Config: cfg}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a done context: %v", err)
	}
	if took := time.Since(start); took*4 > initTook {
		t.Errorf("a start with a done context took %v", took)
	}
}
