package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// The app's local state is one Pebble database per processor with stores
// (Config.ProcessorStateDir) and one for the global tables at StateDir:
// a write one database cannot make (a full or failing disk,
// state.WriteError) fails that database only, so it stops the processor
// that writes to it and no other (RATIONALE.md, "State"). The databases
// share one block cache and one cache of open files (state.Shared).

// tablesDatabase names the global tables' database in metrics and /readyz.
const tablesDatabase = "global_tables"

// openState opens the state databases. Task stores found in the tables'
// database were written by an earlier release, which kept every store
// there: they are dropped, and their processors' databases restore them
// from the changelogs. With the embedded broker, whatever an earlier run
// left is dropped too (clearEmbeddedState). Databases opened before an
// error are closed by Close.
func (h *Host) openState(tune func(processor string, o *state.Options)) error {
	cfg := h.cfg
	h.stateCaches = state.NewShared(0)
	optsOf := func(processor string) state.Options {
		o := state.Options{Logger: h.log, SyncInterval: cfg.State.SyncInterval, WriteTimeout: cfg.State.WriteTimeout,
			Shared: h.stateCaches, Name: "the global tables"}
		if processor != "" {
			o.Name = "the stores of processor " + processor
		}
		if tune != nil {
			tune(processor, &o)
		}
		return o
	}
	legacy := staleTasks(cfg.StateDir())
	db, err := state.Open(cfg.StateDir(), optsOf(""))
	if err != nil {
		return fmt.Errorf("state.dir: %w", err)
	}
	h.state = db
	if n, err := wipeTasks(db, legacy); err != nil {
		return fmt.Errorf("state.dir: dropping the task stores of an earlier release from %s: %w", cfg.StateDir(), err)
	} else if n > 0 {
		h.log.Info("state: each processor has a database of its own since this release; the task stores of the shared database were dropped "+
			"and are restored from their changelogs", "tasks", n, "dir", cfg.StateDir())
	}
	h.procState = map[string]*state.DB{}
	stale := map[string][]state.StoreInfo{}
	for i := range cfg.Processors {
		pc := &cfg.Processors[i]
		if len(cfg.taskStores(pc)) == 0 {
			continue
		}
		dir := cfg.ProcessorStateDir(pc.Name)
		if h.embedded != nil {
			stale[pc.Name] = staleTasks(dir)
		}
		pdb, err := state.Open(dir, optsOf(pc.Name))
		if err != nil {
			return fmt.Errorf("state.dir: processor %s: %w", pc.Name, err)
		}
		h.procState[pc.Name] = pdb
	}
	if h.embedded != nil {
		return h.clearEmbeddedState(stale)
	}
	return nil
}

// closeState closes the state databases, at once (each may wait up to
// twice its write timeout for a slow disk: a stop waits for the slowest,
// not their sum), then their caches.
func (h *Host) closeState() error {
	dbs := make([]*state.DB, 0, len(h.procState)+1)
	for _, name := range slices.Sorted(maps.Keys(h.procState)) {
		dbs = append(dbs, h.procState[name])
	}
	if h.state != nil {
		dbs = append(dbs, h.state)
	}
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() { errs[i] = db.Close() })
	}
	wg.Wait()
	h.procState, h.state = nil, nil
	if h.stateCaches != nil {
		h.stateCaches.Close()
		h.stateCaches = nil
	}
	return errors.Join(errs...)
}

// stateOpen sums what every state database has open (state.DB.Open), for
// the debug snapshot and metrics; nil without a database.
func (h *Host) stateOpen() *admin.StateCounts {
	var c *admin.StateCounts
	add := func(db *state.DB) {
		if db == nil {
			return
		}
		if c == nil {
			c = &admin.StateCounts{}
		}
		tasks, iters := db.Open()
		c.Tasks += tasks
		c.Iterators += iters
	}
	for _, pc := range h.cfg.Processors {
		add(h.procState[pc.Name])
	}
	add(h.state)
	return c
}

// stateHealth is the health of every state database, for the admin
// endpoint: processors' in the config's order, then the global tables'.
func (h *Host) stateHealth() []admin.StateDB {
	out := make([]admin.StateDB, 0, len(h.procState)+1)
	add := func(name string, db *state.DB) {
		d := admin.StateDB{Database: name, Failures: map[string]int64{}}
		if f := db.Failure(); f != nil {
			d.Failed = f.Error()
		}
		for c, n := range db.Failures() {
			d.Failures[state.Cause(c).String()] = n
		}
		out = append(out, d)
	}
	for _, pc := range h.cfg.Processors {
		if db := h.procState[pc.Name]; db != nil {
			add(pc.Name, db)
		}
	}
	if h.state != nil {
		add(tablesDatabase, h.state)
	}
	return out
}

// recoverState reopens the failed databases of m's processors before a new
// runner starts: one whose disk still refuses writes fails again, and the
// member waits for its next retry. A database that failed is reopened on
// what reached its disk; its tasks then restore what the changelogs hold
// beyond their checkpoints (I3: a store and its checkpoint are written in
// one batch, so the checkpoint never claims more than the store holds).
func (h *Host) recoverState(ctx context.Context, m *member) error {
	for _, spec := range m.opts.Processors {
		db := spec.State
		if db == nil || db.Failure() == nil {
			continue
		}
		if err := db.Recover(ctx); err != nil {
			return fmt.Errorf("processor %s: reopening its state database: %w", spec.Name, err)
		}
		h.log.Info("state: the database of processor "+spec.Name+" was reopened; its tasks restore from their changelogs", "dir", db.Dir())
	}
	return nil
}
