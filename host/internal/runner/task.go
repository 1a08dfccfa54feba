package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/keymap"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// task is one processor on one input partition, or, for a co-partitioned
// processor, on partition p of every input. Its fields are used by one
// goroutine at a time: the processing goroutine during a poll, the loop
// between polls.
type task struct {
	id   TaskID
	r    *Runner
	proc *procState
	inst Processor

	// topics are the topics whose partition id.Partition the task reads:
	// id.Topic, or every input of a co-partitioned processor. Cursor i of
	// the window is topics[i]'s, index[i] its input index in the ABI
	// record.
	topics []string
	index  []uint32
	// table[i] is the store input i is written into when it is a task
	// table (-1: a stream input, handed to the plugin).
	table []int
	// win is the task's commit window: its commit positions, where its
	// batch stopped, its partitions' ends and its changelog positions.
	win window
	// failed stops the task (on_error: fail, a failed restore); the window
	// holds the offset it stopped at.
	failed error
	// storeErr is a write the task's store could not make
	// (state.ErrWriteFailed): the runner stops on it (onFailure).
	storeErr error

	calls    taskCalls    // the batch of record calls being run (calls.go)
	triggers triggerCalls // the batch of timer or commit calls being run
	staged   []*kgo.Record
	// stagedOut is the output index of each staged record; latest holds,
	// for each output that takes the latest record per key, the window's
	// records by key (latest.go).
	stagedOut []int
	latest    []keymap.Window[*kgo.Record]
	emits     arena // the staged records and their bytes
	// acct is the task's account of what the host holds for its plugin
	// (host/internal/account): charged by Emit, the state's writes and
	// the time keeper's marks, released by the commit point (commitpoint.go)
	// and close; and charged its instances' linear memory by the engine
	// (Env.Memory), released as they close.
	acct    *account.Account
	origins origins // the origins of produced records (refusal.go)

	// ver is the plugin version inst runs. prep is an instance of the
	// processor's newer version being made in the background; prevInst the
	// previous version's instance (of prevVer, the registry's version to
	// roll back to), kept during the canary window.
	ver       *version
	prep      *prepared
	prevInst  Processor
	prevVer   *versions.Version[Plugin]
	swappedAt time.Time
	// canaryIn and canaryFailed count the records the current version
	// processed, and failed, since the task switched to it.
	canaryIn, canaryFailed int64
	// sh is the task's part of its processor's shadow run (shadow.go);
	// nil when none runs.
	sh *taskShadow
	// recordCost is a moving average of the plugin time one record costs
	// the task, its timer firings and commit calls included (a record
	// that sets a timer pays for its firing): the cheapest tasks of a
	// poll are run first (processFetches). triggerTime is the plugin time
	// of the firings and commit calls since the last batch of records,
	// which that batch's records are charged (taskCalls.run). shadowTime
	// is the same for the task's shadow run (shadow.go): the candidate's
	// time on the batch's records is the task's too, run on the same
	// goroutine under the same slot of the CPU share (heavyTask), so a
	// CPU-heavy candidate makes its task heavy; 0 when no shadow runs.
	recordCost  time.Duration
	triggerTime time.Duration
	shadowTime  time.Duration
	// lastProcessed is when the last record finished; stallFrom, set at a
	// switch, is the old version's last record, for SwapStalls.
	lastProcessed time.Time
	stallFrom     time.Time
	gapFrom       time.Time // the same, at a commit point without a switch

	// st is the task's state (nil without stores). restoring is set until
	// its restore has finished and been taken in by the poll loop.
	st        *state.Task
	restoring *restoreState
	// tk is the task's time: clocks, timers (in the time store of st,
	// when the spec has one) and commit marks.
	tk *timekeeper
	// waitingSince is when the task began to wait for a lagging input
	// (zero: it is not waiting); see lagging. waitingInput is set when its
	// last batch stopped to wait, and cleared when a fetch brings any of
	// its inputs: a waiting task is not a reason to poll without waiting.
	waitingSince time.Time
	waitingInput bool
}

// startVersion is the version a new task starts with, and the time it
// counts as swapped to it. A task assigned while its version is under a
// canary is watched for the rest of the window, as if it had swapped with
// the others: unwatched, its failures would go through on_error and
// commit (a partition that moved to this member after a deploy skipped
// the failures of a version the others then rolled back).
func startVersion(c versions.Current[Plugin], now time.Time) (*version, time.Time) {
	if c.Canary.Window > 0 && c.Back != nil && now.Sub(c.Since) < c.Canary.Window {
		return newVersion(c.Active, c.Canary), c.Since
	}
	return newVersion(c.Active, versions.Canary{}), time.Time{}
}

func newTask(ctx context.Context, r *Runner, ps *procState, id TaskID) (*task, error) {
	t := &task{id: id, r: r, proc: ps, topics: ps.taskTopics(id.Topic)}
	t.ver, t.swappedAt = startVersion(r.vers.Current(ps.spec.Name), time.Now())
	t.win = newWindow(len(t.topics), len(ps.spec.Stores))
	window := ps.spec.WindowBytes
	if window <= 0 {
		window = DefaultWindowBytes
	}
	t.acct = r.opts.Memory.Open(window, &ps.Stats.HeldBytes)
	t.acct.SetMemoryGauge(&ps.Stats.InstanceBytes)
	if slices.Contains(ps.spec.Latest, true) {
		t.latest = make([]keymap.Window[*kgo.Record], len(ps.spec.Outputs))
	}
	for _, topic := range t.topics {
		t.index = append(t.index, ps.inputIndex[topic])
		store, ok := ps.tableStore[topic]
		if !ok {
			store = -1
		}
		t.table = append(t.table, store)
	}
	if len(ps.spec.Stores) > 0 {
		db := ps.spec.State
		if db == nil {
			db = r.opts.State
		}
		if r.standby != nil {
			r.standby.activate(id) // its standby here, if any, stops first
		}
		t.st = db.Task(ps.spec.Name, id.Partition, ps.spec.Stores)
		t.st.SetName(id.String()) // one task name in logs, metrics and /v1
		if ps.spec.StateCache != 0 {
			t.st.SetCacheBudget(ps.spec.StateCache)
		}
		t.st.SetDiskBudget(ps.spec.StateDisk)
		t.st.SetHold(t.hold)
	}
	if ps.spec.TimeStore && t.st != nil {
		t.tk = newTimekeeper(t.st, len(ps.spec.Stores)-1, ps.spec.TimeLimits)
		for i, name := range ps.spec.Stores[:len(ps.spec.Stores)-1] {
			e, ok := ps.spec.Expiry[name]
			t.tk.stores = append(t.tk.stores, storeInfo{name: name, expiry: e.TTL > 0})
			if ok && e.TTL > 0 {
				_ = t.st.SetExpiry(i, e) // i is in range
			}
		}
	} else {
		t.tk = newTimekeeper(nil, -1, ps.spec.TimeLimits)
	}
	t.tk.hold = t.hold
	ictx, done := r.untilStop(ctx) // a stopping runner does not wait for an init
	inst, err := t.ver.Plugin.Instantiate(ictx, id, t.env())
	done()
	if err != nil {
		if t.st != nil {
			_ = t.st.Close()
		}
		t.acct.Close()
		return nil, fmt.Errorf("task %s: starting plugin: %w", id, err)
	}
	t.inst = inst
	r.startedSlowly(ps, id, t.ver.ID, inst)
	t.setEntryLimits()
	ps.setTaskVersion(r.vers, id, t.ver)
	if t.st != nil {
		r.startRestore(t)
	}
	return t, nil
}

// env is what the task gives an instance of its processor.
func (t *task) env() Env { return Env{Sink: t, State: t.st, Time: t.tk, Memory: t.acct} }

// close ends the task: its restore is stopped, staged state that was not
// applied is dropped (never written), the plugin instance is closed.
func (t *task) close(ctx context.Context) {
	t.stopRestore()
	// A partition paused for holding too many records must not stay
	// paused for its next task (pauses outlive assignments).
	for in, topic := range t.topics {
		if t.win.in(in).heldFull {
			t.r.cl.ResumeFetchPartitions(map[string][]int32{topic: {t.id.Partition}})
		}
	}
	if t.failed != nil {
		t.proc.Stats.StoppedTasks.Add(-1) // no longer this process's
	}
	t.discardPrepared(ctx)
	t.closePrev(ctx)
	t.closeShadow(ctx)
	t.proc.setTaskVersion(t.r.vers, t.id, nil)
	t.proc.mu.Lock()
	for _, topic := range t.topics {
		delete(t.proc.lag, TaskID{Processor: t.id.Processor, Topic: topic, Partition: t.id.Partition})
	}
	delete(t.proc.times, t.id)
	t.proc.mu.Unlock()
	if t.st != nil {
		_ = t.st.Close()
		if t.r.standby != nil {
			t.r.standby.deactivate(t.id)
		}
	}
	t.acct.Close() // nothing it staged will be committed by this task
	if t.inst != nil {
		if err := t.inst.Close(ctx); err != nil {
			t.r.log.Warn("closing plugin instance", "task", t.id.String(), "err", err)
		}
		t.inst = nil
	}
}

// Emit implements Sink: it validates and copies one emitted record into the
// record's staging area. Staged records are produced only if the record
// succeeds.
func (t *task) Emit(output int, rec *abi.Record) error {
	outs := t.proc.spec.Outputs
	if output < 0 || output >= len(outs) {
		return abi.ErrnoNoOutput
	}
	kr := t.emits.record()
	kr.Topic, kr.Partition = outs[output], rec.Partition
	kr.Key, kr.Value = t.emits.copyOf(rec.Key), t.emits.copyOf(rec.Value)
	if rec.Timestamp != 0 {
		kr.Timestamp = time.UnixMilli(rec.Timestamp)
	}
	// The plugin's headers, then the version that produced the record
	// unless the topic is internal.
	versioned := output >= len(t.proc.spec.Internal) || !t.proc.spec.Internal[output]
	switch {
	case len(rec.Headers) == 0 && versioned:
		kr.Headers = t.ver.headers
	case len(rec.Headers) > 0:
		kr.Headers = make([]kgo.RecordHeader, len(rec.Headers), len(rec.Headers)+1)
		for i, h := range rec.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key}
			if len(h.Value) > 0 { // an empty value goes out null, as it always has
				kr.Headers[i].Value = t.emits.copyOf(h.Value)
			}
		}
		if versioned {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: HeaderVersion, Value: t.ver.header})
		}
	}
	var lim TopicLimit
	if lims := t.proc.limits; output < len(lims) {
		lim = lims[output]
	}
	if err := lim.check(kr, t.tk.wall); err != nil {
		return fmt.Errorf("topic %s: %w", outs[output], err)
	}
	if err := t.hold(emitHeld(rec)); err != nil {
		return err
	}
	t.staged = append(t.staged, kr)
	t.stagedOut = append(t.stagedOut, output)
	return nil
}

// emitOverhead is what a staged emit holds beyond its bytes: the record
// struct, its headers slice, the client's bookkeeping until it is
// acknowledged.
const emitOverhead = 256

// emitHeld is what the host holds for an emitted record until its commit
// window ends: its key, value and header bytes (copied from the plugin's
// memory) and emitOverhead.
func emitHeld(rec *abi.Record) int {
	n := len(rec.Key) + len(rec.Value) + emitOverhead
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// hold charges n bytes staged by the current call to the task's account.
// Past its hard cap or the process's budget the error wraps
// abi.ErrnoLimit: the plugin gets ELIMIT and the record fails (limit
// exceeded), as at a per-record limit.
func (t *task) hold(n int) error {
	if err := t.acct.Charge(n); err != nil {
		return fmt.Errorf("task %s: %w: %w", t.id, err, abi.ErrnoLimit)
	}
	return nil
}

// processBatch processes the task's records of one poll: batch[i] are its
// i-th input partition's, in offset order. Records of several inputs run
// in timestamp order (the oldest head first; ties go to the lower input),
// so a co-partitioned task sees its inputs interleaved as they happened;
// it stops when an input it needs is not in the poll (lagging). It returns how many records it finished
// (processed, skipped or dead-lettered, or the one that stopped the task)
// and a fatal error, if any. It stops early when ctx is canceled, and at
// the first record boundary after deadline once it has finished a record
// (so every task that starts moves; processFetches starts a task past the
// deadline only among the first slots' worth): records not reached are not
// counted and stay held for the next poll.
func (t *task) processBatch(ctx context.Context, deadline time.Time) (int, error) {
	done := 0
	// batch[i] is what input i holds; what is left of it stays held.
	batch := make([][]*kgo.Record, len(t.topics))
	for i := range batch {
		batch[i] = t.win.in(i).held
	}
	defer func() {
		for i := range batch {
			if in := t.win.in(i); len(batch[i]) != len(in.held) {
				in.setHeld(batch[i])
			}
		}
	}()
	// stopAll marks the first record not reached on every input.
	stopAll := func() {
		for i, recs := range batch {
			if len(recs) > 0 {
				t.win.in(i).stopAt(recs[0].Offset)
			}
		}
	}
	if t.restoring != nil {
		// Fetching is paused while the task restores, so records can only
		// be here if they were fetched before the pause took effect. They
		// are not processed on incomplete state: they wait, held.
		return 0, nil
	}
	// The time store is read once the state is restored: the stream time
	// a record moves must start from the committed one.
	if err := t.tk.load(); err != nil {
		stopAll()
		return 0, fmt.Errorf("task %s: %w", t.id, err)
	}
	if err := t.tk.checkFormats(); err != nil {
		t.stop(fmt.Errorf("task %s: %w", t.id, err))
		for i, recs := range batch {
			if len(recs) > 0 {
				t.win.in(i).failed(recs[0].Offset)
			}
		}
		t.r.cl.PauseFetchPartitions(t.partitions())
		t.r.log.Error("task stopped: its stores do not match the config", "task", t.id.String(), "err", err)
		return 0, nil
	}
	// The stores in the layout of the version that runs (migrate.go).
	if ok, err := t.settleVersion(ctx); err != nil {
		stopAll()
		return 0, err
	} else if !ok {
		for i, recs := range batch {
			if len(recs) > 0 {
				t.win.in(i).failed(recs[0].Offset)
			}
		}
		return 0, nil
	}
	// The records go to the plugin in batches of calls (calls.go), built
	// in the order they run; pos[i] is how many of input i's records the
	// loop has taken, and batch[i] what is left of them. Records a batch
	// did not run go back.
	orig := slices.Clone(batch)
	pos := make([]int, len(batch))
	take := func(in int) { pos[in]++; batch[in] = orig[in][pos[in]:] }
	c := &t.calls
	sh := t.shadowFor(ctx)
	for {
		c.reset(t)
		c.shadow = sh
		for len(c.calls) < maxCalls {
			in := t.nextInput(batch)
			if in < 0 {
				break
			}
			if len(c.calls) > 0 {
				// The conditions below apply between records: run what
				// is taken first, then look again.
				if t.table[in] >= 0 || t.lagging(batch) {
					break
				}
			} else {
				if t.lagging(batch) {
					// An input with records on the broker that this poll
					// did not bring: its next record may be older than
					// any here. Wait for it, the records held (bounded by
					// maxInputWait).
					t.waitingInput = true
					return done, nil
				}
				if t.failed != nil {
					// Never count a record past the failed one.
					stopAll()
					t.win.stopAtFailure()
					return done, nil
				}
				if ctx.Err() != nil {
					return done, nil
				}
				// lastProcessed is when the previous batch of this poll
				// ended (done > 0): every task that starts moves. The
				// records not reached stay held for the next window.
				if done > 0 && !t.lastProcessed.Before(deadline) {
					t.proc.Stats.Cuts.Add(1)
					return done, nil
				}
				// The commit point comes forward for what the host holds
				// (commitPoint.heavy): the records wait, held.
				if done > 0 && t.r.cp.heavy(t) {
					return done, nil
				}
			}
			kr := batch[in][0]
			take(in)
			cur := t.win.in(in)
			if !cur.take(kr.Offset) {
				continue // already processed (a re-fetch after a rewind)
			}
			if store := t.table[in]; store >= 0 {
				// A task table's record is the host's own write, a call of
				// its own (the batch is empty: see above).
				if err := t.writeTable(kr, store); err != nil && !t.onFailure(kr, err) {
					if t.storeErr != nil {
						return done, t.storeErr
					}
					stopAll()
					cur.failed(kr.Offset)
					done++ // see the plugin's failures below
					return done, nil
				}
				cur.processed(kr.Offset, kr.LeaderEpoch)
				done++
				if t.tk.eventDue() {
					if err := t.check(ctx, false, &callBudget{deadline: deadline}); err != nil {
						return done, err
					}
				}
				continue
			}
			c.add(kr, in)
			if t.tk.eventDueAt(c.recs[len(c.calls)-1].Timestamp) {
				break // the check runs after this record (End stops there)
			}
		}
		if len(c.calls) == 0 {
			return done, nil
		}
		if sh != nil && t.sh == sh {
			t.shadowBefore(ctx, c)
		}
		n := c.run(ctx, deadline)
		if sh != nil && t.sh == sh {
			t.shadowAfter(c, n, c.took)
		}
		for k := len(c.calls) - 1; k >= n; k-- {
			in := c.ins[k] // not run: back to its input, in order
			pos[in]--
			batch[in] = orig[in][pos[in]:]
		}
		done += n
		switch c.stop {
		case stopFailed:
			if t.storeErr != nil {
				return done, t.storeErr
			}
			stopAll() // the other inputs' records not reached
			// The failed record counts as finished for the commit
			// schedule only (its offset does not move): the window must
			// still reach its commit point though no record of it
			// succeeded, to end the transaction its poll opened and to
			// judge a canary (a new version failing every task's first
			// record would otherwise leave the loop polling paused
			// partitions).
			t.win.in(c.ins[c.at]).failed(c.krs[c.at].Offset)
			return done, nil
		case stopForward:
			return done, nil
		case stopTimers:
			// The record moved the stream time: the event-time check
			// (ABI.md section 8.3).
			if err := t.check(ctx, false, &callBudget{deadline: deadline}); err != nil {
				return done, err
			}
		}
		if n == 0 {
			return done, nil // canceled before the first call
		}
	}
}

// maxInputWait bounds how long a task of several inputs waits for an input
// that lags (lagging); past it the task goes on without that input's
// records until a fetch shows the input again. Kafka Streams waits the
// same way for data the broker has (max.task.idle.ms 0), without a bound.
const maxInputWait = time.Second

// lagging reports whether the task must stop before its next record
// because one of its inputs has no record left in this poll's batch but is
// not caught up: the broker holds records of it not fetched yet, or
// nothing is known of it since the task started. Records run in timestamp
// order across inputs only if every input's next record is in view (as
// Kafka Streams does): otherwise a burst fetched for one input (after a
// restart, say) would move the stream time past records of another input
// still on the broker, and a join would find them late. A task waits at
// most maxInputWait for a lagging input, then marks it waited out and goes
// on until a fetch shows it again. A task of one input never waits.
func (t *task) lagging(batch [][]*kgo.Record) bool {
	if len(batch) < 2 {
		return false
	}
	lag := false
	for i, recs := range batch {
		c := t.win.in(i)
		if len(recs) == 0 && !c.caughtUp() && !c.waitedOut {
			lag = true
		}
	}
	if !lag {
		t.waitingSince = time.Time{}
		return false
	}
	now := time.Now()
	if t.waitingSince.IsZero() {
		t.waitingSince = now
	}
	if now.Sub(t.waitingSince) < maxInputWait {
		return true
	}
	for i, recs := range batch {
		if c := t.win.in(i); len(recs) == 0 && !c.caughtUp() {
			c.waitedOut = true
		}
	}
	t.waitingSince = time.Time{}
	t.proc.Stats.InputWaits.Add(1)
	t.r.log.Info("a task of several inputs stopped waiting for a lagging input; its records are processed as they come",
		"task", t.id.String(), "waited", maxInputWait)
	return false
}

// nextInput is the input whose first record runs next: the oldest by
// timestamp; on a tie a task table's record before a stream input's (a
// row stamped t is in effect for a record of time t, as Kafka Streams'
// versioned lookups take the latest row at or before the record's time),
// then the lower input; -1 when every input is done.
func (t *task) nextInput(batch [][]*kgo.Record) int {
	best := -1
	for i, recs := range batch {
		if len(recs) == 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		ts, bestTS := recs[0].Timestamp, batch[best][0].Timestamp
		if ts.Before(bestTS) || ts.Equal(bestTS) && t.table[i] >= 0 && t.table[best] < 0 {
			best = i
		}
	}
	return best
}

// partitions are the task's input partitions, for pausing and resuming.
func (t *task) partitions() map[string][]int32 {
	parts := make(map[string][]int32, len(t.topics))
	for _, topic := range t.topics {
		parts[topic] = []int32{t.id.Partition}
	}
	return parts
}

// endCall ends a call into the plugin (a record, a timer, a commit call),
// which is atomic (ABI.md section 3): if it succeeded (ok), its state
// writes and time changes join the commit window and its emits are
// produced; if not, all of them are dropped.
func (t *task) endCall(ok bool, key originKey) {
	if t.st != nil {
		if ok {
			t.st.CommitRecord()
		} else {
			t.st.AbortRecord()
		}
	}
	t.tk.endCall(ok)
	if ok && len(t.staged) > 0 {
		// The call's records carry it as their origin, for the broker's
		// refusal of one (refusal.go).
		o := t.origins.new(key, false)
		produced := 0
		for k, out := range t.staged {
			out.Context = o
			if t.keepLatest(t.stagedOut[k], out) {
				continue
			}
			t.r.cp.produce(out)
			produced++
		}
		t.proc.Stats.RecordsOut.Add(int64(produced))
	}
	clear(t.staged) // the arena's chunks are not kept alive by the slice
	t.staged, t.stagedOut = t.staged[:0], t.stagedOut[:0]
}

// onFailure applies the processor's error policy to a failed record and
// reports whether processing moves past it.
func (t *task) onFailure(kr *kgo.Record, err error) bool {
	if errors.Is(err, state.ErrWriteFailed) {
		// Not the record's failure: its store cannot be written (a full
		// or failing disk, state/failure.go). on_error must not skip it
		// or dead-letter it: processBatch returns the error and the
		// runner stops, nothing of the window committed; the host
		// reopens the database and a new runner processes the record
		// again.
		t.storeErr = fmt.Errorf("task %s: record %s/%d@%d: %w", t.id, kr.Topic, kr.Partition, kr.Offset, err)
		return false
	}
	stats := t.proc.Stats
	kind := failureKind(err)
	stats.failure(kind)
	attrs := []any{"task", t.id.String(), "topic", kr.Topic, "partition", kr.Partition, "offset", kr.Offset, "kind", kind.String(), "err", err}
	switch t.proc.spec.OnError {
	case Skip:
		stats.Skipped.Add(1)
		t.r.log.Warn("record failed; skipped (on_error: skip)", attrs...)
		return true
	case DeadLetter:
		dlerr := t.produceDeadLetter(t.deadLetter(kr, kind, err), recordOrigin(t.proc.spec.Name, kr), err)
		if dlerr == nil {
			stats.DeadLettered.Add(1)
			t.r.log.Warn("record failed; sent to dead-letter topic "+t.proc.spec.DeadLetterTopic, attrs...)
			return true
		}
		err = fmt.Errorf("%w; and it cannot be dead-lettered: %w", err, dlerr)
		attrs[len(attrs)-1] = err
		fallthrough
	default:
		t.stop(fmt.Errorf("record %s/%d@%d failed: %w", kr.Topic, kr.Partition, kr.Offset, err))
		t.r.cl.PauseFetchPartitions(t.partitions())
		t.r.log.Error("record failed; task stopped at this offset (on_error: fail)", attrs...)
		return false
	}
}

// produceDeadLetter produces dl, the dead letter of the failure err of the
// call key, unless the dead-letter topic would refuse it (its limits, or
// the broker refused it on a former pass): then nothing is produced, and
// the error says why.
func (t *task) produceDeadLetter(dl *kgo.Record, key originKey, err error) error {
	refused, _ := t.r.refused.get(key)
	if refused.deadLetter != nil {
		return refused.deadLetter
	}
	lerr := t.proc.deadLetterLimit.check(dl, t.tk.wall)
	if refused.restamp || errors.Is(lerr, abi.ErrnoTimestamp) {
		// The failed record's timestamp (the refused emit's, often) need
		// not stop its dead letter: it goes in a header instead.
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderSourceTime, Value: []byte(strconv.FormatInt(dl.Timestamp.UnixMilli(), 10))})
		dl.Timestamp = time.Time{}
		lerr = t.proc.deadLetterLimit.check(dl, t.tk.wall)
	}
	if lerr != nil {
		return fmt.Errorf("topic %s: %w", dl.Topic, lerr)
	}
	dl.Context = t.origins.new(key, true)
	t.r.cp.produce(dl)
	return nil
}

// produceChangelog sends one changelog record per key the task changed
// since the last commit point, to the task's partition of each store's
// changelog, and records the acknowledged positions for the checkpoint.
func (t *task) produceChangelog() {
	if t.st == nil || t.restoring != nil {
		// A restoring task's store belongs to its restore's goroutine
		// (restoring.go), and holds no window.
		return
	}
	for _, c := range t.st.Dirty() {
		store := c.Store
		if t.isTable(store) {
			continue // a task table: its topic is its changelog
		}
		rec := &kgo.Record{
			Topic:     t.proc.spec.Changelogs[store],
			Partition: t.id.Partition,
			Key:       c.Key,
			Value:     c.Value,
		}
		if c.Delete {
			rec.Value = nil // a tombstone: compaction removes the key
		}
		rec.Context = changelogOrigin // a refusal of it is a record's (refusal.go)
		t.r.cl.Produce(context.Background(), rec, func(rec *kgo.Record, err error) {
			if err != nil {
				t.r.cp.onProduced(rec, err)
				return
			}
			t.win.changelogAcked(store, rec.Offset)
		})
	}
}

// applyState writes the task's changes of this commit window to the local
// store together with each changed store's new changelog checkpoint, in one
// atomic batch (I3). Called only after the changelog records were
// acknowledged; the checkpoint is the offset after the last of them.
func (t *task) applyState() error {
	if t.st == nil || t.restoring != nil {
		return nil // see produceChangelog
	}
	if err := t.st.Apply(t.win.takeCheckpoints()); err != nil {
		return fmt.Errorf("task %s: applying state: %w", t.id, err)
	}
	return nil
}

// Dead-letter headers name where the record came from and why it failed.
const (
	HeaderErrorKind   = "wasmstream-error-kind"
	HeaderError       = "wasmstream-error"
	HeaderProcessor   = "wasmstream-processor"
	HeaderSourceTopic = "wasmstream-source-topic"
	HeaderSourcePart  = "wasmstream-source-partition"
	HeaderSourceOff   = "wasmstream-source-offset"
	// HeaderSourceTime is the failed record's timestamp (decimal unix ms)
	// on a dead letter stamped with the time it was written instead,
	// because the dead-letter topic refuses the record's own (Kafka 4
	// refuses timestamps over an hour ahead by default).
	HeaderSourceTime = "wasmstream-source-timestamp"
)

func (t *task) deadLetter(kr *kgo.Record, kind FailureKind, err error) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(kr.Headers)+7)
	hs = append(hs, kr.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderErrorKind, Value: []byte(kind.String())},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(err.Error())},
		kgo.RecordHeader{Key: HeaderProcessor, Value: []byte(t.proc.spec.Name)},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(kr.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePart, Value: []byte(strconv.Itoa(int(kr.Partition)))},
		kgo.RecordHeader{Key: HeaderSourceOff, Value: []byte(strconv.FormatInt(kr.Offset, 10))},
		kgo.RecordHeader{Key: HeaderVersion, Value: t.ver.header},
	)
	return &kgo.Record{
		Topic:     t.proc.spec.DeadLetterTopic,
		Partition: -1,
		Key:       kr.Key,
		Value:     kr.Value,
		Headers:   hs,
		Timestamp: kr.Timestamp,
	}
}

// setLag records the lag of the task's i-th input partition after a fetch
// (see cursor.lag).
func (t *task) setLag(i int, end, fetched int64) {
	lag, ok := t.win.in(i).lag(end, fetched)
	if !ok {
		return
	}
	t.proc.mu.Lock()
	t.proc.lag[TaskID{Processor: t.id.Processor, Topic: t.topics[i], Partition: t.id.Partition}] = lag
	t.proc.mu.Unlock()
}

// stop stops the task at err (on_error: fail, a failed restore): it
// processes nothing more until it is closed (its partition moves) or a
// rollback takes the failure back.
func (t *task) stop(err error) {
	if t.failed == nil {
		t.proc.Stats.FailedTasks.Add(1)
		t.proc.Stats.StoppedTasks.Add(1)
	}
	t.failed = err
}

// isTable reports whether store is one of the task's tables.
func (t *task) isTable(store int) bool {
	return slices.Contains(t.table, store)
}

// writeTable writes a task table's record into its store, a call of its
// own (atomic, in the commit window like a record's writes): the latest
// value per key, a null value deleting the key; a record without a key is
// skipped, as Kafka Streams does. A record below the store's checkpoint is
// already in the store (re-delivered after an at_least_once crash between
// the state and the offset commit) and is skipped too. The record moves
// the stream time like any other of the task's inputs. The store's
// checkpoint for the commit point is the offset after the record: the
// topic is the table's changelog.
func (t *task) writeTable(kr *kgo.Record, store int) error {
	cp, ok, err := t.st.Checkpoint(store)
	if err != nil {
		return fmt.Errorf("task table %s: %w", kr.Topic, err)
	}
	if kr.Key == nil || (ok && kr.Offset < cp) {
		return nil
	}
	t.tk.observe(kr.Timestamp.UnixMilli())
	if kr.Value == nil {
		err = t.st.Delete(store, kr.Key)
	} else {
		err = t.st.Put(store, kr.Key, kr.Value)
	}
	if err != nil {
		t.st.AbortRecord()
		return fmt.Errorf("task table %s: writing record %d: %w", kr.Topic, kr.Offset, err)
	}
	t.st.CommitRecord()
	t.win.changelogAcked(store, kr.Offset)
	return nil
}
