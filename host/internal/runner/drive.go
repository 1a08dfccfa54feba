package runner

import (
	"context"
	"errors"
)

// A test driver's hooks (host/testdriver): it runs a pipeline with a
// commit interval nobody reaches, so commit points come only when it asks
// (CommitNow), and it waits for the records it piped to be processed by
// reading where each task stands (Progress). Neither is on the record
// path: an ask is a slice append under the lock the loop holds anyway.

// ErrStopped: the runner stopped before the commit point asked for ran.
var ErrStopped = errors.New("runner: stopped")

// CommitNow asks the loop for a commit point at its next turn, whether one
// is due or not, and waits until it has run: its error is the commit
// point's (nil also when there was nothing to commit), ErrStopped when the
// runner stopped first, or ctx's.
func (r *Runner) CommitNow(ctx context.Context) error {
	done := make(chan error, 1)
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return ErrStopped
	}
	r.cp.asks = append(r.cp.asks, done)
	r.mu.Unlock()
	r.wakeLoop() // a poll waiting for records ends now
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InputProgress is where one task stands on one of its input partitions.
type InputProgress struct {
	Task      TaskID
	Topic     string
	Partition int32
	// Fetched is the offset after the latest record fetched since the
	// task started or its window was last aborted (-1: none).
	Fetched int64
	// Holding: fetched records wait to be processed.
	Holding bool
	// Restoring: the task is restoring its stores and processes nothing.
	Restoring bool
	// Stopped is why the task stopped (on_error: fail); nil while it runs.
	Stopped error
}

// Reached reports whether the task has run every record of the partition
// below end, the offset after its last record (transaction markers are
// not records: a fetch skips them, so the partition's last stable offset
// may lie past every record the task can fetch).
func (p InputProgress) Reached(end int64) bool {
	return !p.Restoring && !p.Holding && p.Fetched >= end
}

// Progress returns where every task of the runner stands on each of its
// input partitions. It waits for the loop's current turn to end.
func (r *Runner) Progress() []InputProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []InputProgress
	for _, t := range r.tasks {
		for i, topic := range t.topics {
			c := t.win.in(i)
			out = append(out, InputProgress{Task: t.id, Topic: topic, Partition: t.id.Partition,
				Fetched: c.fetchEnd, Holding: len(c.held) > 0, Restoring: t.restoring != nil, Stopped: t.failed})
		}
	}
	return out
}

// Uncommitted reports whether the runner's commit window holds work its
// next commit point would commit. It waits for the loop's current turn
// to end.
func (r *Runner) Uncommitted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cp.holds()
}

// Buffered is how many records the runner produced that wait for the
// broker's answer.
func (r *Runner) Buffered() int64 { return r.cl.BufferedProduceRecords() }

// answerAsks tells every waiting CommitNow the commit point's outcome.
func (cp *commitPoint) answerAsks(asks []chan error, err error) {
	for _, a := range asks {
		a <- err
	}
}
