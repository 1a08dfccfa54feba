// Package versions is the one record of which plugin version each
// processor runs in this process: the version new tasks start with and
// every task moves to (the active one), the one the control topic asks for
// next (pending), the version of each task, and the versions refused.
//
// Writers: the control-topic follower proposes and refuses versions; the
// runner takes a proposal in at a commit point, keeps the old version when
// the new one does not start, rolls a failing one back, and records each
// task's version. Readers: the admin endpoint (/v1/processors, metrics)
// and the rollback publisher. Nothing else keeps a copy of the active
// version: invariant I8 (a swap is atomic per task) is decided against
// this record only.
package versions

import (
	"fmt"
	"sync"
	"time"
)

// Info describes a version as the control topic knows it.
type Info struct {
	// ID names the version in the wasmstream-version header, logs and
	// metrics: "<label>@<sha256 prefix>", or the prefix alone.
	ID string
	// Hash is the module's SHA-256 (hex); "" when unknown (a version made
	// by a test, or an unreadable manifest).
	Hash  string
	Label string
	Size  int64 // bytes of the module; 0 when unknown
	// ABIVersion is the ABI version the host speaks with the module; 0
	// when unknown (not compiled by this process).
	ABIVersion int
}

// Canary watches a newly swapped version: if, within Window after a task
// switched to it, the share of its records that failed exceeds
// MaxFailureRatio (with at least MinRecords records seen), the task's
// processor goes back to the previous version. A zero Window watches
// nothing.
type Canary struct {
	Window          time.Duration
	MaxFailureRatio float64
	MinRecords      int
}

// Version is one version of a processor's plugin as it runs. P is what
// makes its instances (the runner's Plugin); the registry never calls it.
type Version[P any] struct {
	Info
	Plugin P
	// Canary is the watch the version is under after a swap to it.
	Canary Canary
	// Prev is what a rollback returns to: the version that was active
	// when this one was taken in; nil for a processor's first version.
	Prev *Version[P]
}

// Refusal is a version this process would not run.
type Refusal struct {
	Info
	Reason string
	At     time.Time
}

// MaxRefusals is how many refusals a processor keeps (the latest).
const MaxRefusals = 8

// Snapshot is where a processor stands, copied out of the registry.
type Snapshot struct {
	Active Info
	// Tasks maps each task (its TaskID string) to the version ID it runs;
	// during a swap some still run the previous one.
	Tasks    map[string]string
	Refused  []Refusal // the latest MaxRefusals, newest last
	Refusals int64     // all refusals
}

// Registry holds the versions of every processor of one process. Safe
// for concurrent use; its lock is a leaf (nothing is called under it).
type Registry[P any] struct {
	mu    sync.Mutex
	procs map[string]*proc[P]
	// wake is told of every proposal for its processor, outside mu: the
	// wake-up of the runner that runs the processor (a process may run
	// one runner per processor, kafka.members).
	wake map[string]func()
}

type proc[P any] struct {
	active  *Version[P]
	pending *Version[P] // proposed, not yet taken in by the runner
	known   map[string]Info
	tasks   map[string]string
	refused []Refusal
	refuses int64
}

// New returns an empty registry.
func New[P any]() *Registry[P] {
	return &Registry[P]{procs: map[string]*proc[P]{}, wake: map[string]func(){}}
}

func (r *Registry[P]) get(processor string) (*proc[P], error) {
	p := r.procs[processor]
	if p == nil {
		return nil, fmt.Errorf("versions: no processor %q", processor)
	}
	return p, nil
}

// Start registers processor with the version it starts with. A processor
// starts once: a second Start keeps the first version and returns false.
func (r *Registry[P]) Start(processor string, info Info, plugin P) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[processor] != nil {
		return false
	}
	r.procs[processor] = &proc[P]{
		active: &Version[P]{Info: info, Plugin: plugin},
		known:  map[string]Info{info.ID: info},
		tasks:  map[string]string{},
	}
	return true
}

// OnPropose sets the function told of every proposal for processor (the
// wake-up of the runner that runs it), called after the registry's lock is
// released. A later call for the same processor replaces it (a runner that
// replaced a failed one).
func (r *Registry[P]) OnPropose(processor string, fn func()) {
	r.mu.Lock()
	r.wake[processor] = fn
	r.mu.Unlock()
}

// Propose asks for processor to run a new version, watched by canary: the
// runner takes it in at its next commit point (TakePending). A later
// proposal replaces one not yet taken in.
func (r *Registry[P]) Propose(processor string, info Info, plugin P, canary Canary) error {
	r.mu.Lock()
	p, err := r.get(processor)
	if err == nil {
		p.known[info.ID] = info
		p.pending = &Version[P]{Info: info, Plugin: plugin, Canary: canary}
	}
	wake := r.wake[processor]
	r.mu.Unlock()
	if err == nil && wake != nil {
		wake()
	}
	return err
}

// Target is the version processor is headed for: the pending proposal, or
// the active version when none is pending.
func (r *Registry[P]) Target(processor string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return Info{}, false
	}
	if p.pending != nil {
		return p.pending.Info, true
	}
	return p.active.Info, true
}

// Refuse records that processor will not run the version info (reason
// says why) and returns the ID of the version it runs instead.
func (r *Registry[P]) Refuse(processor string, info Info, reason error, at time.Time) (running string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return ""
	}
	p.refused = append(p.refused, Refusal{Info: info, Reason: reason.Error(), At: at})
	p.refuses++
	if len(p.refused) > MaxRefusals {
		p.refused = p.refused[len(p.refused)-MaxRefusals:]
	}
	return p.active.ID
}

// Lookup returns what the registry knows of processor's version id: the
// versions it started with or was proposed.
func (r *Registry[P]) Lookup(processor, id string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return Info{}, false
	}
	v, ok := p.known[id]
	return v, ok
}

// Snapshot copies where processor stands.
func (r *Registry[P]) Snapshot(processor string) (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return Snapshot{}, false
	}
	s := Snapshot{Active: p.active.Info, Tasks: make(map[string]string, len(p.tasks)),
		Refused: append([]Refusal(nil), p.refused...), Refusals: p.refuses}
	for t, id := range p.tasks {
		s.Tasks[t] = id
	}
	return s, true
}

// Active is the version processor's new tasks start with and every task
// moves to; nil for an unknown processor.
func (r *Registry[P]) Active(processor string) *Version[P] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[processor]; p != nil {
		return p.active
	}
	return nil
}

// TakePending makes the pending proposal of processor active, its Prev the
// version active until now, and returns both. It returns to == nil when
// nothing is pending or the proposal is the active version already. The
// runner calls it at a commit point only (no transaction open).
func (r *Registry[P]) TakePending(processor string) (from, to *Version[P]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil || p.pending == nil {
		return nil, nil
	}
	next := p.pending
	p.pending = nil
	if next.ID == p.active.ID {
		return p.active, nil
	}
	next.Prev = p.active
	from, p.active = p.active, next
	return from, next
}

// Keep makes v processor's active version again when the one after it did
// not start: until the next proposal, tasks stay with v.
func (r *Registry[P]) Keep(processor string, v *Version[P]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[processor]; p != nil {
		p.active = v
	}
}

// RollBack makes bad.Prev processor's active version if bad is still the
// active one (a later proposal taken in since stays).
func (r *Registry[P]) RollBack(processor string, bad *Version[P]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[processor]; p != nil && p.active == bad && bad.Prev != nil {
		p.active = bad.Prev
	}
}

// SetTask records the version id a task of processor runs; "" removes the
// task (it was revoked or closed).
func (r *Registry[P]) SetTask(processor, task, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return
	}
	if id == "" {
		delete(p.tasks, task)
		return
	}
	p.tasks[task] = id
}
