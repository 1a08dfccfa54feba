package runner

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats are one processor's counters. All fields are safe for concurrent
// use; they only grow.
type Stats struct {
	RecordsIn atomic.Int64 // records handed to the plugin
	// Fetched counts the records polls brought for the processor's tasks:
	// above RecordsIn by what was fetched again after aborts and rewinds
	// (records cut at a commit point wait in their task, not fetched again).
	Fetched      atomic.Int64
	RecordsOut   atomic.Int64 // records emitted by successful records
	Skipped      atomic.Int64 // failed records skipped (on_error: skip)
	DeadLettered atomic.Int64 // failed records sent to the dead-letter topic
	// Cuts counts the times a task's share of a poll was cut at the commit
	// deadline (or maxPollWork into the poll): its remaining records waited
	// in its window for the next poll (time isolation).
	Cuts atomic.Int64
	// Deferred counts the times a task holding records did not start in a
	// poll because the slots were taken until the commit deadline: its
	// records waited for the next poll, where it goes before the tasks of
	// its cost that ran (time isolation).
	Deferred atomic.Int64
	// TimePointsCut counts the commit points whose calls (timers, commit
	// marks) did not reach every task within their budget: the tasks left
	// go first at the next one.
	TimePointsCut atomic.Int64
	// InputWaits counts the times a task of several inputs gave up waiting
	// for an input that lagged (maxInputWait) and went on without it.
	InputWaits atomic.Int64
	// HeldBytes is a gauge: the bytes the host holds for the processor's
	// plugins in this process (staged emits and state writes, timers,
	// commit marks of open windows, carried marks), as its tasks'
	// accounts were granted them (host/internal/account: each task's
	// rounded up to 256 KiB).
	HeldBytes atomic.Int64
	// InstanceBytes is a gauge: the linear memory of the processor's
	// plugin instances in this process (its tasks' current instances,
	// and the ones made ahead for a switch or kept for a canary), as
	// charged to their accounts (host/internal/account, ChargeMemory):
	// within runtime.memory_budget with HeldBytes.
	InstanceBytes atomic.Int64
	// BudgetCommits counts the commit points brought forward because a
	// task of the processor held its window's budget of bytes
	// (limits.window_bytes) or more than its share of the process's
	// (runtime.memory_budget).
	BudgetCommits atomic.Int64
	FailedTasks   atomic.Int64 // tasks stopped by on_error: fail or a failed restore, ever
	StoppedTasks  atomic.Int64 // such tasks this process holds now (a gauge)
	Commits       atomic.Int64 // commit points that committed offsets
	Aborts        atomic.Int64 // transactions aborted (exactly_once): their work is redone
	// RefusalAborts counts windows aborted because the broker refused
	// records they produced (refusal.go), under either guarantee.
	RefusalAborts atomic.Int64
	Swaps         atomic.Int64 // tasks switched to a new plugin version
	SwapFailures  atomic.Int64 // tasks whose new version did not instantiate (they kept the old)
	Rollbacks     atomic.Int64 // automatic rollbacks of a version that failed its canary or its migration
	// Migrations counts the tasks whose state a new version migrated
	// (ABI.md section 13); MigrationFailures the migrations that failed.
	Migrations, MigrationFailures atomic.Int64
	// ShadowMatches, ShadowDifferences and ShadowFailures count the
	// records a shadow run compared (shadow.go): the candidate emitted
	// the same as the active version, something else, or failed.
	// ShadowStops counts the shadows that stopped themselves.
	ShadowMatches     atomic.Int64
	ShadowDifferences atomic.Int64
	ShadowFailures    atomic.Int64
	ShadowStops       atomic.Int64
	// SlowStarts counts plugin instances whose start (init) took over
	// half its budget (swap.go, startedSlowly).
	SlowStarts atomic.Int64

	// Time (ABI.md section 8). Failed callbacks count in Skipped,
	// DeadLettered and the failure kinds like records.
	TimerFirings  atomic.Int64 // wasmstream_on_timer calls
	CommitCalls   atomic.Int64 // wasmstream_on_commit calls
	TimersDropped atomic.Int64 // due timers of a version without wasmstream_on_timer
	MarksDropped  atomic.Int64 // marked keys of a version without wasmstream_on_commit
	Expired       atomic.Int64 // entries of stores with a TTL deleted because they expired

	// LatencyBuckets counts records by plugin time: bucket i holds records
	// that took less than LatencyBounds[i]; the last bucket the rest.
	LatencyBuckets [len(LatencyBounds) + 1]atomic.Int64
	LatencySumNs   atomic.Int64

	failures [numFailureKinds]atomic.Int64 // by failure kind
}

// LatencyBounds are the upper bounds of the processing latency buckets.
var LatencyBounds = [...]time.Duration{
	time.Microsecond, 5 * time.Microsecond, 25 * time.Microsecond, 100 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond,
	100 * time.Millisecond, time.Second,
}

func newStats() *Stats { return &Stats{} }

// NewStats returns zeroed counters, for Options.Stats.
func NewStats() *Stats { return newStats() }

// observeLatencyN counts n records that took d each (a batch's time
// averaged over its records).
func (s *Stats) observeLatencyN(d time.Duration, n int) {
	i := 0
	for i < len(LatencyBounds) && d >= LatencyBounds[i] {
		i++
	}
	s.LatencyBuckets[i].Add(int64(n))
	s.LatencySumNs.Add(int64(d) * int64(n))
}

func (s *Stats) failure(kind FailureKind) { s.failures[kind].Add(1) }

// Failures returns the failure counts by kind label (FailureKind.String),
// kinds that never happened left out.
func (s *Stats) Failures() map[string]int64 {
	out := map[string]int64{}
	for k := range s.failures {
		if n := s.failures[k].Load(); n > 0 {
			out[FailureKind(k).String()] = n
		}
	}
	return out
}

// commitSamples keeps the durations of the latest commit points (flush,
// offset commit or transaction end), for the metrics endpoint and the
// throughput benchmarks' latency distribution.
type commitSamples struct {
	mu    sync.Mutex
	ring  [4096]time.Duration
	n     int // samples ever recorded
	total time.Duration
	// buckets counts every sample by CommitBounds (bucket i: below
	// CommitBounds[i]; the last: the rest), for a histogram that can be
	// summed across processes, which the ring's quantiles cannot.
	buckets [len(CommitBounds) + 1]uint64
}

// CommitBounds are the upper bounds of the commit-duration histogram: a
// flush or offset commit on a local broker takes about a millisecond, a
// transaction end tens; seconds mean a struggling broker.
var CommitBounds = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

func (c *commitSamples) add(d time.Duration) {
	c.mu.Lock()
	c.ring[c.n%len(c.ring)] = d
	c.n++
	c.total += d
	i := 0
	for i < len(CommitBounds) && d >= CommitBounds[i] {
		i++
	}
	c.buckets[i]++
	c.mu.Unlock()
}

// histogram returns the bucket counts (per bucket, not cumulative) and the
// total duration of every sample ever recorded.
func (c *commitSamples) histogram() ([]uint64, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.buckets[:]...), c.total
}

// snapshot returns the retained samples (at most the latest 4096), the
// count ever recorded and their total duration.
func (c *commitSamples) snapshot() ([]time.Duration, int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(c.n, len(c.ring))
	out := make([]time.Duration, k)
	copy(out, c.ring[:k])
	return out, c.n, c.total
}
