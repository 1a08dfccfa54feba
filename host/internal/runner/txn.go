package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxProduceAborts is how many transactions in a row may be aborted because
// a produce failed before the runner stops with the error: an output topic
// that vanished or a record the broker always refuses would otherwise be
// retried forever.
const maxProduceAborts = 5

// beginIfNeeded opens a transaction before a poll's records are processed
// (exactly_once only): every output, changelog record and dead letter is
// produced inside one.
func (r *Runner) beginIfNeeded(fetches kgo.Fetches) error {
	if r.sess == nil || r.inTxn || fetches.NumRecords() == 0 {
		return nil
	}
	if err := r.sess.Begin(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	r.inTxn = true
	return nil
}

// commitTxn is an exactly_once commit point. The changelog records of every
// task's changes join the open transaction; the session then commits the
// outputs, changelog records, dead letters and the input offsets of every
// processed record as one transaction. Only if it committed is each task's
// state batch applied to the local store with its checkpoint (I2, I3). If
// it aborted (a rebalance, a fenced or timed-out producer, a failed
// produce), the session has rewound the consumer to the committed offsets
// and every task drops its pending state: the work is done again, and none
// of the aborted outputs is visible to read_committed consumers.
func (r *Runner) commitTxn(ctx context.Context) error {
	defer r.runQueued(ctx)
	if !r.inTxn {
		r.sinceCommit = 0
		return nil
	}
	for _, t := range r.tasks {
		t.produceChangelog()
	}
	try := kgo.TryCommit
	failedCanaries := r.failedCanaries()
	if len(failedCanaries) > 0 {
		// A swapped version failed its canary: nothing it produced since
		// the last commit point may be committed.
		try = kgo.TryAbort
	}
	var perr error
	if p := r.produceErr.Swap(nil); p != nil {
		perr = *p
		try = kgo.TryAbort
	}
	if try == kgo.TryCommit && perr == nil {
		// Flush here so a produce that fails during the flush still turns
		// the commit into an abort.
		if err := r.cl.Flush(ctx); err != nil {
			return fmt.Errorf("flushing the transaction: %w", err)
		}
		if p := r.produceErr.Swap(nil); p != nil {
			perr = *p
			try = kgo.TryAbort
		}
	}
	committed, err := r.endTxn(ctx, try)
	// Every record of the transaction has its answer by now (End flushes
	// or aborts them all); an abort fails the buffered ones with "client is
	// aborting buffered records", which must not count against the next
	// transaction.
	r.produceErr.Store(nil)
	r.inTxn = false
	r.sinceCommit = 0
	r.lastCommit = time.Now()
	if err != nil {
		// End's errors are not retryable: the producer is fenced or in a
		// fatal state. Nothing of this transaction is committed.
		r.dropPending()
		r.broken = fmt.Errorf("ending the transaction: %w", err)
		return r.broken
	}
	if !committed {
		r.dropPending()
		for _, p := range r.procs {
			p.Stats.Aborts.Add(1)
		}
		if len(failedCanaries) > 0 {
			r.log.Warn("transaction aborted: a swapped plugin version failed its canary; its records are processed again by the previous version")
			r.rollBack(ctx, failedCanaries)
			return nil
		}
		if perr != nil {
			r.produceAborts++
			r.log.Warn("transaction aborted because a produce failed; processing again from the committed offsets",
				"err", perr, "consecutive", r.produceAborts)
			if r.produceAborts >= maxProduceAborts {
				r.broken = fmt.Errorf("%d transactions in a row aborted because producing failed: %w", r.produceAborts, perr)
				return r.broken
			}
		} else {
			r.log.Info("transaction aborted (rebalance or fenced); processing again from the committed offsets")
		}
		return nil
	}
	r.produceAborts = 0
	for _, t := range r.tasks {
		if err := t.applyState(); err != nil {
			// The transaction is committed but the local store could not
			// take it: the store is now behind its changelog, which the
			// next restore repairs. Stop rather than process on it.
			r.broken = err
			return err
		}
		t.dirty = false
		t.windowStart = -1
	}
	for _, p := range r.procs {
		p.Stats.Commits.Add(1)
	}
	return nil
}

// dropPending forgets every task's uncommitted work after an abort: state
// changes are discarded, changelog positions cleared, and the dedupe
// position reset, because the consumer will deliver the aborted records
// again.
func (r *Runner) dropPending() {
	for _, t := range r.tasks {
		if t.st != nil {
			t.st.Discard()
			for i := range t.changelogNext {
				t.changelogNext[i].Store(-1)
			}
		}
		t.next = -1
		t.dirty = false
		t.windowStart = -1
	}
}
