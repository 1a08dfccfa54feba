package runner

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A backlog on every partition keeps every task busy: a poll brings
// records for several tasks, which run in parallel (pollLimit). With polls
// capped at 1,000 records, a poll took one partition's buffered records
// and nearly every poll ran one task (1.04 partitions a poll on the word
// count; 1.17 here).
func TestPollsSpreadOverTasks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // slots for every task, on any machine
	const partitions, n = 4, 16000
	f := newFixture(t, true, partitions)
	f.produceInputs(t, 0, n)
	r := f.runner(t, &goPlugin{delay: 20 * time.Microsecond}, Fail)
	r.opts.CommitRecords = 1 << 30 // commit points by time only
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, f, n)
	polls, parts := r.pollStats.polls.Load(), r.pollStats.partitions.Load()
	if polls == 0 {
		t.Fatal("no poll brought records")
	}
	if avg := float64(parts) / float64(polls); avg < 2 {
		t.Fatalf("a poll brought records of %.2f partitions on average (%d polls), want at least 2 of %d", avg, polls, partitions)
	} else {
		t.Logf("%d polls, %.2f partitions a poll", polls, avg)
	}
}

// kafka.commit_records still bounds a window: a poll takes no more than
// the window has left before it, so a backlog far larger than a window is
// committed in windows of about that size, not in whole fetches. A window
// can pass commit_records by the records a task held after a cut (its
// records run before the next poll's), so the last window need not fill:
// the test waits for every record to be processed and lets the stop
// commit it, rather than waiting for a commit point at commit_records.
func TestPollsKeepWindowsWithinCommitRecords(t *testing.T) {
	const n, window = 4000, 100
	f := newFixture(t, true, 4)
	f.produceInputs(t, 0, n)
	r := f.runner(t, &goPlugin{}, Fail)
	r.opts.CommitRecords = window
	r.opts.CommitInterval = time.Hour // commit points by records only
	stop := start(t, r)
	st := r.Stats("upper")
	testutil.Eventually(t, 60*time.Second, func() error {
		if got := st.RecordsIn.Load(); got < n {
			return fmt.Errorf("%d of %d records processed", got, n)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.waitCommitted(t, f.endOffsets(t, f.in))
	checkOnce(t, f, n)
	// Windows of a whole fetch (up to all 4,000 records) would make a
	// handful of commit points; windows of about commit_records make
	// about n/window, each overshoot by at most what a cut left held.
	if commits := st.Commits.Load(); commits < n/window/2 {
		t.Fatalf("%d commit points for %d records at commit_records %d: windows grew past it", commits, n, window)
	} else {
		t.Logf("%d commit points", commits)
	}
}
