package runner

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Abandoned transactions (exactly_once). A process that dies holding an
// open transaction leaves it open until the broker aborts it at its
// transaction timeout, and until then the task that moves here can do
// nothing: the group's offsets of its input are pending in that
// transaction (the offset fetch answers UNSTABLE_OFFSET_COMMIT), and its
// changelog's last stable offset stays before the transaction's records.
// Under the classic protocol the host raises the transaction timeout above
// the session timeout (transactionTimeout), so a task waited out the
// session timeout (for the group to notice) and then ten more seconds.
//
// A former owner that is alive ends or aborts its transaction before it
// gives its partitions up (the revoke callback; under KIP-848 the broker
// reassigns only what the owner acknowledged, or what a dead member
// held). So a transaction that is still open on a changelog partition of a
// task this member has just been given, a while after it was given, has no
// live owner. fenceAbandoned finds such transactions and fences their
// transactional ids the way a restarted producer would (InitProducerId),
// which makes the broker abort them at once: their records and offsets
// never count, exactly as at the timeout, only sooner.
//
// What it cannot see: a dead member's transaction that touched no
// changelog partition of the moved task (a stateless task's, or a task
// whose window had no state writes) still waits for its timeout.

// fenceGrace is how long a transaction must stay open on a moved task's
// changelog before it is taken for abandoned: longer than a live former
// owner's abort takes.
const fenceGrace = 2 * time.Second

// fenceAbandoned fences the abandoned transactions on t's changelog
// partitions (see above). It returns when there are none, or they are
// fenced, or ctx ends; failures are logged, never fatal: the broker's
// timeout still ends such a transaction.
func (r *Runner) fenceAbandoned(ctx context.Context, t *task) {
	if r.opts.Guarantee != ExactlyOnce || len(t.proc.spec.Changelogs) == 0 {
		return
	}
	adm := kadm.NewClient(r.cl)
	tps := kadm.TopicsSet{}
	for _, topic := range t.proc.spec.Changelogs {
		tps.Add(topic, t.id.Partition)
	}
	open := func() (map[int64]int64, error) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ps, err := adm.DescribeProducers(dctx, tps)
		if err != nil {
			return nil, err
		}
		out := map[int64]int64{} // producer id -> its open transaction's first offset
		ps.EachProducer(func(p kadm.DescribedProducer) {
			if p.CurrentTxnStartOffset >= 0 {
				out[p.ProducerID] = p.CurrentTxnStartOffset
			}
		})
		return out, nil
	}
	first, err := open()
	if err != nil || len(first) == 0 {
		if err != nil && ctx.Err() == nil {
			r.log.Debug("looking for abandoned transactions", "task", t.id.String(), "err", err)
		}
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(max(fenceGrace, r.opts.CommitInterval)):
	}
	again, err := open()
	if err != nil {
		return
	}
	var stale []int64
	for pid, start := range again {
		if first[pid] == start {
			stale = append(stale, pid) // the same transaction, still open
		}
	}
	if len(stale) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	txns, err := adm.ListTransactions(lctx, stale, []string{"Ongoing"})
	cancel()
	if err != nil {
		r.log.Debug("listing abandoned transactions", "task", t.id.String(), "err", err)
		return
	}
	for id := range txns {
		// Only this app's producers, never this member's own.
		if id == r.opts.TransactionalID || !strings.HasPrefix(id, r.opts.AppID+"-") {
			continue
		}
		if err := r.fence(ctx, id); err != nil {
			r.log.Warn("fencing an abandoned transaction failed; the broker aborts it at its timeout",
				"task", t.id.String(), "transactional_id", id, "err", err)
			continue
		}
		r.log.Info("fenced the open transaction of a former owner of the task: the broker aborted it",
			"task", t.id.String(), "transactional_id", id)
	}
}

// fence bumps transactional id's epoch (InitProducerId), which aborts its
// open transaction; it retries while the coordinator is busy with it.
func (r *Runner) fence(ctx context.Context, id string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60_000
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(rctx, r.cl)
		cancel()
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return nil
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
