package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// committer ends commit windows: one implementation per guarantee
// (atLeastOnce in alo.go, exactlyOnce in eos.go). Every method but
// deferCallback runs under r.mu, on the loop or in a group callback.
type committer interface {
	// openNow makes sure work done now joins the next commit point
	// (exactly_once opens a transaction if none is): before records are
	// processed, and before a commit point's timer and commit calls.
	openNow() error
	// commit is a commit point: every task's window is committed, or
	// dropped and rewound. r.broken is nil when it is called.
	commit(ctx context.Context) error
	// open reports whether processed work waits in an open transaction:
	// swaps wait for it, shutdown commits it.
	open() bool
	// wantsCommit reports, once, that a commit point should come now
	// though none is due (a rebalance waits for this member).
	wantsCommit() bool
	// beforeRevoke ends the work of partitions about to be revoked, before
	// their tasks close (I5).
	beforeRevoke(ctx context.Context)
	// deferCallback queues a group callback that must not take r.mu now,
	// and reports whether it did. Called without r.mu.
	deferCallback(kind callbackKind, parts map[string][]int32) bool
	// beforeLose is told that partitions are lost (exactly_once: the
	// session must be rearmed too).
	beforeLose()
	// rearm readies the group hooks for the next revoke or loss after one
	// ran (exactly_once: see exactlyOnce.rearm); the loop calls it before
	// each poll.
	rearm(ctx context.Context)
}

// commit is a commit point (see committer.commit); a broken runner commits
// nothing ever again.
func (r *Runner) commit(ctx context.Context) error {
	if r.broken != nil {
		return r.broken
	}
	// The timer check and commit calls come first, inside the window
	// (ABI.md section 8.3): their emits, state and timer changes commit
	// with it.
	if err := r.timePoint(ctx); err != nil {
		r.broken = err
		return err
	}
	return r.committer.commit(ctx)
}

// commitPoint runs a commit point after a poll's records if one is due or a
// rebalance waits (it is let in with no open transaction, so it does not
// abort processed work), then lets waiting swaps in.
func (r *Runner) commitPoint(ctx context.Context) error {
	if !r.commitDue() && !r.committer.wantsCommit() {
		return nil
	}
	// A stop (ctx canceled) must not cut a commit point in half: it gets
	// its own bounded context.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	start := time.Now()
	err := r.commit(cctx)
	r.commits.add(time.Since(start))
	if err != nil {
		return err
	}
	r.advanceSwaps(cctx)
	return nil
}

// commitDeadline is when the current commit window's commit point is due:
// a commit interval after the last commit point, or from now when no
// processed record waits (an idle window opens with its first record).
func (r *Runner) commitDeadline() time.Time {
	if r.sinceCommit == 0 {
		return time.Now().Add(r.opts.CommitInterval)
	}
	return r.lastCommit.Add(r.opts.CommitInterval)
}

func (r *Runner) commitDue() bool {
	if r.sinceCommit == 0 {
		// No record waits; timers may (checked at most once a commit
		// interval, like a window with records).
		return time.Since(r.lastCommit) >= r.opts.CommitInterval && r.timeDue()
	}
	return r.sinceCommit >= r.opts.CommitRecords || time.Since(r.lastCommit) >= r.opts.CommitInterval
}

// commitOffsets is, for every input partition whose window moved since the
// last commit point, the offset to commit: its cursor's (window.go), the
// one source of committed offsets under both guarantees (I1). A partition
// whose records are held but not processed is not in it.
func (r *Runner) commitOffsets() map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range r.tasks {
		for i, topic := range t.topics {
			off, ok := t.win.in(i).commitOffset()
			if !ok {
				continue
			}
			if offsets[topic] == nil {
				offsets[topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[topic][t.id.Partition] = off
		}
	}
	return offsets
}

// windowsClosed restarts the commit schedule: no processed record waits.
func (r *Runner) windowsClosed() {
	r.sinceCommit = 0
	r.lastCommit = time.Now()
}

// timeCommitted tells every task's time that the commit point committed
// (an abort resets it instead).
func (r *Runner) timeCommitted() {
	for _, t := range r.tasks {
		t.tk.committed()
	}
}

// rewind makes the consumer fetch the task's i-th input partition again
// from offset, and (under exactly_once) makes that the offset the next
// transaction commits. Only the poll loop calls it, before AllowRebalance.
func (r *Runner) rewind(t *task, i int, offset int64) {
	r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		t.topics[i]: {t.id.Partition: {Epoch: -1, Offset: offset}},
	})
}

func (r *Runner) produce(rec *kgo.Record) {
	r.cl.Produce(context.Background(), rec, r.onProduced)
}

// onProduced keeps the first produce failure since the last commit point;
// the commit point then commits nothing past it (I1).
func (r *Runner) onProduced(rec *kgo.Record, err error) {
	if err != nil {
		werr := fmt.Errorf("topic %s: %w", rec.Topic, err)
		r.produceErr.CompareAndSwap(nil, &werr)
	}
}
