package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The commit point: the one owner of a runner's open commit window, across
// all its tasks, and the one way to end it.
//
// A commit window is the work of every task since the last commit point:
// the records each processed (its input cursors, window.go), what their
// calls staged (state writes in state.Task, timer changes and marks in the
// timekeeper, latest-per-key records in latest.go) and what was produced
// for them (outputs, changelog records, dead letters). commitPoint holds
// what belongs to the window as a whole: its schedule, the first produce
// failure, whether the runner is broken, and the guarantee's own state
// (exactly_once's transaction). Nothing else changes them: processing calls
// opened and processed, the loop calls due and commit, group callbacks go
// through the guarantee's hooks.
//
// A window ends in one of three ways, the same under both guarantees:
//
//	commit  its outputs and changelog records are acknowledged (and, under
//	        exactly_once, committed with the input offsets in one
//	        transaction), then every task's state batch is applied with its
//	        changelog checkpoint (I3), then (at_least_once) the offsets are
//	        committed (I1); the cursors close, the time commits, the
//	        schedule restarts.
//	abort   nothing of it becomes visible or durable: every task drops its
//	        staged state, time changes and latest records and goes back to
//	        its committed position (exactly_once: the transaction aborted
//	        and the client was set back; at_least_once: a canary rollback,
//	        the runner rewinds); the work is done again.
//	fail    the runner is broken: nothing is committed ever again, every
//	        task drops its window, Run returns the error and a new runner
//	        starts from the committed offsets.
//
// The guarantees are strategies for the parts that differ (strategy):
// exactly_once seals a window with a transaction, at_least_once with a
// flush and commits offsets after the state; what happens before and after
// is commitPoint's. All of it runs on the loop, under Runner.mu.
type commitPoint struct {
	r *Runner
	g strategy

	// sinceCommit counts the records processed since the last commit
	// point, lastCommit is when it was: the schedule.
	sinceCommit int
	lastCommit  time.Time
	// produceErr is the first produce failure since the last commit point;
	// set by produce promises (kgo goroutines), hence atomic.
	produceErr atomic.Pointer[error]
	// refusals are the window's produced records the broker refused for
	// what they are (refusal.go); set by produce promises.
	refusals refusals
	// produceAborts counts consecutive windows aborted because a produce
	// failed and nothing was found to fail in their place; past
	// maxProduceAborts the runner gives up instead of spinning.
	produceAborts int
	// broken is set when the runner can commit nothing more: Run stops.
	broken error
	// samples are the durations of commit points that had work.
	samples commitSamples
	// forward is set when a task's account became heavy (its window's
	// budget of bytes, or more than its share of the process's: package
	// account): the work of the poll stops at the next record boundary
	// of every task and the commit point comes now rather than at its
	// interval. Set by processing goroutines, hence atomic; cleared by
	// restart.
	forward atomic.Bool
	// asks are the CommitNow calls waiting for the next commit point
	// (drive.go), each told its outcome.
	asks []chan error
}

// strategy is what differs between exactly_once (exactlyOnce, eos.go) and
// at_least_once (atLeastOnce, alo.go): how a window is opened and sealed,
// when offsets are committed, and how tasks go back after an abort; and
// the group callbacks' interplay with an open transaction. Every method
// but lockForCallback runs on the loop or in a group callback, under
// Runner.mu.
type strategy interface {
	// open makes work done from now on part of the window (exactly_once
	// begins a transaction if none is open).
	open() error
	// pending reports whether the window holds work that only its end can
	// settle (an open transaction): swaps wait, shutdown ends it.
	pending() bool
	// seal ends the window's produce side. With commit, its outputs,
	// changelog records and dead letters are acknowledged and, under
	// exactly_once, committed with offsets in one transaction; committed
	// is false when the window was aborted instead (commit false, a
	// produce failure under exactly_once, a rebalance), in which case
	// nothing of it is visible. Every record produced for the window has
	// its answer when seal returns. An error is fatal.
	seal(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, commit bool) (committed bool, err error)
	// commitOffsets commits offsets once the window's state is applied
	// (at_least_once; exactly_once committed them in seal). retry reports
	// that the group refused them for now: they go with the next commit
	// point.
	commitOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) (retry bool, err error)
	// rewind sets a task's inputs back after its window was aborted:
	// exactly_once's abort set the client back to the committed offsets
	// already; at_least_once rewinds to the window's first record.
	rewind(t *task)
	// abortsOnProduceFailure reports whether a produce failure aborts the window
	// (exactly_once: redone, up to maxProduceAborts) rather than failing
	// the runner (at_least_once: outputs cannot be taken back, so the
	// offsets must not move past them).
	abortsOnProduceFailure() bool

	// Group callbacks (eos.go has the details).
	wantsCommit() bool
	beforeRevoke(ctx context.Context)
	beforeLose()
	// lockForCallback takes Runner.mu for a group callback (true), or
	// queues the callback to run after the commit point (false).
	lockForCallback(kind callbackKind, parts map[string][]int32) bool
	rearm(ctx context.Context)
	runQueued(ctx context.Context)
}

// maxProduceAborts is how many windows in a row may be aborted because a
// produce failed before the runner stops with the error: an output topic
// that vanished or a record the broker always refuses would otherwise be
// retried forever.
const maxProduceAborts = 5

// commitTimeout bounds one commit point (flush, offset commit or
// transaction end).
const commitTimeout = 30 * time.Second

// opened opens the window for the work about to be done (records, or a
// commit point's timer and commit calls).
func (cp *commitPoint) opened() error { return cp.g.open() }

// processed counts n records finished for the schedule.
func (cp *commitPoint) processed(n int) { cp.sinceCommit += n }

// restart restarts the schedule: no processed record waits.
func (cp *commitPoint) restart() {
	cp.sinceCommit = 0
	cp.lastCommit = time.Now()
	cp.forward.Store(false)
}

// heavy is called by a task's processing after each call: it reports
// whether the task must stop at this record boundary because the commit
// point is brought forward, by its own account being heavy or by another
// task's.
func (cp *commitPoint) heavy(t *task) bool {
	if cp.r.opts.ManualCommits {
		// Only CommitNow commits (drive.go): past the window's budget
		// only the cap applies.
		return false
	}
	if t.acct.Heavy() {
		cp.forward.Store(true)
		return true
	}
	return cp.forward.Load()
}

// holds reports whether the window holds work: processed records, or an
// open transaction.
func (cp *commitPoint) holds() bool { return cp.sinceCommit > 0 || cp.g.pending() }

// deadline is when the window's commit point is due: a commit interval
// after the last one, or from now when no processed record waits (an idle
// window opens with its first record) or the commit points are manual.
func (cp *commitPoint) deadline() time.Time {
	if cp.sinceCommit == 0 || cp.r.opts.ManualCommits {
		return time.Now().Add(cp.r.opts.CommitInterval)
	}
	return cp.lastCommit.Add(cp.r.opts.CommitInterval)
}

// due reports whether a commit point is due: the interval is up, or the
// window reached kafka.commit_records; a window without records is due
// only when a timer may be.
func (cp *commitPoint) due() bool {
	if cp.r.opts.ManualCommits {
		return false
	}
	if cp.forward.Load() {
		return true
	}
	since := time.Since(cp.lastCommit)
	if cp.sinceCommit == 0 {
		return since >= cp.r.opts.CommitInterval && cp.r.timeDue()
	}
	return cp.sinceCommit >= cp.r.opts.CommitRecords || since >= cp.r.opts.CommitInterval
}

// produce sends a record of the window.
func (cp *commitPoint) produce(rec *kgo.Record) {
	cp.r.cl.Produce(context.Background(), rec, cp.onProduced)
}

// onProduced keeps the first produce failure since the last commit point:
// the commit point then commits nothing past it (I1).
func (cp *commitPoint) onProduced(rec *kgo.Record, err error) {
	if err != nil {
		werr := fmt.Errorf("topic %s: %w", rec.Topic, err)
		cp.produceErr.CompareAndSwap(nil, &werr)
		cp.refusals.add(rec, err)
	}
}

// takeProduceErr returns and clears the first produce failure, if any.
func (cp *commitPoint) takeProduceErr() error {
	if p := cp.produceErr.Swap(nil); p != nil {
		return *p
	}
	return nil
}

// run is a commit point after a poll's records, if one is due or a
// rebalance waits (it is let in with nothing open, so it does not abort
// processed work), then lets waiting swaps in.
func (cp *commitPoint) run(ctx context.Context) (err error) {
	asks := cp.asks
	cp.asks = nil
	if len(asks) > 0 {
		defer func() { cp.answerAsks(asks, err) }()
	} else if !cp.due() && !cp.g.wantsCommit() {
		return nil
	}
	// A stop (ctx canceled) must not cut a commit point in half: it gets
	// its own bounded context.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if cp.forward.Load() {
		cp.countForward()
	}
	start := time.Now()
	err = cp.commit(cctx)
	cp.samples.add(time.Since(start))
	if err != nil {
		return err
	}
	cp.r.advanceSwaps(cctx)
	cp.r.applyPauses()
	return nil
}

// commit ends the window (see the file comment): the commit point's timer
// and commit calls first, inside the window (ABI.md section 8.3), then
// commit or abort; a broken runner commits nothing ever again.
func (cp *commitPoint) commit(ctx context.Context) error {
	r := cp.r
	if cp.broken != nil {
		return cp.broken
	}
	defer cp.g.runQueued(ctx)
	if err := r.timePoint(ctx); err != nil {
		return cp.fail(err)
	}
	if !cp.holds() {
		cp.restart()
		return nil
	}
	// A swapped version that failed its canary: nothing it did since the
	// last commit point may be committed. A produce failure: nothing past
	// the failed record may be.
	failed := r.failedCanaries()
	perr := cp.takeProduceErr()
	if perr != nil && !cp.g.abortsOnProduceFailure() && !cp.refusals.only() {
		return cp.fail(fmt.Errorf("producing outputs failed, offsets not committed past the failed records: %w", perr))
	}
	commit := len(failed) == 0 && perr == nil
	if commit {
		// The window's latest records and its changelog records, which
		// an aborted window must not have (at_least_once cannot take them
		// back).
		for _, t := range r.tasks {
			t.produceLatest()
			t.produceChangelog()
		}
	}
	offsets := r.commitOffsets()
	committed, err := cp.g.seal(ctx, offsets, commit)
	if perr == nil {
		perr = cp.takeProduceErr() // failed while sealing
	}
	// Every record of the window has its answer by now; an abort fails
	// the buffered ones with "client is aborting buffered records", which
	// must not count against the next window.
	cp.produceErr.Store(nil)
	refused, onlyRefusals := cp.refusals.take()
	switch {
	case err != nil:
		return cp.fail(err)
	case committed && perr != nil && !onlyRefusals:
		// at_least_once: a produce failed during the flush.
		return cp.fail(fmt.Errorf("producing outputs failed, offsets not committed past the failed records: %w", perr))
	case committed && perr != nil:
		// at_least_once: the broker refused records; the window is
		// processed again (its acknowledged outputs too) with the
		// refused ones failed.
		return cp.aborted(ctx, failed, perr, refused)
	case !committed && perr != nil && !onlyRefusals && !cp.g.abortsOnProduceFailure():
		// at_least_once: a produce failed for another reason than the
		// record (found during the flush).
		return cp.fail(fmt.Errorf("producing outputs failed, offsets not committed past the failed records: %w", perr))
	case !committed:
		if !onlyRefusals {
			refused = nil
		}
		return cp.aborted(ctx, failed, perr, refused)
	}
	cp.produceAborts = 0
	for _, t := range r.tasks {
		if err := t.applyState(); err != nil {
			// The offsets may be committed (exactly_once) but the local
			// store could not take the window: it is behind its
			// changelog, which the next restore repairs. Stop rather
			// than process on it.
			return cp.fail(err)
		}
	}
	retry, err := cp.g.commitOffsets(ctx, offsets)
	if err != nil {
		return cp.fail(fmt.Errorf("committing offsets: %w", err))
	}
	for _, t := range r.tasks {
		t.tk.committed()
		// The window's staged bytes are produced and applied: released,
		// offsets committed or not.
		t.acct.WindowEnded(t.tk.carriedHeld())
		if !retry {
			t.win.committed()
		}
	}
	r.refused.committed()
	if retry {
		// The group moved on (a rebalance, a newer member epoch): the
		// outputs and state are in, the offsets stay uncommitted and go
		// with the next commit point, or the next owner processes the
		// records again (at-least-once).
		r.log.Info("offset commit refused by the group; retrying at the next commit point")
	} else {
		for _, p := range r.procs {
			p.Stats.Commits.Add(1)
		}
	}
	cp.restart()
	return nil
}

// aborted ends a window whose seal did not commit: every task drops it and
// goes back to its committed position; a failed canary rolls its version
// back; records the broker refused (refused) are found, to fail on the
// next pass (refusal.go); any other produce failure counts against
// maxProduceAborts.
func (cp *commitPoint) aborted(ctx context.Context, failed []*task, perr error, refused []refusal) error {
	r := cp.r
	cp.drop(true)
	cp.restart()
	if cp.g.abortsOnProduceFailure() {
		for _, p := range r.procs {
			p.Stats.Aborts.Add(1) // a transaction aborted
		}
	}
	if len(failed) > 0 {
		r.log.Warn("commit window aborted: a swapped plugin version failed its canary; its records are processed again by the previous version")
		r.rollBack(ctx, failed)
		return nil
	}
	if perr == nil {
		r.log.Info("commit window aborted (rebalance or fenced); processing again from the committed offsets")
		return nil
	}
	if len(refused) > 0 {
		r.log.Warn("commit window aborted because the broker refused records; finding them to fail them on the next pass",
			"err", perr, "refused", len(refused))
		convicted, shrunk := cp.resolveRefusals(ctx, refused)
		for _, p := range r.procs {
			p.Stats.RefusalAborts.Add(1)
		}
		if shrunk != nil {
			return cp.fail(shrunk)
		}
		if convicted > 0 {
			cp.produceAborts = 0
			return nil
		}
	}
	cp.produceAborts++
	r.log.Warn("commit window aborted because a produce failed; processing again from the committed offsets",
		"err", perr, "consecutive", cp.produceAborts)
	if cp.produceAborts >= maxProduceAborts {
		return cp.fail(fmt.Errorf("%d commit windows in a row aborted because producing failed: %w", cp.produceAborts, perr))
	}
	return nil
}

// fail breaks the runner at err: every task drops its window (nothing of
// it will ever be committed by this runner), and err is what Run returns.
func (cp *commitPoint) fail(err error) error {
	if cp.broken == nil {
		cp.broken = err
	}
	cp.drop(false)
	cp.restart()
	return cp.broken
}

// drop makes every task forget its window: staged state, time changes and
// latest records; with rewind, its inputs go back to the committed
// position (strategy.rewind) so the work is done again.
func (cp *commitPoint) drop(rewind bool) {
	for _, t := range cp.r.tasks {
		if t.st != nil && t.restoring == nil {
			// A restoring task's store belongs to its restore's
			// goroutine, and holds no window.
			t.st.Discard()
		}
		t.tk.reset()
		t.acct.WindowEnded(t.tk.carriedHeld())
		t.dropLatest()
		if rewind {
			cp.g.rewind(t)
		}
	}
}

// countForward counts a commit point brought forward by the budget of
// bytes held, once for each processor with a task whose account is heavy
// (BudgetCommits); when none is any more (the process's pressure eased
// meanwhile), for each processor with a window holding bytes.
func (cp *commitPoint) countForward() {
	counted := map[*procState]bool{}
	for _, t := range cp.r.tasks {
		if t.acct.Heavy() {
			counted[t.proc] = true
		}
	}
	if len(counted) == 0 {
		for _, t := range cp.r.tasks {
			if t.acct.Held() > 0 {
				counted[t.proc] = true
			}
		}
	}
	for p := range counted {
		p.Stats.BudgetCommits.Add(1)
	}
}

// lost forgets the window's processed records of lost partitions (their
// tasks are closed): the schedule restarts.
func (cp *commitPoint) lost() { cp.sinceCommit = 0 }

// final is the commit point of a runner that stops: the work processed is
// committed, unless the runner is broken.
func (cp *commitPoint) final(ctx context.Context) error {
	if !cp.holds() || cp.broken != nil {
		return nil
	}
	if err := cp.commit(ctx); err != nil {
		return fmt.Errorf("final commit: %w", err)
	}
	return nil
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

// rewind makes the consumer fetch the task's i-th input partition again
// from offset. Only the poll loop calls it, before AllowRebalance.
func (r *Runner) rewind(t *task, i int, offset int64) {
	r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		t.topics[i]: {t.id.Partition: {Epoch: -1, Offset: offset}},
	})
}
