package runner

import (
	"runtime"
	"testing"
	"time"
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
