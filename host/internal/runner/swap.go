package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderVersion names, on every output and dead-letter record, the
// processor version that produced it.
const HeaderVersion = "wasmstream-version"

// Version is one version of a processor's plugin.
type Version struct {
	// ID names the version in the HeaderVersion header, logs and metrics;
	// unique per content (e.g. "v2@1a2b3c4d5e6f").
	ID     string
	Plugin Plugin
}

// Canary watches a newly swapped version: if, within Window after a task
// switched to it, the share of its records that failed exceeds
// MaxFailureRatio (with at least MinRecords records seen), the task's
// processor goes back to the previous version. Under exactly_once the
// transaction holding the failures is aborted, so the rolled-back version
// leaves no committed output from it and its records are processed again
// by the previous version.
type Canary struct {
	Window          time.Duration
	MaxFailureRatio float64
	MinRecords      int
}

// RollbackEvent reports an automatic rollback.
type RollbackEvent struct {
	Processor string
	From, To  string // version IDs
	Reason    string
}

// version is a Version as the runner tracks it.
type version struct {
	Version
	header []byte // ID, the value of HeaderVersion
	// headers is the header list of an emit without headers of its own,
	// shared by all such records (read-only; len = cap = 1, so an append
	// would copy): no allocation per record for it.
	headers []kgo.RecordHeader
	prev    *version // what a rollback returns to; nil for the first
	canary  Canary
}

func newVersion(v Version, prev *version, canary Canary) *version {
	h := []byte(v.ID)
	return &version{Version: v, header: h, headers: []kgo.RecordHeader{{Key: HeaderVersion, Value: h}},
		prev: prev, canary: canary}
}

// swapRequest is a pending Swap, taken in by the loop at a commit point.
type swapRequest struct {
	v      Version
	canary Canary
}

// prepared is an instance of a task's next version made in the background,
// so that the switch itself only exchanges two pointers.
type prepared struct {
	ver  *version
	inst Processor
	err  error
	done chan struct{}
}

// Swap makes processor run v: every task of the processor in this process
// switches at its next commit point, after an instance of v has been made
// for it in the background. Under exactly_once a switch never splits a
// transaction: a task's records of one transaction are all processed by one
// version, and within a partition versions never interleave. State is
// untouched. With a non-zero canary.Window the new version is watched (see
// Canary). Swap returns at once; it is safe for concurrent use.
func (r *Runner) Swap(processor string, v Version, canary Canary) error {
	for _, ps := range r.procs {
		if ps.spec.Name == processor {
			ps.mu.Lock()
			ps.want = &swapRequest{v: v, canary: canary}
			ps.mu.Unlock()
			r.wakeLoop()
			return nil
		}
	}
	return fmt.Errorf("runner: no processor %q", processor)
}

// ActiveVersion is the version processor's new tasks start with, and the
// one each of its current tasks runs, by task.
func (r *Runner) ActiveVersion(processor string) (active string, tasks map[TaskID]string) {
	for _, ps := range r.procs {
		if ps.spec.Name != processor {
			continue
		}
		ps.mu.Lock()
		defer ps.mu.Unlock()
		tasks = make(map[TaskID]string, len(ps.taskVersions))
		for id, v := range ps.taskVersions {
			tasks[id] = v
		}
		return ps.activeID, tasks
	}
	return "", nil
}

// SwapStalls returns, for the named processor, the latest per-task stalls
// of its swaps: the time from the last record the old version processed to
// the first the new one processed, in the same task (at most 4096 samples).
// gaps are the same measure across commit points without a switch: the
// pause any commit point makes, which a swap's stall includes.
func (r *Runner) SwapStalls(processor string) (stalls, gaps []time.Duration) {
	for _, ps := range r.procs {
		if ps.spec.Name == processor {
			stalls, _, _ = ps.stalls.snapshot()
			gaps, _, _ = ps.gaps.snapshot()
			return stalls, gaps
		}
	}
	return nil, nil
}

func (r *Runner) wakeLoop() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// setTaskVersion records the version a task runs, for ActiveVersion.
func (ps *procState) setTaskVersion(id TaskID, v *version) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if v == nil {
		delete(ps.taskVersions, id)
		return
	}
	ps.taskVersions[id] = v.ID
}

// advanceSwaps moves tasks to their processor's wanted version. Called by
// the loop, under r.mu, only at a commit point: no transaction open and no
// processed record waiting for a commit. A task switches once an instance
// of the new version is ready; until then it goes on with the old one.
func (r *Runner) advanceSwaps(ctx context.Context) {
	if r.committer.open() || r.sinceCommit != 0 {
		return
	}
	for _, ps := range r.procs {
		ps.mu.Lock()
		req := ps.want
		ps.want = nil
		ps.mu.Unlock()
		if req != nil && req.v.ID != ps.active.ID {
			nv := newVersion(req.v, ps.active, req.canary)
			r.log.Info("swapping processor version", "processor", ps.spec.Name, "from", ps.active.ID, "to", nv.ID)
			ps.active = nv
			ps.mu.Lock()
			ps.activeID = nv.ID
			ps.mu.Unlock()
		}
	}
	now := time.Now()
	for _, t := range r.tasks {
		ps := t.proc
		if t.ver != ps.active {
			if t.prep == nil || t.prep.ver != ps.active {
				t.discardPrepared(ctx)
				t.prep = r.prepare(t, ps.active)
			}
			select {
			case <-t.prep.done:
				t.switchTo(ctx, now)
			default:
			}
		}
		if t.stallFrom.IsZero() && !t.lastProcessed.IsZero() {
			t.gapFrom = t.lastProcessed
		}
		if t.prevInst != nil && now.Sub(t.swappedAt) >= t.ver.canary.Window {
			// The canary window is over: the version stays.
			_ = t.prevInst.Close(ctx)
			t.prevInst = nil
		}
	}
}

// prepare instantiates v for t in the background and wakes the loop when
// the instance is ready. An instance only stores its task's sink and state
// until its first Process (the engine refuses state access during init),
// so making it concurrently with the task's processing is safe.
func (r *Runner) prepare(t *task, v *version) *prepared {
	p := &prepared{ver: v, done: make(chan struct{})}
	go func() {
		p.inst, p.err = v.Plugin.Instantiate(context.Background(), t.id, t, t.st)
		// done first: the loop, woken, must find the instance ready (an
		// idle loop would otherwise wait in its poll for the next record).
		close(p.done)
		r.wakeLoop()
	}()
	return p
}

// switchTo makes the prepared instance the task's; the old one is kept
// while the new version is in its canary window (for an instant rollback)
// and closed otherwise.
func (t *task) switchTo(ctx context.Context, now time.Time) {
	p := t.prep
	t.prep = nil
	if p.err != nil {
		t.r.log.Error("new plugin version does not start for this task; it keeps the old one",
			"task", t.id.String(), "version", p.ver.ID, "err", p.err)
		t.proc.Stats.SwapFailures.Add(1)
		// Not retried until the next Swap: the same bytes would fail again.
		t.proc.active = t.ver
		t.proc.mu.Lock()
		t.proc.activeID = t.ver.ID
		t.proc.mu.Unlock()
		return
	}
	old, oldVer := t.inst, t.ver
	t.inst, t.ver = p.inst, p.ver
	if t.prevInst != nil {
		_ = t.prevInst.Close(ctx)
		t.prevInst = nil
	}
	if t.ver.canary.Window > 0 && t.ver.prev == oldVer {
		t.prevInst = old
	} else if old != nil {
		_ = old.Close(ctx)
	}
	t.swappedAt = now
	t.canaryIn, t.canaryFailed = 0, 0
	t.stallFrom = t.lastProcessed
	t.proc.Stats.Swaps.Add(1)
	t.proc.setTaskVersion(t.id, t.ver)
	t.r.log.Info("task switched plugin version", "task", t.id.String(), "from", oldVer.ID, "to", t.ver.ID)
}

// discardPrepared closes an instance prepared for a version the task no
// longer goes to.
func (t *task) discardPrepared(ctx context.Context) {
	if t.prep == nil {
		return
	}
	p := t.prep
	t.prep = nil
	go func() {
		<-p.done
		if p.inst != nil {
			_ = p.inst.Close(ctx)
		}
	}()
}

// canaryFailed reports the tasks whose version failed its canary: more
// failed records than the ratio allows within the window.
func (r *Runner) failedCanaries() []*task {
	var bad []*task
	now := time.Now()
	for _, t := range r.tasks {
		c := t.ver.canary
		if t.ver.prev == nil || c.Window == 0 || now.Sub(t.swappedAt) > c.Window+r.opts.CommitInterval {
			continue
		}
		if t.canaryFailed == 0 || t.canaryIn < int64(max(c.MinRecords, 1)) {
			continue
		}
		if float64(t.canaryFailed)/float64(t.canaryIn) > c.MaxFailureRatio {
			bad = append(bad, t)
		}
	}
	return bad
}

// rollBack returns the processors of the failed tasks to their previous
// version, in every task of this process, at once: the caller has just
// aborted (exactly_once) or committed (at_least_once) the work since the
// last commit point, so this is a commit point. Each rollback is reported
// through Options.OnRollback so the fleet can follow.
func (r *Runner) rollBack(ctx context.Context, failed []*task) {
	seen := map[*procState]bool{}
	for _, ft := range failed {
		ps := ft.proc
		if seen[ps] {
			continue
		}
		seen[ps] = true
		bad := ft.ver
		back := bad.prev
		if ps.active == bad {
			ps.active = back
			ps.mu.Lock()
			ps.activeID = back.ID
			ps.mu.Unlock()
		}
		reason := fmt.Sprintf("%d of %d records failed within %s of the swap (limit %.2f%%)",
			ft.canaryFailed, ft.canaryIn, bad.canary.Window, 100*bad.canary.MaxFailureRatio)
		r.log.Warn("new plugin version failed its canary; rolling back", "processor", ps.spec.Name,
			"from", bad.ID, "to", back.ID, "reason", reason)
		ps.Stats.Rollbacks.Add(1)
		for _, t := range r.tasks {
			if t.proc != ps || t.ver != bad {
				continue
			}
			t.discardPrepared(ctx)
			inst := t.prevInst
			t.prevInst = nil
			if inst == nil {
				var err error
				if inst, err = back.Plugin.Instantiate(ctx, t.id, t, t.st); err != nil {
					r.log.Error("previous version does not start for this task; it is stopped", "task", t.id.String(), "err", err)
					t.stop(fmt.Errorf("rolling back to %s: %w", back.ID, err))
					continue
				}
			}
			_ = t.inst.Close(ctx)
			t.inst, t.ver = inst, back
			t.swappedAt = time.Now()
			t.canaryIn, t.canaryFailed = 0, 0
			if t.failed != nil {
				// Stopped by on_error: fail on a record of the bad version:
				// the previous version gets the record again.
				t.failed = nil
				ps.Stats.StoppedTasks.Add(-1)
				r.cl.ResumeFetchPartitions(map[string][]int32{t.id.Topic: {t.id.Partition}})
			}
			ps.setTaskVersion(t.id, back)
		}
		if r.opts.OnRollback != nil {
			ev := RollbackEvent{Processor: ps.spec.Name, From: bad.ID, To: back.ID, Reason: reason}
			go r.opts.OnRollback(ev)
		}
	}
}

// stallSamples is commitSamples under another name: per-task swap stalls.
type stallSamples = commitSamples
