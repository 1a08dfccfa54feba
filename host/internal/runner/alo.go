package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// atLeastOnce is the at_least_once guarantee (commitpoint.go's strategy).
// A window is sealed by waiting until every record produced for it is
// acknowledged; the state is applied, and only then are the input offsets
// of the processed records committed: an offset is never committed before
// the outputs of the records below it are acknowledged (I1). A crash
// between the steps processes records again, on top of applied state:
// at-least-once. Outputs cannot be taken back, so a produce failure fails
// the runner (its offsets never move past the failed record) and a failed
// canary leaves the bad version's outputs standing (the window's offsets,
// state and latest records are dropped, and its records processed again).
type atLeastOnce struct {
	r *Runner
	// work is set when work was done since the last commit point (a
	// record processed, a commit call made): the commit point has
	// outputs to flush and state to apply.
	work bool
}

func (c *atLeastOnce) open() error                { c.work = true; return nil }
func (c *atLeastOnce) pending() bool              { return c.work }
func (*atLeastOnce) abortsOnProduceFailure() bool { return false }
func (*atLeastOnce) wantsCommit() bool            { return false }
func (*atLeastOnce) rearm(context.Context)        {}
func (*atLeastOnce) beforeLose()                  {}
func (*atLeastOnce) runQueued(context.Context)    {}

// lockForCallback takes Runner.mu: nothing at_least_once does under it
// waits for a lock a group callback holds.
func (c *atLeastOnce) lockForCallback(callbackKind, map[string][]int32) bool {
	c.r.mu.Lock()
	return true
}

// beforeRevoke commits everything processed, so the new owner goes on from
// there.
func (c *atLeastOnce) beforeRevoke(ctx context.Context) {
	if err := c.r.cp.commit(ctx); err != nil {
		// The new owner re-reads from the last committed offset: duplicates
		// are possible under at-least-once, loss is not.
		c.r.log.Error("commit on revoke failed; the records since the last commit will be processed again", "err", err)
	}
}

// seal waits until every record produced for the window is acknowledged
// (or failed: the commit point checks). Without commit (a canary rollback)
// the outputs stand all the same.
func (c *atLeastOnce) seal(ctx context.Context, _ map[string]map[int32]kgo.EpochOffset, commit bool) (bool, error) {
	c.work = false
	if err := c.r.cl.Flush(ctx); err != nil {
		return false, fmt.Errorf("flushing outputs: %w", err)
	}
	return commit, nil
}

// commitOffsets commits the processed offsets once the state is applied.
func (c *atLeastOnce) commitOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) (bool, error) {
	if len(offsets) == 0 {
		return false, nil
	}
	var cerr error
	c.r.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = commitError(resp, err)
	})
	if cerr != nil && retriableCommitErr(cerr) {
		return true, nil
	}
	return false, cerr
}

// rewind makes the task fetch its window's records again, from the first
// one on each input.
func (c *atLeastOnce) rewind(t *task) {
	for i := range t.topics {
		if from, ok := t.win.in(i).rewound(); ok {
			c.r.rewind(t, i, from)
		}
	}
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
