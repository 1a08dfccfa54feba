package runner

import (
	"maps"
	"sync/atomic"
)

// Serving is the tasks a runner holds as interactive queries see them
// (host/internal/query): by task, whether its state may be read (true), or
// not (false: restoring, or stopped on a failure, whose state may be
// incomplete). A task not in the map is not this runner's, or is being
// closed. Gen grows with every change, so a reader that saw the same Gen
// before and after a read knows no task came or went meanwhile.
type Serving struct {
	Gen   uint64
	Tasks map[TaskID]bool
}

// servingOf holds the published Serving; the loop and the group callbacks
// replace it (publishServing), readers load it without a lock.
type servingOf struct {
	cur atomic.Pointer[Serving]
}

// Serving returns the tasks this runner holds and whether each one's
// state may be read now. Safe for concurrent use; the map is not to be
// changed.
func (r *Runner) Serving() *Serving {
	if s := r.serving.cur.Load(); s != nil {
		return s
	}
	return &Serving{}
}

// publishServing publishes the tasks as they stand, if that changed
// anything. The caller holds r.mu. except lists tasks that are leaving
// (a revoke or a loss in progress): they are left out already.
func (r *Runner) publishServing(except map[TaskID]bool) {
	prev := r.serving.cur.Load()
	if prev != nil && r.servingAsIs(prev.Tasks, except) {
		return // the loop's every turn: no allocation while nothing changed
	}
	next := make(map[TaskID]bool, len(r.tasks))
	for id, t := range r.tasks {
		if !except[id] {
			next[id] = t.restoring == nil && t.failed == nil
		}
	}
	gen := uint64(1)
	if prev != nil {
		gen = prev.Gen + 1
	}
	r.serving.cur.Store(&Serving{Gen: gen, Tasks: next})
}

// servingAsIs reports whether published is what publishServing would
// publish now.
func (r *Runner) servingAsIs(published map[TaskID]bool, except map[TaskID]bool) bool {
	n := 0
	for id, t := range r.tasks {
		if except[id] {
			continue
		}
		n++
		if ready, ok := published[id]; !ok || ready != (t.restoring == nil && t.failed == nil) {
			return false
		}
	}
	return n == len(published)
}

// leaving is the tasks of parts (a revoke or a loss) this runner holds.
func (r *Runner) leaving(parts map[string][]int32) map[TaskID]bool {
	out := map[TaskID]bool{}
	for topic, ps := range parts {
		for _, p := range ps {
			if id := r.taskID(topic, p); r.tasks[id] != nil {
				out[id] = true
			}
		}
	}
	return out
}

// withdraw removes the tasks of parts from the published Serving without
// r.mu: a revoke or loss queued while a transaction ends (eos.go) returns
// to the client at once, and the partitions may be another member's before
// the loop closes the tasks. It reads only what New fixed (r.byTopic).
func (s *servingOf) withdraw(r *Runner, parts map[string][]int32) {
	for {
		prev := s.cur.Load()
		if prev == nil {
			return
		}
		next := maps.Clone(prev.Tasks)
		for topic, ps := range parts {
			for _, p := range ps {
				delete(next, r.taskID(topic, p))
			}
		}
		if len(next) == len(prev.Tasks) {
			return
		}
		if s.cur.CompareAndSwap(prev, &Serving{Gen: prev.Gen + 1, Tasks: next}) {
			return
		}
	}
}
