package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// State migration between versions (ABI.md section 13). A task's time
// store records which version's layout its stores hold (timeKeyVersion):
// the version that last ran on them, or that migrated them. Before a
// version makes its first call on a task's stores, the task settles
// them: the same version, nothing to do; no version recorded (new state,
// or state written before this record existed), or a version without
// wasmstream_migrate, the running version is recorded; otherwise the
// running version's wasmstream_migrate runs with the recorded version's
// ID, a call of its own staged like a record's, and the new version is
// recorded in the same call. The record is state: it commits with the
// migration's writes in one commit window (one transaction under
// exactly_once), travels in the time store's changelog, restores with
// the stores and is dropped with an aborted window. So a task migrates
// exactly once whatever happens around it: a swap, an abort (the window
// held the migration: it runs again), a restore of state written by the
// old version on a process that runs the new one, a failover.
//
// A migration that fails (the plugin returns FAILED, traps, runs out of
// time or hits a limit) leaves nothing: its writes and the record are
// discarded, and the processor rolls back to the version before, as a
// canary rollback does (RollbackEvent, so the fleet follows).

// readStateVersion returns the version ID the task's stores hold the
// layout of; ok is false when none is recorded.
func (k *timekeeper) readStateVersion() (id string, ok bool, err error) {
	v, found, err := k.st.Get(k.store, []byte{timeKeyVersion})
	if err != nil {
		return "", false, fmt.Errorf("reading the state's version: %w", err)
	}
	return string(v), found, nil
}

// writeStateVersion stages id as the stores' version in the current call.
func (k *timekeeper) writeStateVersion(id string) error {
	if err := k.st.PutHost(k.store, []byte{timeKeyVersion}, []byte(id)); err != nil {
		return fmt.Errorf("recording the state's version: %w", err)
	}
	return nil
}

// settleVersion makes the task's stores hold the layout of the version it
// runs, before that version's first call on them (see above). It reports
// whether the task may call its plugin now: false when a migration
// failed and the task could not move to another version (it is then
// stopped, t.failed says why). A migration that failed with the task
// moved back to the previous version settles again for that one. The
// error is a fatal one (the store could not be read or written). Called
// with the task's state restored, outside calls, by the goroutine that
// owns the task.
func (t *task) settleVersion(ctx context.Context) (bool, error) {
	for range 2 { // the running version, then the one a failure moved back to
		k := t.tk
		if k.st == nil || k.settled == t.ver.Version {
			return true, nil
		}
		from, found, err := k.readStateVersion()
		if err != nil {
			return false, fmt.Errorf("task %s: %w", t.id, err)
		}
		if found && from == t.ver.ID {
			k.settled = t.ver.Version
			return true, nil
		}
		m, migrates := t.inst.(Migrator)
		if !found || !migrates || !m.Migrates() {
			if err := t.recordVersion(); err != nil {
				return false, err
			}
			continue
		}
		if err := t.migrate(ctx, m, from); err != nil {
			if errors.Is(err, state.ErrWriteFailed) {
				// Not the migration's failure: the store cannot be
				// written (task.onFailure). The runner stops.
				return false, fmt.Errorf("task %s: migrating from version %s: %w", t.id, from, err)
			}
			if !t.migrationFailed(ctx, from, err) {
				return false, nil
			}
			continue
		}
		k.settled = t.ver.Version
		return true, nil
	}
	if t.tk.settled == t.ver.Version {
		return true, nil
	}
	// Moved back twice, and the version moved to fails its migration too.
	t.stop(fmt.Errorf("version %s: its state could not be migrated, nor that of the versions rolled back to", t.ver.ID))
	t.r.cl.PauseFetchPartitions(t.partitions())
	return false, nil
}

// recordVersion records the running version as the stores' own, a host
// write of its own in the commit window.
func (t *task) recordVersion() error {
	t.tk.beginCall(t.r.wallNow())
	if err := t.tk.writeStateVersion(t.ver.ID); err != nil {
		t.st.AbortRecord()
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	t.st.CommitRecord()
	t.tk.endCall(true)
	t.tk.settled = t.ver.Version
	return nil
}

// migrate runs m's migration from version from as one call: its state
// writes and the new version's record are kept together, or dropped
// together when it fails. The failure is the call's (a *KindError) or
// the store's.
func (t *task) migrate(ctx context.Context, m Migrator, from string) error {
	if len(from) > abi.MaxMigrateFrom {
		from = from[:abi.MaxMigrateFrom] // never: IDs are label@hash
	}
	t.r.log.Info("migrating the task's state to a new plugin version", "task", t.id.String(), "from", from, "to", t.ver.ID)
	t.tk.beginCall(t.r.wallNow())
	err := m.Migrate(ctx, from)
	if err == nil {
		err = t.tk.writeStateVersion(t.ver.ID)
	}
	t.endCall(err == nil, originKey{})
	if err != nil {
		return err
	}
	t.proc.Stats.Migrations.Add(1)
	return nil
}

// migrationFailed handles t's failed migration from version from to
// t.ver: the processor rolls back to the version before, and t moves to
// it now, so that nothing runs on stores of the wrong layout; without a
// version to go back to (a process that started with the new version,
// restoring the old one's state), the task stops with the reason. It
// reports whether t moved (and may go on with the version it moved to).
func (t *task) migrationFailed(ctx context.Context, from string, err error) bool {
	r, ps := t.r, t.proc
	bad := t.ver
	ps.Stats.MigrationFailures.Add(1)
	reason := fmt.Sprintf("its migration of task %s's state from version %s failed: %v", t.id, from, err)
	back := r.vers.RollBack(ps.spec.Name, bad.Version)
	if back != nil {
		ps.Stats.Rollbacks.Add(1)
		r.log.Warn("new plugin version's state migration failed; rolling back", "processor", ps.spec.Name,
			"from", bad.ID, "to", back.ID, "task", t.id.String(), "err", err)
		if r.opts.OnRollback != nil {
			ev := RollbackEvent{Processor: ps.spec.Name, From: bad.ID, To: back.ID, Reason: reason}
			go r.opts.OnRollback(ev)
		}
	} else if cur := r.vers.Current(ps.spec.Name); cur.Active != bad.Version {
		back = cur.Active // the processor moved on meanwhile (rolled back, or a newer version)
	}
	if back != nil {
		if merr := t.moveTo(ctx, back); merr == nil {
			return true
		} else {
			err = fmt.Errorf("%w; and version %s does not start: %w", err, back.ID, merr)
		}
	}
	t.stop(fmt.Errorf("version %s: %s", bad.ID, reason))
	r.cl.PauseFetchPartitions(t.partitions())
	r.log.Error("task stopped: its state could not be migrated to the plugin version it runs, and there is no version to go back to",
		"task", t.id.String(), "version", bad.ID, "from", from, "err", err)
	return false
}

// shadowMigrate runs a shadow candidate's migration (ABI.md section 13)
// for t, into the shadow's overlay, before its first record: the stores'
// recorded version is another one, and the candidate exports the
// migration. So a migrating candidate is judged on the layout it would
// have; the active stores are untouched. A failure (or an overlay past its
// bound) is the error; the shadow then stops.
func (t *task) shadowMigrate(ctx context.Context) error {
	sh := t.sh
	m, ok := sh.inst.(Migrator)
	if !ok || !m.Migrates() || t.st == nil || t.tk.st == nil || t.restoring != nil {
		return nil
	}
	from, found, err := t.tk.readStateVersion()
	if err != nil || !found || from == sh.run.version {
		return err
	}
	sh.sink.begin(sh.run.seed)
	err = m.Migrate(ctx, from)
	if serr := sh.state.endCall(err == nil); serr != "" && err == nil {
		err = errors.New(serr)
	}
	return err
}

// moveTo makes t run back (an instance kept for a rollback, or a new
// one), at once: a migration's or a canary's rollback (rollBack).
func (t *task) moveTo(ctx context.Context, back *versions.Version[Plugin]) error {
	inst := t.prevInst
	if t.prevVer != back {
		t.closePrev(ctx)
		inst = nil
	}
	t.prevInst, t.prevVer = nil, nil
	if inst == nil {
		var err error
		if inst, err = back.Plugin.Instantiate(ctx, t.id, t.env()); err != nil {
			return err
		}
	}
	_ = t.inst.Close(ctx)
	t.inst, t.ver = inst, newVersion(back, versions.Canary{})
	t.canaryIn, t.canaryFailed = 0, 0
	t.proc.setTaskVersion(t.r.vers, t.id, t.ver)
	return nil
}

// migrateAtSwitch settles the task's stores for p's version before the
// switch (switchTo), so that a failed migration leaves the task on its
// version and rolls the processor back; it reports whether the switch
// goes on. A task restoring or stopped settles when it next runs
// (processBatch, timePoint). Called by the loop at a commit point.
func (t *task) migrateAtSwitch(ctx context.Context, p *prepared) bool {
	if c := t.r.vers.Current(t.proc.spec.Name); c.Active != p.ver.Version {
		// Rolled back by another task's failed migration at this swap
		// point: the switch is off.
		_ = p.inst.Close(ctx)
		return false
	}
	m, ok := p.inst.(Migrator)
	if t.st == nil || t.tk.st == nil || t.restoring != nil || t.failed != nil || !ok || !m.Migrates() {
		return true
	}
	from, found, err := t.tk.readStateVersion()
	if err != nil || !found || from == p.ver.ID {
		return true // settled when it runs (a store error then stops the runner)
	}
	cur := t.ver
	t.ver = p.ver // the call and its record are the new version's
	err = t.migrate(ctx, m, from)
	t.ver = cur
	if err == nil {
		// The writes wait, staged, for the new version's first window
		// and commit with its records (or its commit point's calls): a
		// canary that aborts that window takes the migration back too.
		t.tk.settled = p.ver.Version
		return true
	}
	ps := t.proc
	_ = p.inst.Close(ctx)
	if errors.Is(err, state.ErrWriteFailed) {
		// The store's failure, not the version's: no rollback. The task
		// keeps its version; its next write fails the same way and stops
		// the runner (task.onFailure), and the switch is tried again by
		// the runner that follows.
		t.r.log.Error("state migration could not write the task's store; the task keeps its version", "task", t.id.String(), "err", err)
		return false
	}
	ps.Stats.MigrationFailures.Add(1)
	ps.Stats.SwapFailures.Add(1)
	reason := fmt.Sprintf("its migration of task %s's state from version %s failed: %v", t.id, from, err)
	t.r.log.Warn("new plugin version's state migration failed; rolling back, the task keeps its version and its state",
		"processor", ps.spec.Name, "from", cur.ID, "to", p.ver.ID, "task", t.id.String(), "err", err)
	back := t.r.vers.RollBack(ps.spec.Name, p.ver.Version)
	if back != nil {
		ps.Stats.Rollbacks.Add(1)
		if t.r.opts.OnRollback != nil {
			ev := RollbackEvent{Processor: ps.spec.Name, From: p.ver.ID, To: back.ID, Reason: reason}
			go t.r.opts.OnRollback(ev)
		}
	} else if c := t.r.vers.Current(ps.spec.Name); c.Active == p.ver.Version {
		t.r.vers.Keep(ps.spec.Name, cur.Version)
		back = cur.Version
	}
	// The tasks that switched to the failed version at this swap point
	// hold nothing in their windows but their migrations (no record ran
	// since the commit point): they drop them and go back at once, their
	// stores as committed. (A task that switched at an earlier commit
	// point keeps its committed migration; ABI.md section 13.)
	for _, o := range t.r.tasks {
		if o.proc != ps || o.ver.Version != p.ver.Version || back == nil {
			continue
		}
		if o.st != nil && o.restoring == nil {
			o.st.Discard()
		}
		o.tk.reset()
		if err := o.moveTo(ctx, back); err != nil {
			o.stop(fmt.Errorf("rolling back to %s after a failed migration: %w", back.ID, err))
		}
	}
	return false
}
