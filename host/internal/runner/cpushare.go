package runner

import (
	"runtime"
	"slices"
	"sync"
)

// CPUShare is the process's slots for heavy guest work (I9):
// a task whose records cost more than heavyCost of plugin time (its
// shadow candidate's included: task.shadowTime), or a new task of a
// processor with such a task (heavyTask), runs its batch only
// while it holds a slot, and the process has one fewer slot than
// GOMAXPROCS (at least one).
//
// Why: compiled guest code keeps its OS thread until it passes through Go
// (engine/instrument.go: every checkPeriod checks), and the Go scheduler
// preempts a running goroutine only after 10 ms; with every P held by a
// spinning guest, each hop of a healthy processor's commit path (fetch,
// produce, commit, the network poller) waited for one, and its p99 commit
// latency grew 6.6 times on 2 cores with kfake, 2.3 times with Kafka
// (host/cpu_test.go). Heavy work held to
// GOMAXPROCS-1 Ps leaves one for everything else: the Kafka I/O, the
// commit points and the cheap tasks, which never wait for a slot.
//
// Fairness: a runner asks for one slot at a time (a ticket) and keeps its
// ticket across polls until it is granted, and slots are granted in the
// order they were asked for, so with members per processor the heavy
// processors take turns, each a batch (up to its commit point and one
// record past it), whatever how many tasks each has: a processor with
// heavy work waits at most one batch of each other heavy processor.
type CPUShare struct {
	mu     sync.Mutex
	free   int
	queue  []*ticket // waiting, first asked first
	active int       // slots held or granted, for tests
}

// ticket is one request for a slot; granted is closed when it is granted.
type ticket struct {
	granted chan struct{}
}

// NewCPUShare returns a share of n slots (at least one).
func NewCPUShare(n int) *CPUShare {
	n = max(1, n)
	return &CPUShare{free: n}
}

// DefaultCPUSlots is GOMAXPROCS-1, at least one: the slots of a process's
// CPUShare.
func DefaultCPUSlots() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// request asks for a slot: granted at once if one is free, else when the
// requests before it were.
func (s *CPUShare) request() *ticket {
	tk := &ticket{granted: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 {
		s.free--
		s.active++
		close(tk.granted)
	} else {
		s.queue = append(s.queue, tk)
	}
	return tk
}

// release returns a granted slot: to the first waiting ticket, if any.
func (s *CPUShare) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		tk := s.queue[0]
		s.queue = s.queue[1:]
		close(tk.granted)
		return
	}
	s.free++
	s.active--
}

// cancel gives up tk: it leaves the queue, or its slot is released if it
// was granted meanwhile.
func (s *CPUShare) cancel(tk *ticket) {
	s.mu.Lock()
	if i := slices.Index(s.queue, tk); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.release()
}

// held is how many slots are held or granted.
func (s *CPUShare) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}
