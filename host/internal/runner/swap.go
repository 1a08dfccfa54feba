package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// HeaderVersion names, on every output and dead-letter record, the
// processor version that produced it.
const HeaderVersion = "wasmstream-version"

// Versions is the registry the runner reads its processors' versions
// from and records its tasks' versions in (see package versions).
type Versions = versions.Registry[Plugin]

// RollbackEvent reports an automatic rollback.
type RollbackEvent struct {
	Processor string
	From, To  string // version IDs
	Reason    string
}

// NewVersions returns an empty version registry whose released versions
// are closed (Plugin.Close): the registry of a host, shared with its
// control-topic follower.
func NewVersions() *Versions {
	return versions.New(func(p Plugin) {
		if p != nil {
			_ = p.Close(context.Background())
		}
	})
}

// version is a registry version as a task runs it.
type version struct {
	*versions.Version[Plugin]
	// canary is the watch the task runs it under: the registry's watch of
	// the active version when the task switched to it; zero for a version
	// a task started with or was rolled back to.
	canary versions.Canary
	header []byte // ID, the value of HeaderVersion
	// headers is the header list of an emit without headers of its own,
	// shared by all such records of the task (read-only; len = cap = 1, so
	// an append would copy): no allocation per record for it.
	headers []kgo.RecordHeader
}

func newVersion(v *versions.Version[Plugin], canary versions.Canary) *version {
	h := []byte(v.ID)
	return &version{Version: v, canary: canary, header: h, headers: []kgo.RecordHeader{{Key: HeaderVersion, Value: h}}}
}

// prepared is an instance of a task's next version made in the background,
// so that the switch itself only exchanges two pointers.
type prepared struct {
	ver  *version
	inst Processor
	err  error
	// slow is set when the instance's start ran long (startedSlowly).
	slow bool
	done chan struct{}
}

// startTimer is a Processor that says how long its start took, and
// whether that was long for its budget (the engine's instances).
type startTimer interface {
	StartTime() (took time.Duration, long bool)
}

// startedSlowly reports whether inst's start (its init) ran long, counting
// and logging it: every task start of the version, and every replacement
// of an instance the engine does not restore from a snapshot, waits that
// long. Safe on any goroutine.
func (r *Runner) startedSlowly(ps *procState, id TaskID, ver string, inst Processor) bool {
	st, ok := inst.(startTimer)
	if !ok {
		return false
	}
	took, long := st.StartTime()
	if long {
		ps.Stats.SlowStarts.Add(1)
		r.log.Warn("a plugin instance's start (init) ran long, over half its budget", "task", id.String(), "version", ver, "took", took)
	}
	return long
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

// setTaskVersion records the version a task runs in the registry (nil:
// the task is gone).
func (ps *procState) setTaskVersion(reg *Versions, id TaskID, v *version) {
	if v == nil {
		reg.SetTask(ps.spec.Name, id.String(), nil)
		return
	}
	reg.SetTask(ps.spec.Name, id.String(), v.Version)
}

// advanceSwaps moves tasks to their processor's wanted version. Called by
// the loop, under r.mu, only at a commit point: no transaction open and no
// processed record waiting for a commit. A task switches once an instance
// of the new version is ready; until then it goes on with the old one.
func (r *Runner) advanceSwaps(ctx context.Context) {
	if r.cp.holds() {
		return
	}
	cur := make(map[*procState]versions.Current[Plugin], len(r.procs))
	for _, ps := range r.procs {
		if from, to := r.vers.TakePending(ps.spec.Name); to != nil {
			r.log.Info("swapping processor version", "processor", ps.spec.Name, "from", from.ID, "to", to.ID)
		}
		cur[ps] = r.vers.Current(ps.spec.Name)
	}
	now := time.Now()
	for _, t := range r.tasks {
		c := cur[t.proc]
		if t.ver.Version != c.Active {
			if t.prep == nil || t.prep.ver.Version != c.Active {
				t.discardPrepared(ctx)
				t.prep = r.prepare(t, newVersion(c.Active, c.Canary))
			}
			select {
			case <-t.prep.done:
				t.switchTo(ctx, now, c.Back)
			default:
			}
		} else if t.prep != nil {
			// Made for a version the processor no longer goes to (rolled
			// back, or kept back, before this task switched).
			t.discardPrepared(ctx)
		}
		if t.stallFrom.IsZero() && !t.lastProcessed.IsZero() {
			t.gapFrom = t.lastProcessed
		}
		if t.prevInst != nil && now.Sub(t.swappedAt) >= t.ver.canary.Window {
			// The canary window is over: the version stays.
			t.closePrev(ctx)
		}
	}
}

// closePrev closes the instance kept for an instant rollback.
func (t *task) closePrev(ctx context.Context) {
	if t.prevInst != nil {
		_ = t.prevInst.Close(ctx)
	}
	t.prevInst, t.prevVer = nil, nil
}

// prepare instantiates v for t in the background and wakes the loop when
// the instance is ready. An instance only stores its task's sink and state
// until its first Process (the engine refuses state access during init),
// so making it concurrently with the task's processing is safe.
func (r *Runner) prepare(t *task, v *version) *prepared {
	p := &prepared{ver: v, done: make(chan struct{})}
	go func() {
		env := t.env()
		env.Ahead = true // a switch waits for an instance that started
		p.inst, p.err = v.Plugin.Instantiate(context.Background(), t.id, env)
		if p.err == nil {
			p.slow = r.startedSlowly(t.proc, t.id, v.ID, p.inst)
		}
		// done first: the loop, woken, must find the instance ready (an
		// idle loop would otherwise wait in its poll for the next record).
		close(p.done)
		r.wakeLoop()
	}()
	return p
}

// switchTo makes the prepared instance the task's; the old one is kept
// while the new version is in its canary window, if its version is the
// one a rollback returns to (back), for an instant rollback, and closed
// otherwise.
func (t *task) switchTo(ctx context.Context, now time.Time, back *versions.Version[Plugin]) {
	p := t.prep
	t.prep = nil
	if p.err != nil {
		t.r.log.Error("new plugin version does not start for this task; it keeps the old one",
			"task", t.id.String(), "version", p.ver.ID, "err", p.err)
		t.proc.Stats.SwapFailures.Add(1)
		// Not retried until the next Swap: the same bytes would fail again.
		t.r.vers.Keep(t.proc.spec.Name, t.ver.Version)
		return
	}
	if p.slow && p.ver.canary.Window > 0 {
		// Under a canary, a version whose start runs long is rolled back
		// before the task switches: its every task start would stall
		// that long.
		_ = p.inst.Close(ctx)
		t.r.rollBackSlowStart(t, p.ver)
		return
	}
	if !t.migrateAtSwitch(ctx, p) {
		return // migrate.go: rolled back, the task keeps its version
	}
	old, oldVer := t.inst, t.ver
	t.inst, t.ver = p.inst, p.ver
	t.closePrev(ctx)
	if t.ver.canary.Window > 0 && oldVer.Version == back {
		t.prevInst, t.prevVer = old, back
	} else if old != nil {
		_ = old.Close(ctx)
	}
	t.swappedAt = now
	t.canaryIn, t.canaryFailed = 0, 0
	t.stallFrom = t.lastProcessed
	t.proc.Stats.Swaps.Add(1)
	t.proc.setTaskVersion(t.r.vers, t.id, t.ver)
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
		if c.Window == 0 || now.Sub(t.swappedAt) > c.Window+r.opts.CommitInterval {
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
//
// The previous version is the registry's (Current.Back). If a newer
// version was taken in since the failing one, that one stays active: the
// failing version's tasks are watched no longer and move on to it.
func (r *Runner) rollBack(ctx context.Context, failed []*task) {
	seen := map[*procState]bool{}
	for _, ft := range failed {
		ps := ft.proc
		if seen[ps] {
			continue
		}
		seen[ps] = true
		bad := ft.ver
		reason := fmt.Sprintf("%d of %d records failed within %s of the swap (limit %.2f%%)",
			ft.canaryFailed, ft.canaryIn, bad.canary.Window, 100*bad.canary.MaxFailureRatio)
		backV := r.vers.RollBack(ps.spec.Name, bad.Version)
		if backV == nil {
			r.log.Warn("plugin version failed its canary, but a newer version has been taken in since; its tasks move on to that one",
				"processor", ps.spec.Name, "version", bad.ID, "reason", reason)
			unwatched := newVersion(bad.Version, versions.Canary{})
			for _, t := range r.tasks {
				if t.proc == ps && t.ver.Version == bad.Version {
					t.ver = unwatched
				}
			}
			continue
		}
		r.log.Warn("new plugin version failed its canary; rolling back", "processor", ps.spec.Name,
			"from", bad.ID, "to", backV.ID, "reason", reason)
		ps.Stats.Rollbacks.Add(1)
		for _, t := range r.tasks {
			if t.proc != ps || t.ver.Version != bad.Version {
				continue
			}
			t.discardPrepared(ctx)
			if err := t.moveTo(ctx, backV); err != nil {
				r.log.Error("previous version does not start for this task; it is stopped", "task", t.id.String(), "err", err)
				t.stop(fmt.Errorf("rolling back to %s: %w", backV.ID, err))
				continue
			}
			t.swappedAt = time.Now()
			if t.failed != nil {
				// Stopped by on_error: fail on a record of the bad version:
				// the previous version gets the record again.
				t.failed = nil
				t.win.resumed()
				ps.Stats.StoppedTasks.Add(-1)
				r.cl.ResumeFetchPartitions(t.partitions())
			}
		}
		if r.opts.OnRollback != nil {
			ev := RollbackEvent{Processor: ps.spec.Name, From: bad.ID, To: backV.ID, Reason: reason}
			go r.opts.OnRollback(ev)
		}
	}
}

// rollBackSlowStart rolls the processor of t back from bad, a version
// under a canary whose start ran long in t (prepare): the registry's
// previous version becomes active again, and the tasks that switched to
// bad already move back at the next commit points, as after any swap.
func (r *Runner) rollBackSlowStart(t *task, bad *version) {
	ps := t.proc
	reason := "its instance's start ran over half its init budget"
	backV := r.vers.RollBack(ps.spec.Name, bad.Version)
	if backV == nil {
		return // a newer version was taken in since: the task goes to that one
	}
	r.log.Warn("new plugin version's start runs long under its canary; rolling back", "processor", ps.spec.Name,
		"from", bad.ID, "to", backV.ID, "task", t.id.String())
	ps.Stats.Rollbacks.Add(1)
	if r.opts.OnRollback != nil {
		ev := RollbackEvent{Processor: ps.spec.Name, From: bad.ID, To: backV.ID, Reason: reason}
		go r.opts.OnRollback(ev)
	}
}

// stallSamples is commitSamples under another name: per-task swap stalls.
type stallSamples = commitSamples
