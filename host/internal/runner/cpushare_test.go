package runner

import (
	"testing"
)

func granted(tk *ticket) bool {
	select {
	case <-tk.granted:
		return true
	default:
		return false
	}
}

// Slots go in the order they were asked for; a cancelled request leaves
// the queue, and a cancelled grant passes its slot on.
func TestCPUShareGrantsInOrder(t *testing.T) {
	s := NewCPUShare(1)
	a := s.request()
	if !granted(a) {
		t.Fatal("the first request of a free share was not granted at once")
	}
	b, c, d := s.request(), s.request(), s.request()
	if granted(b) || granted(c) || granted(d) {
		t.Fatal("a request was granted while the only slot was held")
	}
	s.cancel(c) // leaves the queue
	s.release() // a's slot, to b
	if !granted(b) || granted(d) {
		t.Fatalf("after a's release: b granted %v, d granted %v; want b only", granted(b), granted(d))
	}
	s.cancel(b) // granted: its slot passes to d
	if !granted(d) {
		t.Fatal("a cancelled grant did not pass its slot to the next request")
	}
	if granted(c) {
		t.Fatal("a cancelled request was granted")
	}
	s.release()
	if n := s.held(); n != 0 {
		t.Fatalf("%d slots held after every grant was released; want 0", n)
	}
	if e := s.request(); !granted(e) {
		t.Fatal("a request of a share with its slot free again was not granted")
	}
}

// A share has at least one slot, whatever GOMAXPROCS.
func TestCPUShareHasASlot(t *testing.T) {
	if n := DefaultCPUSlots(); n < 1 {
		t.Fatalf("DefaultCPUSlots() = %d", n)
	}
	if !granted(NewCPUShare(0).request()) {
		t.Fatal("a share made with 0 slots granted nothing")
	}
}
