package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// Timer firings and commit-point calls of a task (ABI.md section 8.3). A
// callback is run like a record: its emits leave and its state writes,
// timer changes and marks are kept only if it succeeds; a failure goes
// through the processor's on_error policy.

// maxFiringsPerCheck bounds one check's firings, and so the timers (keys
// up to 4 KiB each) it holds in memory at once; the due timers past it
// fire at the next check (after the next record, or the next commit point).
const maxFiringsPerCheck = 1024

// callBudget is the time a run of plugin calls the host makes on its own
// behalf may take: a task's at a commit point (or the heavy tasks',
// together: timeCalls), or a check after a record. Calls start while it
// lasts and the first one always starts, so a run ends at most one call
// (limits.record_timeout) after its deadline, whatever the number of
// tasks or calls.
type callBudget struct {
	deadline time.Time
	started  bool // a call of the run has started
}

// mayStart reports whether another call may start.
func (b *callBudget) mayStart() bool { return !b.started || time.Now().Before(b.deadline) }

// check fires the task's due timers, one call each in firing order:
// event-time timers by the stream time and, when processing is set,
// processing-time timers by the wall clock read now. Timers set by the
// calls fire at the next check. At most the window's remaining firings run;
// the rest wait in order for the next window. A call failing under
// on_error: fail stops the task where it stands on each input.
// The firings start while the budget lasts (time isolation: a flood of
// slow timers cannot hold the commit point); the rest fire at the next
// check. The firings go to the plugin in batches (calls.go). The error is a
// fatal one (the state could not be read).
func (t *task) check(ctx context.Context, processing bool, b *callBudget) error {
	if t.failed != nil || t.restoring != nil {
		return nil
	}
	now := t.r.wallNow()
	n := min(t.tk.lim.FiringsPerCommit-t.tk.firings, maxFiringsPerCheck)
	due, err := t.tk.due(true, processing, max(now, t.tk.wall), n)
	if err != nil {
		return fmt.Errorf("task %s: reading due timers: %w", t.id, err)
	}
	tp, ok := t.inst.(TimeProcessor)
	if ok {
		ok, _ = tp.TimeCallbacks()
	}
	c := &t.triggers
	for len(due) > 0 {
		if t.failed != nil || ctx.Err() != nil || !b.mayStart() {
			return nil
		}
		// The batch: the due timers still pending (an earlier firing of
		// this check may have canceled one), in order.
		c.reset(t, now)
		for len(due) > 0 && len(c.trigs) < maxCalls {
			tm := due[0]
			pending, err := t.tk.pendingTimer(tm)
			if err != nil {
				return fmt.Errorf("task %s: reading a timer: %w", t.id, err)
			}
			if !pending {
				due = due[1:]
				continue
			}
			if !ok {
				// The running version has no wasmstream_on_timer (a swap to
				// a version without it): the timer is dropped, counted and
				// logged.
				due = due[1:]
				t.tk.firings++
				if err := t.dropFired(tm, now); err != nil {
					return err
				}
				t.proc.Stats.TimersDropped.Add(1)
				t.r.log.Warn("timer due but the plugin version has no wasmstream_on_timer; dropped",
					"task", t.id.String(), "kind", tm.kind.String(), "ts", tm.ts)
				continue
			}
			c.add(abi.Trigger{Timestamp: tm.ts, StreamTime: t.tk.stream, WallTime: t.tk.wall, Kind: tm.kind, Key: tm.key}, &tm)
			due = due[1:]
		}
		if len(c.trigs) == 0 {
			return nil
		}
		ran := c.run(ctx, b.deadline) // its first firing runs whatever the time
		b.started = b.started || ran > 0
		t.tk.firings += ran
		if c.fatal != nil {
			return c.fatal
		}
		// Firings that did not run go back in front, in order.
		due = append(c.timers[ran:len(c.timers):len(c.timers)], due...)
	}
	return nil
}

// dropFired removes a fired timer in a call of its own, keeping nothing
// else: a version without wasmstream_on_timer drops its due timers, and a
// failed firing under skip or dead_letter leaves its timer removed.
func (t *task) dropFired(tm timer, now int64) error {
	t.tk.beginCall(now)
	if _, err := t.tk.remove(tm.kind, tm.ts, tm.key); err != nil {
		t.st.AbortRecord()
		t.tk.endCall(false)
		return fmt.Errorf("task %s: removing a fired timer: %w", t.id, err)
	}
	t.st.CommitRecord()
	t.tk.endCall(true)
	return nil
}

// commitCalls is the task's part of a commit point, before its
// transaction commits: the check of both kinds of timers, one
// wasmstream_on_commit call per key marked in the window (including marks
// made by the check), in key order and in batches (calls.go), then the
// stream time saved with the window.
func (t *task) commitCalls(ctx context.Context, now int64, b *callBudget) error {
	if err := t.check(ctx, true, b); err != nil {
		return err
	}
	marks := t.tk.takeMarks()
	if len(marks) > 0 && t.failed == nil {
		tp, ok := t.inst.(TimeProcessor)
		if ok {
			_, ok = tp.TimeCallbacks()
		}
		if !ok {
			t.proc.Stats.MarksDropped.Add(int64(len(marks)))
			t.r.log.Warn("keys marked but the plugin version has no wasmstream_on_commit; dropped",
				"task", t.id.String(), "keys", len(marks))
		} else {
			c := &t.triggers
			for len(marks) > 0 && t.failed == nil && ctx.Err() == nil {
				if !b.mayStart() {
					// Slow commit calls: the keys left are called at the
					// next commit point, so the transaction stays short.
					t.tk.carryMarks(marks)
					break
				}
				c.reset(t, now)
				for _, m := range marks[:min(len(marks), maxCalls)] {
					c.add(abi.Trigger{Timestamp: m.ts, StreamTime: t.tk.stream, WallTime: max(now, t.tk.wall), Kind: abi.TriggerCommit, Key: m.key}, nil)
				}
				ran := c.run(ctx, b.deadline)
				b.started = b.started || ran > 0
				marks = marks[ran:]
			}
		}
	}
	if t.failed == nil && t.tk.sweepDue(now) {
		n, err := t.tk.sweep(now)
		if err != nil {
			return fmt.Errorf("task %s: deleting expired entries: %w", t.id, err)
		}
		t.proc.Stats.Expired.Add(int64(n))
	}
	if err := t.tk.saveStream(); err != nil {
		return fmt.Errorf("task %s: saving the stream time: %w", t.id, err)
	}
	return nil
}

// callbackFailed applies the processor's on_error policy to a timer or
// commit call that failed (its staging already dropped): skip and
// dead_letter drop the call (then dropped runs, if set), fail stops the
// task where it stands on each input: after its last processed record.
func (t *task) callbackFailed(trig *abi.Trigger, err error, dropped func()) {
	stats := t.proc.Stats
	kind := failureKind(err)
	stats.failure(kind)
	what := "timer"
	if trig.Kind == abi.TriggerCommit {
		what = "commit call"
	}
	attrs := []any{"task", t.id.String(), "call", what, "trigger_kind", trig.Kind.String(), "ts", trig.Timestamp, "kind", kind.String(), "err", err}
	switch t.proc.spec.OnError {
	case Skip:
		if dropped != nil {
			dropped()
		}
		stats.Skipped.Add(1)
		t.r.log.Warn(what+" failed; skipped (on_error: skip)", attrs...)
	case DeadLetter:
		dlerr := t.produceDeadLetter(t.deadLetterTrigger(trig, kind, err), triggerOrigin(t.proc.spec.Name, t.id.Partition, trig), err)
		if dlerr == nil {
			if dropped != nil {
				dropped()
			}
			stats.DeadLettered.Add(1)
			t.r.log.Warn(what+" failed; sent to dead-letter topic "+t.proc.spec.DeadLetterTopic, attrs...)
			return
		}
		err = fmt.Errorf("%w; and it cannot be dead-lettered: %w", err, dlerr)
		attrs[len(attrs)-1] = err
		fallthrough
	default:
		// The timer stays pending (its removal was dropped with the call)
		// and fires again when the task restarts.
		t.stop(fmt.Errorf("%s (%s, %d) failed: %w", what, trig.Kind, trig.Timestamp, err))
		t.win.failAtPosition()
		t.r.cl.PauseFetchPartitions(t.partitions())
		t.r.log.Error(what+" failed; task stopped (on_error: fail)", attrs...)
	}
}

// deadLetterTrigger is the dead letter of a failed callback: the trigger's
// key, its encoding as the value, and the error headers.
func (t *task) deadLetterTrigger(trig *abi.Trigger, kind FailureKind, err error) *kgo.Record {
	return &kgo.Record{
		Topic:     t.proc.spec.DeadLetterTopic,
		Partition: -1,
		Key:       append([]byte(nil), trig.Key...),
		Value:     trig.AppendEncode(nil),
		Headers: []kgo.RecordHeader{
			{Key: HeaderErrorKind, Value: []byte(kind.String())},
			{Key: HeaderError, Value: []byte(err.Error())},
			{Key: HeaderProcessor, Value: []byte(t.proc.spec.Name)},
			{Key: HeaderSourceTopic, Value: []byte(t.id.Topic)},
			{Key: HeaderSourcePart, Value: []byte(strconv.Itoa(int(t.id.Partition)))},
			{Key: HeaderTriggerKind, Value: []byte(trig.Kind.String())},
			{Key: HeaderVersion, Value: t.ver.header},
		},
	}
}

// HeaderTriggerKind names, on the dead letter of a failed callback, what
// the call was about: "event" or "processing" (a timer) or "commit".
const HeaderTriggerKind = "wasmstream-trigger-kind"

// timePoint runs every task's commit-point calls, inside the commit
// window's transaction (opened here when the window had no records, so a
// quiet partition's processing-time timers still fire). All of them share
// one deadline, one commit interval after the time point starts, whatever
// the number of tasks: a commit point takes at most a commit interval and
// one call (limits.record_timeout) in plugins, so no plugin can bring it
// near the transaction timeout.
//
// The tasks' calls run in parallel (timeCalls), as their records do
// (processFetches): one task's calls never touch another's instance,
// state or timers. They start in order of the tasks' names, from the
// first one the previous commit point did not reach: a task the deadline
// does not reach keeps its due timers pending and its marked keys carried
// (ABI.md 8.3), goes first next time, and still saves its stream time.
func (r *Runner) timePoint(ctx context.Context) error {
	start := time.Now()
	now := r.wallNow()
	deadline := start.Add(r.opts.CommitInterval)
	tasks := r.timeOrder()
	r.timeNext = ""
	var work []*task
	for _, t := range tasks {
		if t.restoring != nil || t.proc.paused.Load() {
			// A paused task processed nothing since the commit point
			// that paused it: no stream time to save, no timer fires.
			continue
		}
		if t.failed != nil {
			// No more calls, but the records it processed before it
			// stopped moved the stream time, which commits with them.
			if err := t.tk.saveStream(); err != nil {
				return fmt.Errorf("task %s: saving the stream time: %w", t.id, err)
			}
			continue
		}
		if err := t.tk.load(); err != nil {
			return fmt.Errorf("task %s: %w", t.id, err)
		}
		if t.tk.st != nil {
			t.publishTime()
		}
		if !t.tk.commitWork(now) {
			continue
		}
		if err := r.cp.opened(); err != nil {
			return err
		}
		if ok, err := t.settleVersion(ctx); err != nil {
			return err
		} else if !ok {
			continue // stopped: its migration failed (migrate.go)
		}
		work = append(work, t)
	}
	if len(work) == 0 {
		return nil
	}
	reached, err := timeCalls(ctx, work, now, deadline)
	if err != nil {
		return err
	}
	for i, t := range work {
		if reached[i] {
			continue
		}
		if r.timeNext == "" {
			r.timeNext = t.id.String()
			t.proc.Stats.TimePointsCut.Add(1)
		}
		t.tk.carryMarks(t.tk.takeMarks())
		if err := t.tk.saveStream(); err != nil {
			return fmt.Errorf("task %s: saving the stream time: %w", t.id, err)
		}
	}
	return nil
}

// timeCalls runs the commit-point calls of work's tasks (commitCalls) and
// reports which of them it started; the others wait for the next commit
// point. The error is the tasks' fatal ones (a state that could not be
// read), joined.
//
// The light tasks run on up to GOMAXPROCS goroutines at once, each task on
// its own budget of the shared deadline: the first slots' worth always
// start (every commit point moves), the later ones only before the
// deadline, so the calls end at most one call after it. The heavy tasks
// (heavyTask: a call costs more than heavyCost) run one after another on
// one more goroutine, on one budget, as every task's calls did before
// they ran in parallel: spinning callbacks hold at most that one P here,
// and the Kafka I/O and the other processors keep the rest.
func timeCalls(ctx context.Context, work []*task, now int64, deadline time.Time) ([]bool, error) {
	reached := make([]bool, len(work))
	errs := make([]error, len(work))
	heavy := make([]bool, len(work))
	for i, t := range work {
		heavy[i] = heavyTask(t)
	}
	var wg sync.WaitGroup
	if slices.Contains(heavy, true) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &callBudget{deadline: deadline}
			for i, t := range work {
				if !heavy[i] {
					continue
				}
				if !b.mayStart() {
					return
				}
				reached[i] = true
				errs[i] = t.commitCalls(ctx, now, b)
			}
		}()
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	started := 0
	for i, t := range work {
		if heavy[i] {
			continue
		}
		sem <- struct{}{}
		if started >= cap(sem) && !time.Now().Before(deadline) {
			<-sem
			break
		}
		started++
		reached[i] = true
		wg.Add(1)
		go func() {
			defer func() {
				<-sem
				wg.Done()
			}()
			errs[i] = t.commitCalls(ctx, now, &callBudget{deadline: deadline})
		}()
	}
	wg.Wait()
	return reached, errors.Join(errs...)
}

// timeOrder is the tasks in order of their names, starting at timeNext,
// the first task the previous commit point did not reach.
func (r *Runner) timeOrder() []*task {
	tasks := slices.Collect(maps.Values(r.tasks))
	slices.SortFunc(tasks, func(a, b *task) int { return strings.Compare(a.id.String(), b.id.String()) })
	if r.timeNext != "" {
		i, _ := slices.BinarySearchFunc(tasks, r.timeNext, func(t *task, name string) int { return strings.Compare(t.id.String(), name) })
		tasks = append(tasks[i:], tasks[:i]...)
	}
	return tasks
}

// timeDue reports whether a commit point has time work though no record
// waits: a processing-time timer may be due, or an earlier window left due
// timers over its firing limit.
func (r *Runner) timeDue() bool {
	now := r.wallNow()
	for _, t := range r.tasks {
		if t.runs() && t.tk.commitWork(now) {
			return true
		}
	}
	return false
}

// wallNow is the wall time plugins see now, in ms since the Unix epoch
// (Options.Clock, or the real clock).
func (r *Runner) wallNow() int64 {
	if r.opts.Clock != nil {
		return r.opts.Clock().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// publishTime makes the task's time readable by TaskTimes.
func (t *task) publishTime() {
	t.proc.mu.Lock()
	t.proc.times[t.id] = TaskTime{PendingTimers: t.tk.pending, StreamTime: t.tk.stream}
	t.proc.mu.Unlock()
}
