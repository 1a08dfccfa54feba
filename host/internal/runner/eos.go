package runner

// The exactly_once guarantee (commitpoint.go's strategy): one Kafka
// transaction per commit window, through franz-go's GroupTransactSession.
//
// The locks and atomics it shares with group callbacks and produce
// promises are in docs/locks.md (Runner.mu, then cbMu).
//
// A transaction's states, as the loop sees them:
//
//	idle --open (records or commit calls to run)--> open --commit point--> ending
//	ending --End committed--> committed: state applied, windows closed --> idle
//	ending --End aborted----> aborted: state dropped, consumer rewound
//	                          by the session, queued callbacks run --> idle
//	ending --End failed-----> broken: the runner stops (fenced or fatal)
//
// Group callbacks that arrive while the transaction is ending are queued
// (they cannot take Runner.mu, which the loop holds through End) and run by
// the loop when the commit point is over.

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endStuckAfter is how long a transaction end may wait for the group before
// the runner lets the blocked group callbacks run (see end).
const endStuckAfter = time.Second

type exactlyOnce struct {
	r    *Runner
	sess *kgo.GroupTransactSession // its client is r.cl

	// Loop only, under Runner.mu.
	inTxn bool // a transaction is open
	// disarmed is set when a revoke or loss reached the runner: the
	// session passes no further one on until its End (see rearm).
	disarmed bool

	rebalanceWanted atomic.Bool
	callbackBlocked atomic.Bool

	// cbMu guards ending, endStarts and queued.
	cbMu   sync.Mutex
	ending bool
	// endStarts is closed when the loop starts to end a transaction (and
	// replaced when it is over): a callback waiting for Runner.mu gives up
	// and queues itself then (see lockForCallback).
	endStarts chan struct{}
	queued    []callback
}

// callbackKind names a group callback.
type callbackKind uint8

const (
	cbAssigned callbackKind = iota
	cbRevoked
	cbLost
)

func (k callbackKind) String() string {
	return [...]string{cbAssigned: "assigned", cbRevoked: "revoked", cbLost: "lost"}[k]
}

// callback is a group callback that arrived while a transaction was ending
// and is run by the loop right after.
type callback struct {
	kind  callbackKind
	parts map[string][]int32
}

// onCallbackBlocked is the client's OnPartitionsCallbackBlocked: a
// rebalance waits for the loop's AllowRebalance.
func (c *exactlyOnce) onCallbackBlocked(context.Context, *kgo.Client) {
	c.callbackBlocked.Store(true)
	c.rebalanceWanted.Store(true)
}

func (c *exactlyOnce) pending() bool                { return c.inTxn }
func (c *exactlyOnce) wantsCommit() bool            { return c.rebalanceWanted.Swap(false) }
func (c *exactlyOnce) abortsOnProduceFailure() bool { return true }

// rewind: an aborting End sets the client back to the committed offsets,
// so the task's window only forgets its positions.
func (c *exactlyOnce) rewind(t *task) { t.win.aborted() }

// commitOffsets: the transaction committed them (seal).
func (c *exactlyOnce) commitOffsets(context.Context, map[string]map[int32]kgo.EpochOffset) (bool, error) {
	return false, nil
}

// beforeRevoke does nothing but disarm: the loop has already committed if
// it saw the rebalance coming; otherwise the session aborts the open
// transaction and rewinds every task to its committed offsets.
func (c *exactlyOnce) beforeRevoke(context.Context) { c.disarmed = true }
func (c *exactlyOnce) beforeLose()                  { c.disarmed = true }

// rearm ends the session's transaction state after a revoke or loss when no
// transaction is open. franz-go's GroupTransactSession (v1.22.3) passes the
// first revoke (and the first loss) after an End to the client's callback
// and swallows every later one until the next End. Under KIP-848, and
// under cooperative rebalances, one member can have partitions revoked
// twice with no transaction between (an idle member): the runner never
// heard of the second revoke, kept the tasks, and when a partition came
// back ran the old task on state that missed what the partition's other
// owner had committed meanwhile (the join chaos test caught it). An End
// with nothing open only resets the session's flags (it aborts nothing),
// so every revoke reaches the runner.
func (c *exactlyOnce) rearm(ctx context.Context) {
	if !c.disarmed || c.inTxn {
		return // an open transaction's End rearms the session
	}
	c.disarmed = false
	if _, err := c.end(ctx, kgo.TryAbort); err != nil {
		c.r.log.Warn("resetting the transaction session after a rebalance", "err", err)
	}
	// The aborting End set the consumer back to the committed offsets.
	for _, t := range c.r.tasks {
		t.win.refetched()
	}
	c.runQueued(ctx)
}

// open opens a transaction for work about to be done: records, or a
// commit point's timer and commit calls. Every output, changelog record
// and dead letter is produced inside one.
func (c *exactlyOnce) open() error {
	if c.inTxn {
		return nil
	}
	if err := c.sess.Begin(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	c.inTxn = true
	return nil
}

// seal ends the open transaction: with commit, its produces flushed first
// (so a produce that fails during the flush still turns the commit into an
// abort), the session commits the outputs, changelog records, dead letters
// and the windows' input offsets (offsets) as one transaction; otherwise,
// or when a produce failed, it aborts it, and the session sets the client
// back to the committed offsets. An error is End's (not retryable: the
// producer is fenced or in a fatal state) or the flush's.
func (c *exactlyOnce) seal(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, commit bool) (bool, error) {
	if !c.inTxn {
		return true, nil // nothing was opened: nothing to commit
	}
	r := c.r
	try := kgo.TryAbort
	if commit {
		if err := r.cl.Flush(ctx); err != nil {
			return false, fmt.Errorf("flushing the transaction: %w", err)
		}
		if r.cp.produceErr.Load() == nil {
			try = kgo.TryCommit
		}
	}
	// The transaction commits the windows' offsets, not the client's own
	// record of what was polled: records held in a window (a batch cut at
	// the deadline) were polled but not processed.
	committed, err := c.end(kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		setTxnOffsets(req, offsets)
		return nil
	}), try)
	c.disarmed = false // End reset the session's revoke and loss flags
	c.inTxn = false
	if err != nil {
		return false, fmt.Errorf("ending the transaction: %w", err)
	}
	return committed, nil
}

// setTxnOffsets makes req commit offsets and nothing else: the client
// fills it with the offset after every record it polled, a window knows
// the offset after every record it processed.
func setTxnOffsets(req *kmsg.TxnOffsetCommitRequest, offsets map[string]map[int32]kgo.EpochOffset) {
	left := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range offsets {
		left[topic] = maps.Clone(ps)
	}
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		ps := t.Partitions[:0]
		for _, p := range t.Partitions {
			off, ok := left[t.Topic][p.Partition]
			if !ok {
				continue // nothing processed since the last commit point
			}
			delete(left[t.Topic], p.Partition)
			p.Offset, p.LeaderEpoch = off.Offset, off.Epoch
			ps = append(ps, p)
		}
		if t.Partitions = ps; len(ps) > 0 {
			topics = append(topics, t)
		}
	}
	// A processed partition the client did not list (it always does: its
	// records were polled) is added, by name.
	for topic, ps := range left {
		if len(ps) == 0 {
			continue
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, off := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, off.Offset, off.Epoch, &req.MemberID
			rt.Partitions = append(rt.Partitions, rp)
		}
		topics = append(topics, rt)
	}
	req.Topics = topics
}

// end ends the open transaction. The session's End makes sure the member
// is still in the group (a forced heartbeat) before it commits; if the
// member was dropped, the heartbeat loop is gone and only the lost callback
// can wake End up, but that callback waits for AllowRebalance, which the loop
// calls after End: End would wait out its context and the producer be left
// in a failed state. So when End has waited endStuckAfter and a callback is
// blocked, the rebalance is let in from here (the watchdog). Callbacks that
// arrive while End runs only queue themselves (they cannot take Runner.mu,
// which the loop holds); the session has already marked the transaction
// failed for a revoke or a loss, so End aborts, and the loop then runs the
// queued callbacks before it processes anything else.
func (c *exactlyOnce) end(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	c.setEnding(true)
	defer c.setEnding(false)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go c.watchEnd(stop, watched)
	committed, err := c.sess.End(ctx, try)
	close(stop)
	<-watched
	return committed, err
}

func (c *exactlyOnce) setEnding(ending bool) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	c.ending = ending
	if ending {
		close(c.endStarts)
	} else {
		c.endStarts = make(chan struct{})
	}
}

// watchEnd is End's watchdog (see end); it returns when stop closes, and
// closes watched then.
func (c *exactlyOnce) watchEnd(stop <-chan struct{}, watched chan<- struct{}) {
	defer close(watched)
	tick := time.NewTicker(endStuckAfter / 4)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if time.Since(start) >= endStuckAfter && c.callbackBlocked.Load() {
				c.r.log.Info("transaction end is waiting for the group; letting the pending rebalance in")
				c.r.cl.AllowRebalance()
				return
			}
		}
	}
}

// lockForCallback takes Runner.mu for a group callback and reports true,
// or queues the callback and reports false when a transaction is ending or
// starts to end while the callback waits for the lock. A revoke or loss
// callback runs under the session's own lock, which End takes too (after
// its flush): a callback blocked on Runner.mu while the loop, holding it,
// enters End would deadlock both for good, the member heartbeating on and
// the group's rebalance waiting its whole timeout for it. So the callback
// waits for the lock only until the loop says an End starts.
func (c *exactlyOnce) lockForCallback(kind callbackKind, parts map[string][]int32) bool {
	c.callbackBlocked.Store(false)
	for {
		c.cbMu.Lock()
		if c.ending {
			c.queued = append(c.queued, callback{kind, parts})
			c.cbMu.Unlock()
			return false
		}
		starts := c.endStarts
		c.cbMu.Unlock()
		if lockUnless(&c.r.mu, starts) {
			return true
		}
		// An End started: queue behind it, or, if it is already over (an
		// assignment holds no session lock, so End need not wait for
		// it), try again.
	}
}

// lockUnless locks mu and reports true, or reports false, without the
// lock, if stop closes first.
func lockUnless(mu *sync.Mutex, stop <-chan struct{}) bool {
	if mu.TryLock() {
		return true
	}
	locked := make(chan struct{})
	abandoned := make(chan struct{})
	go func() {
		mu.Lock()
		select {
		case locked <- struct{}{}: // the waiter holds it now
		case <-abandoned:
			mu.Unlock()
		}
	}()
	select {
	case <-locked:
		return true
	case <-stop:
		close(abandoned)
		return false
	}
}

// runQueued runs the callbacks queued while a transaction ended, after the
// commit point has applied or dropped the tasks' state; the caller holds
// Runner.mu.
func (c *exactlyOnce) runQueued(ctx context.Context) {
	c.cbMu.Lock()
	queued := c.queued
	c.queued = nil
	c.cbMu.Unlock()
	r := c.r
	for _, cb := range queued {
		switch cb.kind {
		case cbAssigned:
			r.assign(ctx, cb.parts)
		case cbRevoked, cbLost:
			// The transaction that was ending aborted (the session saw the
			// revoke or loss first): nothing of these partitions was
			// committed.
			r.closeTasks(ctx, cb.parts)
			r.log.Info("partitions "+cb.kind.String()+" while a transaction ended; its work was aborted", "partitions", cb.parts)
		}
	}
}

// transactionTimeout is the transaction timeout to ask for. A classic
// rebalance is a barrier that can wait a whole session timeout for a dead
// member, and a transaction open when it starts can only end after it (End
// needs a heartbeat): it must outlive the wait, or the broker aborts it and
// fences the producer.
func transactionTimeout(opts Options, protocol GroupProtocol) time.Duration {
	txnTimeout := opts.TransactionTimeout
	if protocol == ProtocolClassic && opts.SessionTimeout > 0 && txnTimeout < opts.SessionTimeout+10*time.Second {
		txnTimeout = opts.SessionTimeout + 10*time.Second
		opts.Logger.Warn("classic group protocol: transaction timeout raised above the session timeout",
			"transaction_timeout", txnTimeout, "session_timeout", opts.SessionTimeout)
	}
	return txnTimeout
}
