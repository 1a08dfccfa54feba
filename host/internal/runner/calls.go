package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// maxCalls bounds the records of one batch of calls: the records a task
// hands its instance at once (the engine may take fewer).
const maxCalls = 256

// taskCalls is a task's batch of record calls into its instance, and the
// hooks that end each one: a record that ends is atomic (its state writes,
// time changes and emits are kept or dropped with it, endCall), moves its
// input's commit position or goes through on_error, and counts for the
// canary, exactly as one record at a time would. Used by the task's
// goroutine only.
type taskCalls struct {
	t     *task
	calls []Call
	recs  []abi.Record   // the records the calls point to, reused
	krs   []*kgo.Record  // the Kafka record of each call
	ins   []int          // the input of each call
	wall  int64          // the wall time the batch's calls see (ms)
	stop  stopReason     // why End asked to stop
	at    int            // the call End stopped at
	begun int            // calls begun (RecordsIn)
	start time.Time      // when the batch began
	inst  Processor      // the instance the batch runs on
	batch BatchProcessor // inst as a BatchProcessor, or nil
	// shadow is the task's shadow for this batch (nil: none): End keeps
	// each call's emits in active for it to compare (shadow.go). took is
	// the batch's time.
	shadow *taskShadow
	active []activeEmits
	took   time.Duration
}

// stopReason is why a batch ended before its last call.
type stopReason uint8

const (
	stopNone    stopReason = iota
	stopFailed             // a record failed under on_error: fail; the task stopped
	stopTimers             // an event-time timer came due: the check runs now
	stopForward            // the commit point comes forward (commitPoint.heavy)
)

// reset empties the batch for a new one on the task's current instance.
func (c *taskCalls) reset(t *task) {
	c.t = t
	c.calls, c.krs, c.ins = c.calls[:0], c.krs[:0], c.ins[:0]
	c.stop, c.at, c.begun = stopNone, -1, 0
	c.inst = t.inst
	c.batch, _ = t.inst.(BatchProcessor)
}

// add appends the record kr of input in as the batch's next call.
func (c *taskCalls) add(kr *kgo.Record, in int) {
	k := len(c.calls)
	if k == len(c.recs) {
		c.recs = append(c.recs, abi.Record{})
	}
	r := &c.recs[k]
	fillRecord(r, kr, c.t.index[in])
	c.calls = append(c.calls, Call{Record: r})
	c.krs = append(c.krs, kr)
	c.ins = append(c.ins, in)
}

// run runs the batch's calls on the task's instance and returns how many
// ended (the rest did not run). From yieldAt on the instance is asked to
// return after the call in progress.
func (c *taskCalls) run(ctx context.Context, yieldAt time.Time) int {
	t := c.t
	c.start = time.Now()
	c.wall = t.r.wallNow()
	if !t.stallFrom.IsZero() {
		t.proc.stalls.add(c.start.Sub(t.stallFrom))
		t.stallFrom = time.Time{}
	} else if !t.gapFrom.IsZero() {
		t.proc.gaps.add(c.start.Sub(t.gapFrom))
		t.gapFrom = time.Time{}
	}
	var n int
	if c.batch != nil {
		n = c.batch.ProcessBatch(ctx, c.calls, c, yieldAt)
	} else {
		n = c.oneByOne(ctx, yieldAt)
	}
	end := time.Now()
	c.took = end.Sub(c.start)
	t.proc.Stats.RecordsIn.Add(int64(c.begun))
	if n > 0 {
		// Per record, the batch's time averaged over its records: the
		// plugin's time for each is not seen apart.
		each := end.Sub(c.start) / time.Duration(n)
		t.proc.Stats.observeLatencyN(each, n)
		// The timer work since the last batch is the records' too: a
		// task whose callbacks are slow runs after the cheap ones,
		// whether its records or its callbacks take the time. So is its
		// shadow candidate's time on them (shadowBefore).
		charged := each + (t.triggerTime+t.shadowTime)/time.Duration(n)
		t.triggerTime, t.shadowTime = 0, 0
		t.recordCost = (3*t.recordCost + charged) / 4
		if t.recordCost > heavyCost {
			t.proc.heavy.Store(true)
		}
	}
	t.lastProcessed = end
	return n
}

// oneByOne is run for a Processor without batches: Process per record,
// with the same hooks.
func (c *taskCalls) oneByOne(ctx context.Context, yieldAt time.Time) int {
	for k := range c.calls {
		if k > 0 && (ctx.Err() != nil || !yieldAt.IsZero() && !time.Now().Before(yieldAt)) {
			return k
		}
		c.Begin(k)
		if c.End(k, c.inst.Process(ctx, c.calls[k].Record)) {
			return k + 1
		}
	}
	return len(c.calls)
}

// Begin implements CallHooks: record k is about to run, so the stream
// time includes it (ABI.md section 8.1) and the call's staging starts.
func (c *taskCalls) Begin(k int) {
	t := c.t
	c.begun++
	t.staged = t.staged[:0]
	t.tk.observe(c.recs[k].Timestamp)
	t.tk.beginCall(c.wall)
}

// End implements CallHooks: record k ended with err. Its staging is kept or
// dropped; its input's position moves past it, or its failure goes
// through the processor's on_error. The batch stops when the task stopped
// (on_error: fail) or an event-time timer came due (the check must run
// before the next record).
func (c *taskCalls) End(k int, err error) bool {
	t := c.t
	kr := c.krs[k]
	key := recordOrigin(t.proc.spec.Name, kr)
	if refused := t.failRefusedCall(key, err != nil); refused != nil {
		err = refused // the broker refused what it produced on a former pass
	}
	if c.shadow != nil {
		c.captureActive(k, err)
	}
	t.endCall(err == nil, key)
	// Only the plugin's records judge its version's canary (a refusal is
	// the broker's judgment, not the plugin's failure).
	t.canaryIn++
	if err != nil {
		if failureKind(err) != FailureRefused {
			t.canaryFailed++
		}
		if !t.onFailure(kr, err) {
			c.stop, c.at = stopFailed, k
			return true
		}
	}
	t.win.in(c.ins[k]).processed(kr.Offset, kr.LeaderEpoch)
	if t.tk.eventDue() {
		c.stop, c.at = stopTimers, k
		return true
	}
	if t.r.cp.heavy(t) {
		// The commit point comes forward: the records not run wait, held.
		c.stop, c.at = stopForward, k
		return true
	}
	return false
}

// fillRecord points r at kr's bytes, of input index; no copy (r's header
// slice is reused).
func fillRecord(r *abi.Record, kr *kgo.Record, index uint32) {
	r.Timestamp = kr.Timestamp.UnixMilli()
	r.Offset = kr.Offset
	r.Partition = kr.Partition
	r.Index = index
	r.Key = kr.Key
	r.Value = kr.Value
	r.Headers = r.Headers[:0]
	for _, h := range kr.Headers {
		r.Headers = append(r.Headers, abi.Header{Key: h.Key, Value: h.Value})
	}
}

// triggerCalls is a task's batch of timer firings or commit-point calls
// (ABI.md section 8.3), and the hooks that end each one as a callback
// alone would end (timers.go: callback): atomic, its failure through the
// processor's on_error. Used by the task's goroutine only.
type triggerCalls struct {
	t      *task
	calls  []Call
	trigs  []abi.Trigger
	timers []timer // a firing's timer, by call; empty for commit calls
	now    int64   // the wall time of the check or commit point (ms)
	// fatal is a store failure while staging a fired timer's removal: the
	// runner stops (the batch stops there).
	fatal error
}

// reset empties the batch for calls at wall time now.
func (c *triggerCalls) reset(t *task, now int64) {
	c.t, c.now, c.fatal = t, now, nil
	c.calls, c.trigs, c.timers = c.calls[:0], c.trigs[:0], c.timers[:0]
}

// add appends a call with trigger trig (and, for a firing, its timer).
func (c *triggerCalls) add(trig abi.Trigger, tm *timer) {
	c.trigs = append(c.trigs, trig)
	if tm != nil {
		c.timers = append(c.timers, *tm)
	}
}

// run runs the batch on the task's instance (the calls point into trigs,
// which no longer grows) and returns how many calls ended.
func (c *triggerCalls) run(ctx context.Context, yieldAt time.Time) int {
	t := c.t
	for k := range c.trigs {
		c.calls = append(c.calls, Call{Trigger: &c.trigs[k]})
	}
	start := time.Now()
	var n int
	if bp, ok := t.inst.(BatchProcessor); ok {
		n = bp.ProcessBatch(ctx, c.calls, c, yieldAt)
	} else {
		tp := t.inst.(TimeProcessor)
		for k := range c.calls {
			if k > 0 && (ctx.Err() != nil || !yieldAt.IsZero() && !time.Now().Before(yieldAt)) {
				break
			}
			c.Begin(k)
			call := tp.OnTimer
			if c.trigs[k].Kind == abi.TriggerCommit {
				call = tp.OnCommit
			}
			n++
			if c.End(k, call(ctx, &c.trigs[k])) {
				break
			}
		}
	}
	if n > 0 {
		took := time.Since(start)
		t.proc.Stats.observeLatencyN(took/time.Duration(n), n)
		t.triggerTime += took // charged to the next records (recordCost)
	}
	return n
}

// Begin implements CallHooks: the call's staging starts; a firing stages
// the removal of its timer first.
func (c *triggerCalls) Begin(k int) {
	t := c.t
	t.staged = t.staged[:0]
	t.tk.beginCall(c.now)
	if len(c.timers) == 0 {
		t.proc.Stats.CommitCalls.Add(1)
		return
	}
	t.proc.Stats.TimerFirings.Add(1)
	tm := &c.timers[k]
	if _, err := t.tk.remove(tm.kind, tm.ts, tm.key); err != nil && c.fatal == nil {
		c.fatal = fmt.Errorf("task %s: removing a fired timer: %w", t.id, err)
	}
}

// End implements CallHooks. The batch stops when the task stopped
// (on_error: fail), when a store failed, and after a firing that canceled
// a timer (a later firing of the batch may be that timer: the next batch
// is built from what is pending).
func (c *triggerCalls) End(k int, err error) bool {
	t := c.t
	key := triggerOrigin(t.proc.spec.Name, t.id.Partition, &c.trigs[k])
	if c.fatal != nil {
		t.endCall(false, key)
		return true
	}
	if refused := t.failRefusedCall(key, err != nil); refused != nil {
		err = refused
	}
	t.endCall(err == nil, key)
	if err != nil && errors.Is(err, state.ErrWriteFailed) {
		// Not the callback's failure: its store cannot be written (a
		// full or failing disk). The runner stops; nothing of the window
		// is committed (task.onFailure).
		c.fatal = fmt.Errorf("task %s: %w", t.id, err)
		return true
	}
	if err != nil {
		var dropped func()
		if len(c.timers) > 0 {
			tm := c.timers[k]
			dropped = func() { t.dropFired(tm, c.now) }
		}
		t.callbackFailed(&c.trigs[k], err, dropped)
		return t.failed != nil
	}
	return len(c.timers) > 0 && t.tk.canceled
}
