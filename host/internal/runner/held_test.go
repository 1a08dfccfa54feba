package runner

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// Records a task holds (window.go): fetched, not processed yet, kept
// across a commit point instead of fetched again.

// A task slower than its commit interval is cut at every commit point; the
// records it did not reach wait in its window and are not fetched again:
// every record is polled once, processed once and comes out once.
func testCutsDoNotRefetch(t *testing.T, eos bool) {
	f := newFixture(t, eos, 2)
	const n = 3000
	f.produceInputs(t, 0, n)
	r := f.runner(t, &goPlugin{delay: 200 * time.Microsecond}, Fail)
	r.opts.CommitInterval = 20 * time.Millisecond // a poll of 1,000 records takes longer
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := r.Stats("upper")
	if s.Cuts.Load() == 0 {
		t.Fatal("no batch was cut at a commit point: the test proved nothing")
	}
	if got := s.Fetched.Load(); got != n {
		t.Fatalf("%d records fetched for %d inputs (%d cuts): records were fetched again", got, n, s.Cuts.Load())
	}
	checkOnce(t, f, n)
	t.Logf("%d cuts, %d commits, %d records fetched", s.Cuts.Load(), s.Commits.Load(), s.Fetched.Load())
}

// Aborted transactions drop what the windows held with the rest of their
// work: the consumer goes back to the committed offsets and the held
// records are fetched again, once, never processed twice in committed
// output. The aborts are injected as failed produces at commit points.
func TestHeldRecordsAcrossAborts(t *testing.T) {
	f := newFixture(t, true, 2)
	const n = 6000
	f.produceInputs(t, 0, n)
	p := &goPlugin{delay: 500 * time.Microsecond} // about 3 s of work
	r := f.runner(t, p, Fail)
	r.opts.CommitInterval = 20 * time.Millisecond
	stop := start(t, r)
	injected := errors.New("injected produce failure")
	// inject makes the next commit point abort, unless the k-th abort
	// happened: under the runner's lock, which every commit point holds,
	// so the failure never lands in the middle of one (a commit point
	// clears the window's failures once sealed, and one appearing after
	// a committed seal breaks the runner: no real produce fails there
	// under exactly_once).
	inject := func(k int) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if a := r.Stats("upper").Aborts.Load(); a <= int64(k) {
			r.cp.produceErr.CompareAndSwap(nil, &injected)
			return fmt.Errorf("%d aborts, want %d", a, k+1)
		}
		return nil
	}
	for k := range 3 {
		// Wait until a task has been cut at a commit point (it holds
		// records), then make the next commit point abort.
		cuts := r.Stats("upper").Cuts.Load()
		testutil.Eventually(t, 30*time.Second, func() error {
			if c := r.Stats("upper").Cuts.Load(); c <= cuts {
				return fmt.Errorf("%d cuts", c)
			}
			return nil
		})
		testutil.Eventually(t, 30*time.Second, func() error { return inject(k) })
	}
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, f, n)
	s := r.Stats("upper")
	t.Logf("%d cuts, %d aborts, %d records fetched, %d processed", s.Cuts.Load(), s.Aborts.Load(), s.Fetched.Load(), s.RecordsIn.Load())
}

// checkOnce requires every input to come out exactly once.
func checkOnce(t *testing.T, f *fixture, n int) {
	t.Helper()
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	seen := map[string]int{}
	for _, o := range out {
		seen[string(o.Value)]++
	}
	for i := 0; i < n; i++ {
		if c := seen["VALUE-"+strconv.Itoa(i)]; c != 1 {
			t.Fatalf("input %d came out %d times (%d outputs)", i, c, len(out))
		}
	}
}
