// Package versions is the one record of which plugin version each
// processor runs in this process: the version new tasks start with and
// every task moves to (the active one), the one a rollback returns to, the
// one the control topic asks for next (pending), the version of each task,
// and the versions refused.
//
// Writers: the control-topic follower proposes and refuses versions; the
// runner takes a proposal in at a commit point, keeps the old version when
// the new one does not start, rolls a failing one back, and records each
// task's version. Readers: the admin endpoint (/v1/processors, metrics)
// and the rollback publisher. Nothing else keeps a copy of the active
// version: invariant I8 (a swap is atomic per task) is decided against
// this record only.
//
// # Versions held
//
// A processor holds compiled only what it can switch to without a
// compile, in three roles: active, back (the version active before it,
// which a canary's rollback or an operator's rollback returns to) and
// pending (a proposal not yet taken in). A version in no role is released
// (the release function given to New: its compiled module closed) as soon
// as no task runs it any more, and the registry keeps nothing of it but
// its Info among the recently released. So a process that has taken in a
// thousand versions holds two or three, and a rollback to an older one
// compiles it again (RATIONALE.md, "Hot swap: versions held"; proc.roles lists the roles).
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

// Version is one compiled version of a processor's plugin. It does not
// change once made: the registry and the tasks that run it share it. P is
// what makes its instances (the runner's Plugin); the registry only hands
// it to its release function, once, when the version is released.
type Version[P any] struct {
	Info
	Plugin P
}

// Refusal is a version this process would not run.
type Refusal struct {
	Info
	Reason string
	At     time.Time
}

// MaxRefusals is how many refusals a processor keeps (the latest).
const MaxRefusals = 8

// maxRecent is how many released versions a processor remembers the Info
// of (Lookup): enough for a rollback event published after the failing
// version was released; the rest is forgotten, so the record of a process
// that takes in a version a day does not grow.
const maxRecent = 16

// Snapshot is where a processor stands, copied out of the registry.
type Snapshot struct {
	Active Info
	// Back is the version a rollback returns to without a compile; zero
	// when there is none (at start, after a rollback). Pending is the
	// proposal not yet taken in; zero when there is none.
	Back, Pending Info
	// Tasks maps each task (its TaskID string) to the version ID it runs;
	// during a swap some still run the previous one.
	Tasks    map[string]string
	Refused  []Refusal // the latest MaxRefusals, newest last
	Refusals int64     // all refusals
	// Held counts the distinct versions the processor holds compiled: in
	// a role, or run by a task (2 at rest after a deploy; 3 during a swap
	// with a proposal waiting).
	Held int
}

// Current is where a processor's runner finds the version to move its
// tasks to, the watch it is under, and what a rollback returns to.
type Current[P any] struct {
	Active *Version[P]
	// Canary is the watch Active is under since it was taken in: zero
	// for a processor's first version, a rolled-back-to one and a version
	// taken in without a watch.
	Canary Canary
	// Since is when Active was taken in (TakePending) under Canary: a
	// task that starts later in the window is watched for the rest of it.
	Since time.Time
	// Back is what a rollback returns to; nil when there is none.
	Back *Version[P]
}

// Registry holds the versions of every processor of one process. Safe
// for concurrent use; its lock is a leaf (nothing is called under it:
// the wake-ups and the release function run after it is released).
type Registry[P any] struct {
	mu      sync.Mutex
	procs   map[string]*proc[P]
	release func(P)
	// wake is told of every proposal for its processor, outside mu: the
	// wake-up of the runner that runs the processor (a process may run
	// one runner per processor, kafka.members).
	wake map[string]func()
}

type proc[P any] struct {
	// The roles (see the package comment). active is never nil.
	active        *Version[P]
	canary        Canary    // active's watch (Current.Canary)
	since         time.Time // when active was taken in under canary (Current.Since)
	back          *Version[P]
	pending       *Version[P] // proposed, not yet taken in by the runner
	pendingCanary Canary
	// tasks is the version each task runs; users counts the tasks of each
	// version, which hold it as a role does.
	tasks   map[string]*Version[P]
	users   map[*Version[P]]int
	recent  []Info // released versions, newest last, at most maxRecent
	refused []Refusal
	refuses int64
}

// roles are the versions the processor holds whatever its tasks run.
func (p *proc[P]) roles() [3]*Version[P] { return [3]*Version[P]{p.active, p.back, p.pending} }

// held reports whether v is in a role or run by a task.
func (p *proc[P]) held(v *Version[P]) bool {
	if v == nil || p.users[v] > 0 {
		return v != nil
	}
	for _, r := range p.roles() {
		if r == v {
			return true
		}
	}
	return false
}

// drop adds v to out if nothing holds it any more: called after v lost a
// role or a task.
func (p *proc[P]) drop(v *Version[P], out *[]*Version[P]) {
	if v == nil || p.held(v) {
		return
	}
	for _, o := range *out {
		if o == v {
			return
		}
	}
	*out = append(*out, v)
	p.recent = append(p.recent, v.Info)
	if len(p.recent) > maxRecent {
		p.recent = p.recent[len(p.recent)-maxRecent:]
	}
}

// New returns an empty registry. release, if not nil, is called once for
// each version released (in no role and run by no task), after the
// registry's lock is released and on the goroutine whose call released
// it: the runner's loop (TakePending, RollBack, Keep, SetTask) or the
// follower (Propose replacing a proposal never taken in).
func New[P any](release func(P)) *Registry[P] {
	return &Registry[P]{procs: map[string]*proc[P]{}, wake: map[string]func(){}, release: release}
}

func (r *Registry[P]) get(processor string) (*proc[P], error) {
	p := r.procs[processor]
	if p == nil {
		return nil, fmt.Errorf("versions: no processor %q", processor)
	}
	return p, nil
}

// unlock releases the lock, then the versions in out.
func (r *Registry[P]) unlock(out []*Version[P]) {
	r.mu.Unlock()
	if r.release == nil {
		return
	}
	for _, v := range out {
		r.release(v.Plugin)
	}
}

// Start registers processor with the version it starts with. A processor
// starts once: a second Start keeps the first version and returns false
// (its plugin is not the registry's: the caller releases it).
func (r *Registry[P]) Start(processor string, info Info, plugin P) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[processor] != nil {
		return false
	}
	r.procs[processor] = &proc[P]{
		active: &Version[P]{Info: info, Plugin: plugin},
		tasks:  map[string]*Version[P]{},
		users:  map[*Version[P]]int{},
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
// proposal replaces one not yet taken in, which is released. The registry
// owns plugin from here on, even when Propose fails (it is released).
func (r *Registry[P]) Propose(processor string, info Info, plugin P, canary Canary) error {
	v := &Version[P]{Info: info, Plugin: plugin}
	r.mu.Lock()
	p, err := r.get(processor)
	if err != nil {
		r.unlock([]*Version[P]{v})
		return err
	}
	r.setPending(processor, p, v, canary)
	return nil
}

// ProposeHeld proposes again a version processor still holds compiled,
// found by its hash (the control topic rolling back to the version before
// the active one): no compile, and nothing new to release. It reports
// whether it found one; the active version is not proposed again.
func (r *Registry[P]) ProposeHeld(processor, hash string, canary Canary) (Info, bool) {
	r.mu.Lock()
	p := r.procs[processor]
	if p == nil || hash == "" {
		r.mu.Unlock()
		return Info{}, false
	}
	var found *Version[P]
	for _, v := range []*Version[P]{p.back, p.pending} {
		if v != nil && v.Hash == hash {
			found = v
		}
	}
	if found == nil {
		r.mu.Unlock()
		return Info{}, false
	}
	r.setPending(processor, p, found, canary)
	return found.Info, true
}

// setPending makes v the proposal of processor (p) and wakes its runner;
// it releases the lock (held on entry).
func (r *Registry[P]) setPending(processor string, p *proc[P], v *Version[P], canary Canary) {
	var out []*Version[P]
	old := p.pending
	p.pending, p.pendingCanary = v, canary
	p.drop(old, &out)
	wake := r.wake[processor]
	r.unlock(out)
	if wake != nil {
		wake()
	}
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
// versions it holds, and the latest it released.
func (r *Registry[P]) Lookup(processor, id string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[processor]
	if p == nil {
		return Info{}, false
	}
	for _, v := range p.roles() {
		if v != nil && v.ID == id {
			return v.Info, true
		}
	}
	for v := range p.users {
		if v.ID == id {
			return v.Info, true
		}
	}
	for i := len(p.recent) - 1; i >= 0; i-- {
		if p.recent[i].ID == id {
			return p.recent[i], true
		}
	}
	return Info{}, false
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
	if p.back != nil {
		s.Back = p.back.Info
	}
	if p.pending != nil {
		s.Pending = p.pending.Info
	}
	for t, v := range p.tasks {
		s.Tasks[t] = v.ID
	}
	held := map[*Version[P]]bool{}
	for _, v := range p.roles() {
		if v != nil {
			held[v] = true
		}
	}
	for v := range p.users {
		held[v] = true
	}
	s.Held = len(held)
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

// Current returns processor's active version, its watch and what a
// rollback returns to (a zero Current for an unknown processor).
func (r *Registry[P]) Current(processor string) Current[P] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[processor]; p != nil {
		return Current[P]{Active: p.active, Canary: p.canary, Since: p.since, Back: p.back}
	}
	return Current[P]{}
}

// TakePending makes the pending proposal of processor active, under the
// watch it was proposed with; the version active until now becomes the
// one a rollback returns to, and the one that was (if it is not the new
// active one) is released once no task runs it. It returns the versions
// active before and after, or to == nil when nothing is pending or the
// proposal is the active version already. The runner calls it at a
// commit point only (no transaction open).
func (r *Registry[P]) TakePending(processor string) (from, to *Version[P]) {
	r.mu.Lock()
	var out []*Version[P]
	defer func() { r.unlock(out) }()
	p := r.procs[processor]
	if p == nil || p.pending == nil {
		return nil, nil
	}
	next, canary := p.pending, p.pendingCanary
	p.pending, p.pendingCanary = nil, Canary{}
	if next == p.active || next.ID == p.active.ID {
		p.drop(next, &out)
		return p.active, nil
	}
	from, oldBack := p.active, p.back
	p.active, p.back, p.canary, p.since = next, from, canary, time.Now()
	p.drop(oldBack, &out)
	return from, next
}

// Keep makes v processor's active version again when the one after it did
// not start: until the next proposal, tasks stay with v. Nothing is kept
// to roll back to (the version that did not start is not a target, and
// the one before v was released when v was taken in).
func (r *Registry[P]) Keep(processor string, v *Version[P]) {
	r.mu.Lock()
	var out []*Version[P]
	defer func() { r.unlock(out) }()
	p := r.procs[processor]
	if p == nil || v == nil {
		return
	}
	oldActive, oldBack := p.active, p.back
	p.active, p.back, p.canary = v, nil, Canary{}
	p.drop(oldActive, &out)
	p.drop(oldBack, &out)
}

// RollBack makes the version bad replaced active again if bad is still
// the active one (a later proposal taken in since stays) and one is held,
// and returns it; nil otherwise. Nothing is then kept to roll back to:
// bad is released once no task runs it.
func (r *Registry[P]) RollBack(processor string, bad *Version[P]) *Version[P] {
	r.mu.Lock()
	var out []*Version[P]
	defer func() { r.unlock(out) }()
	p := r.procs[processor]
	if p == nil || p.active != bad || p.back == nil {
		return nil
	}
	p.active, p.back, p.canary = p.back, nil, Canary{}
	p.drop(bad, &out)
	return p.active
}

// SetTask records the version a task of processor runs; nil removes the
// task (it was revoked or closed). A version no longer in a role is
// released when its last task leaves it.
func (r *Registry[P]) SetTask(processor, task string, v *Version[P]) {
	r.mu.Lock()
	var out []*Version[P]
	defer func() { r.unlock(out) }()
	p := r.procs[processor]
	if p == nil {
		return
	}
	old := p.tasks[task]
	if old == v {
		return
	}
	if v == nil {
		delete(p.tasks, task)
	} else {
		p.tasks[task] = v
		p.users[v]++
	}
	if old != nil {
		if p.users[old]--; p.users[old] <= 0 {
			delete(p.users, old)
		}
		p.drop(old, &out)
	}
}
