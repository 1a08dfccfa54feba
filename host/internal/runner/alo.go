package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// atLeastOnce is the at_least_once committer. A commit point waits until
// every produced record is acknowledged, applies the tasks' state, then
// commits the input offsets of the processed records: an offset is never
// committed before the outputs of the records below it are acknowledged
// (I1). A crash between the steps processes records again, on top of
// applied state: at-least-once.
type atLeastOnce struct{ r *Runner }

func (*atLeastOnce) openNow() error                                      { return nil }
func (*atLeastOnce) open() bool                                          { return false }
func (*atLeastOnce) wantsCommit() bool                                   { return false }
func (*atLeastOnce) deferCallback(callbackKind, map[string][]int32) bool { return false }
func (*atLeastOnce) rearm(context.Context)                               {}
func (*atLeastOnce) beforeLose()                                         {}

// beforeRevoke commits everything processed, so the new owner goes on from
// there.
func (c *atLeastOnce) beforeRevoke(ctx context.Context) {
	if err := c.r.commit(ctx); err != nil {
		// The new owner re-reads from the last committed offset: duplicates
		// are possible under at-least-once, loss is not.
		c.r.log.Error("commit on revoke failed; the records since the last commit will be processed again", "err", err)
	}
}

func (c *atLeastOnce) commit(ctx context.Context) error {
	r := c.r
	if failed := r.failedCanaries(); len(failed) > 0 {
		return c.rollBack(ctx, failed)
	}
	for _, t := range r.tasks {
		t.produceLatest()
		t.produceChangelog()
	}
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing outputs: %w", err)
	}
	if perr := r.produceErr.Load(); perr != nil {
		r.broken = fmt.Errorf("producing outputs failed, offsets not committed past the failed records: %w", *perr)
		return r.broken
	}
	// Outputs and changelog records are acknowledged: the state can be
	// applied, and only then the input offsets move.
	for _, t := range r.tasks {
		if err := t.applyState(); err != nil {
			r.broken = err
			return err
		}
	}
	offsets := r.commitOffsets()
	if len(offsets) > 0 {
		var cerr error
		r.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = commitError(resp, err)
		})
		if cerr != nil {
			if retriableCommitErr(cerr) {
				// The group moved on (a rebalance, a newer member epoch):
				// the offsets stay uncommitted and go with the next commit
				// point, or the next owner processes the records again
				// (at-least-once). The outputs are already acknowledged.
				r.log.Info("offset commit refused by the group; retrying at the next commit point", "err", cerr)
				r.timeCommitted() // outputs and state are in: only offsets wait
				r.windowsClosed()
				return nil
			}
			return fmt.Errorf("committing offsets: %w", cerr)
		}
		for _, p := range r.procs {
			p.Stats.Commits.Add(1)
		}
	}
	for _, t := range r.tasks {
		t.win.committed()
	}
	r.timeCommitted()
	r.windowsClosed()
	return nil
}

// rollBack is the commit point at which a swapped version failed its
// canary. What it produced cannot be taken back (its outputs stand:
// at-least-once), but nothing since the last commit point is committed:
// every task drops its pending state and rewinds to the first record it
// processed since then, and the previous version processes those records
// again, the failed ones included.
func (c *atLeastOnce) rollBack(ctx context.Context, failed []*task) error {
	r := c.r
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing outputs: %w", err)
	}
	for _, t := range r.tasks {
		rewound := false
		for i := range t.topics {
			if from, ok := t.win.in(i).rewound(); ok {
				r.rewind(t, i, from)
				rewound = true
			}
		}
		if !rewound {
			continue
		}
		if t.st != nil {
			t.st.Discard()
		}
		t.tk.reset()
		t.dropLatest()
	}
	r.windowsClosed()
	r.rollBack(ctx, failed)
	return nil
}

func commitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, perr)
			}
		}
	}
	return nil
}

// retriableCommitErr reports whether an offset commit failed because of the
// group's state (a rebalance, an old generation or member epoch, a moved
// coordinator): the offsets stay uncommitted and are committed at the next
// commit point, or reprocessed by the next owner.
func retriableCommitErr(err error) bool {
	for _, e := range []error{
		kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID,
		kerr.StaleMemberEpoch, kerr.FencedMemberEpoch, kerr.CoordinatorNotAvailable,
		kerr.NotCoordinator, kerr.CoordinatorLoadInProgress,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
