package runner

import (
	"sync"
)

// Pausing a processor (`wasmstream pause`, through the control topic):
//
// Pauses holds what the operator asked, per processor; each runner applies
// it to its tasks at a commit point (applyPauses: no transaction open, no
// processed record waiting for its commit), so a pause never cuts a commit
// window in half and what was processed before it commits as usual.
//
// A paused processor's input topics are paused in the runner's client
// (PauseFetchTopics): franz-go keeps topic pauses apart from the partition
// pauses the runner makes and lifts for its own reasons (a restore, a task
// holding maxHeld records, a co-partitioned task waiting for its
// partitions), so none of those resumes a paused processor, a client
// shared by several processors (kafka.members: shared) pauses only the
// paused one's inputs, and partitions assigned after a rebalance are
// paused from the start. Buffered records of a paused topic are dropped by
// the client at the next poll and fetched again on resume, from the
// position the task reached. Records a task already holds in its window
// wait there: a paused task processes nothing, fires no timer and makes
// no commit-point call (its stream time does not move either), but keeps
// its assignment, its state and its committed offsets, and answers
// rebalances as usual. Its restore, if one runs, goes on (restore.go reads
// the changelog with a client of its own), so a resumed task starts at
// once.

// Pauses is the registry of paused processors: written by the control
// topic's follower, read by every runner of the process. Safe for
// concurrent use.
type Pauses struct {
	mu     sync.Mutex
	paused map[string]bool
	// wake is, by processor, the wake-up of the runner that runs it now
	// (a runner that replaces a failed one replaces its callbacks).
	wake map[string]func()
}

// NewPauses returns a registry with no processor paused.
func NewPauses() *Pauses { return &Pauses{paused: map[string]bool{}, wake: map[string]func(){}} }

// Set pauses or resumes processor; the runners apply it at their next
// commit point. It reports whether that changed anything.
func (p *Pauses) Set(processor string, paused bool) bool {
	p.mu.Lock()
	if p.paused[processor] == paused {
		p.mu.Unlock()
		return false
	}
	if paused {
		p.paused[processor] = true
	} else {
		delete(p.paused, processor)
	}
	wake := p.wake[processor]
	p.mu.Unlock()
	if wake != nil {
		wake()
	}
	return true
}

// Paused reports whether processor is to be paused.
func (p *Pauses) Paused(processor string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[processor]
}

// onChange registers fn, called (on Set's goroutine) after every change
// of processor's pause, in place of the one registered before.
func (p *Pauses) onChange(processor string, fn func()) {
	p.mu.Lock()
	p.wake[processor] = fn
	p.mu.Unlock()
}

// applyPauses pauses or resumes the fetching of each processor whose
// pause in the registry differs from what the runner applies. Called by
// the loop under r.mu, and acts only at a commit point (nothing processed
// waits for a commit), like advanceSwaps.
func (r *Runner) applyPauses() {
	if r.cp.holds() {
		return
	}
	for _, ps := range r.procs {
		want := r.pauses.Paused(ps.spec.Name)
		if want == ps.paused.Load() {
			continue
		}
		if want {
			r.cl.PauseFetchTopics(ps.spec.Inputs...)
			r.log.Warn("processor paused: its inputs are not fetched and its tasks process nothing until it is resumed",
				"processor", ps.spec.Name)
		} else {
			r.cl.ResumeFetchTopics(ps.spec.Inputs...)
			r.log.Info("processor resumed", "processor", ps.spec.Name)
		}
		ps.paused.Store(want)
	}
}

// Paused reports whether the runner has paused the named processor (the
// pause took effect at a commit point). Safe for concurrent use.
func (r *Runner) Paused(processor string) bool {
	for _, ps := range r.procs {
		if ps.spec.Name == processor {
			return ps.paused.Load()
		}
	}
	return false
}

// runs reports whether t may make calls into its plugin now: not
// restoring, not stopped on a failure, its processor not paused.
func (t *task) runs() bool {
	return t.restoring == nil && t.failed == nil && !t.proc.paused.Load()
}
