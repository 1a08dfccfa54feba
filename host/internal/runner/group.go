package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// Group protocols (Options.GroupProtocol).
const (
	// ProtocolAuto uses the KIP-848 "consumer" protocol when every broker
	// supports it and the classic one otherwise.
	ProtocolAuto = "auto"
	// ProtocolConsumer is KIP-848: the broker assigns partitions and
	// rebalances are incremental, with no group-wide join barrier: a dead
	// member's partitions move after its session times out while every
	// other member keeps working and committing.
	ProtocolConsumer = "consumer"
	// ProtocolClassic is the JoinGroup/SyncGroup protocol with the
	// cooperative-sticky balancer. Every rebalance is a barrier: members
	// rejoin and wait, up to the session timeout, for a member that died.
	ProtocolClassic = "classic"
)

// groupOpts returns the client options of the chosen group protocol.
//
// franz-go uses KIP-848 only when asked (ServerSideBalancer) with a sticky
// or range balancer first; on a broker without KIP-848 it would then fall
// back to the classic protocol with that balancer, which is eager. So the
// runner asks the brokers itself and passes either the KIP-848 options or
// the classic cooperative ones, never both.
func groupOpts(ctx context.Context, kafka kclient.Config, want string, extra []kgo.Opt) ([]kgo.Opt, string, error) {
	if want == "" {
		want = ProtocolAuto
	}
	if want == ProtocolAuto {
		ok, err := brokersSupport848(ctx, kafka, extra)
		if err != nil {
			return nil, "", err
		}
		want = ProtocolClassic
		if ok {
			want = ProtocolConsumer
		}
	}
	switch want {
	case ProtocolConsumer:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, want, nil
	case ProtocolClassic:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}, want, nil
	}
	return nil, "", fmt.Errorf("group protocol %q: want auto, consumer or classic", want)
}

// brokersSupport848 reports whether every broker answers ConsumerGroupHeartbeat
// v1, the version franz-go's KIP-848 member needs.
func brokersSupport848(ctx context.Context, kafka kclient.Config, extra []kgo.Opt) (bool, error) {
	cl, err := kafka.NewClient(extra...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resps := cl.RequestSharded(ctx, kmsg.NewPtrApiVersionsRequest())
	answered := 0
	for _, sh := range resps {
		if sh.Err != nil {
			continue
		}
		resp := sh.Resp.(*kmsg.ApiVersionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			continue
		}
		answered++
		ok := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) && k.MaxVersion >= 1 {
				ok = true
			}
		}
		if !ok {
			return false, nil
		}
	}
	if answered == 0 {
		var errs []error
		for _, sh := range resps {
			errs = append(errs, sh.Err)
		}
		return false, fmt.Errorf("asking the brokers which group protocols they support: %w", errors.Join(errs...))
	}
	return true, nil
}

// endStuckAfter is how long a transaction end may wait for the group before
// the runner lets the blocked group callbacks run (see endTxn).
const endStuckAfter = time.Second

// callback is a group callback that arrived while a transaction was ending
// and is run by the loop right after.
type callback struct {
	kind  string // "assigned", "revoked" or "lost"
	parts map[string][]int32
}

// endTxn ends the open transaction. The session's End makes sure the member
// is still in the group (a forced heartbeat) before it commits; if the
// member was dropped, the heartbeat loop is gone and only the lost callback
// can wake End up, but that callback waits for AllowRebalance, which the loop
// calls after End: End would wait out its context and the producer be left
// in a failed state. So when End has waited endStuckAfter and a callback is
// blocked, the rebalance is let in from here. Callbacks that arrive while End
// runs only queue themselves (they cannot take r.mu, which the loop holds);
// the session has already marked the transaction failed for a revoke or a
// loss, so End aborts, and the loop then runs the queued callbacks before
// it processes anything else.
func (r *Runner) endTxn(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	r.cbMu.Lock()
	r.ending = true
	r.cbMu.Unlock()
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(endStuckAfter / 4)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if time.Since(start) >= endStuckAfter && r.callbackBlocked.Load() {
					r.log.Info("transaction end is waiting for the group; letting the pending rebalance in")
					r.cl.AllowRebalance()
					return
				}
			}
		}
	}()
	committed, err := r.sess.End(ctx, try)
	close(stop)
	<-watched
	r.cbMu.Lock()
	r.ending = false
	r.cbMu.Unlock()
	return committed, err
}

// runQueued runs the callbacks queued while a transaction ended, after the
// commit point has applied or dropped the tasks' state; the caller holds r.mu.
func (r *Runner) runQueued(ctx context.Context) {
	r.cbMu.Lock()
	queued := r.queued
	r.queued = nil
	r.cbMu.Unlock()
	for _, c := range queued {
		r.runCallback(ctx, c)
	}
}

// deferCallback queues a callback if a transaction is ending and reports
// whether it did.
func (r *Runner) deferCallback(kind string, parts map[string][]int32) bool {
	r.callbackBlocked.Store(false)
	r.cbMu.Lock()
	defer r.cbMu.Unlock()
	if !r.ending {
		return false
	}
	r.queued = append(r.queued, callback{kind, parts})
	return true
}

// runCallback runs a queued callback; the caller holds r.mu.
func (r *Runner) runCallback(ctx context.Context, c callback) {
	switch c.kind {
	case "assigned":
		r.assign(ctx, c.parts)
	case "revoked", "lost":
		// The transaction that was ending aborted (the session saw the
		// revoke or loss first): nothing of these partitions was committed.
		r.closeTasks(ctx, c.parts)
		r.log.Info("partitions "+c.kind+" while a transaction ended; its work was aborted", "partitions", c.parts)
	}
}

// retriableCommitErr reports whether an at_least_once offset commit failed
// because of the group's state (a rebalance, an old generation or member
// epoch, a moved coordinator): the offsets stay uncommitted and are committed
// at the next commit point, or reprocessed by the next owner.
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
