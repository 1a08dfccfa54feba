package versions

import (
	"errors"
	"testing"
	"time"
)

// The registry is the one record of the active version: a proposal becomes
// active only when taken in, a version that does not start is kept back,
// and a rollback returns to what was active before, unless a later
// version was taken in since.
func TestLifecycle(t *testing.T) {
	r := New[string]()
	if !r.Start("p", Info{ID: "v1", Hash: "h1"}, "plugin-1") || r.Start("p", Info{ID: "other"}, "x") {
		t.Fatal("Start: the first must register, the second must not")
	}
	woken, other := 0, 0
	r.OnPropose("p", func() { woken++ })
	r.OnPropose("q", func() { other++ }) // another runner's processor: not told
	if err := r.Propose("nope", Info{ID: "v2"}, "plugin-2", Canary{}); err == nil {
		t.Fatal("a proposal for an unknown processor succeeded")
	}
	i2 := Info{ID: "v2", Hash: "h2", Size: 10}
	if err := r.Propose("p", i2, "plugin-2", Canary{Window: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if woken != 1 || other != 0 {
		t.Fatalf("p's runner woken %d times, want 1; q's %d, want 0", woken, other)
	}
	if tg, _ := r.Target("p"); tg.ID != "v2" {
		t.Fatalf("target %q, want v2", tg.ID)
	}
	if s, _ := r.Snapshot("p"); s.Active.ID != "v1" {
		t.Fatalf("active %q before the runner took the proposal in, want v1", s.Active.ID)
	}
	from, to := r.TakePending("p")
	if from.ID != "v1" || to.ID != "v2" || to.Prev != from || to.Plugin != "plugin-2" || r.Active("p") != to {
		t.Fatalf("TakePending: from %+v to %+v", from, to)
	}
	if _, to := r.TakePending("p"); to != nil {
		t.Fatal("a proposal was taken in twice")
	}
	// A version that does not start: the previous one stays active.
	r.Keep("p", from)
	if r.Active("p") != from {
		t.Fatal("Keep did not restore the previous version")
	}
	// Proposed again and taken in; then a third is taken in before the
	// rollback of the second lands: the third stays.
	_ = r.Propose("p", i2, "plugin-2", Canary{})
	_, v2 := r.TakePending("p")
	_ = r.Propose("p", Info{ID: "v3"}, "plugin-3", Canary{})
	_, v3 := r.TakePending("p")
	r.RollBack("p", v2)
	if r.Active("p") != v3 {
		t.Fatalf("active %q after a stale rollback, want v3", r.Active("p").ID)
	}
	r.RollBack("p", v3)
	if r.Active("p") != v2 {
		t.Fatalf("active %q after rolling v3 back, want v2", r.Active("p").ID)
	}
	// Proposing the active version changes nothing.
	_ = r.Propose("p", i2, "plugin-2", Canary{})
	if _, to := r.TakePending("p"); to != nil || r.Active("p") != v2 {
		t.Fatal("the active version was taken in again")
	}
	if v, ok := r.Lookup("p", "v2"); !ok || v.Hash != "h2" || v.Size != 10 {
		t.Fatalf("Lookup v2: %+v %v", v, ok)
	}
}

func TestTasksAndRefusals(t *testing.T) {
	r := New[int]()
	r.Start("p", Info{ID: "v1"}, 1)
	r.SetTask("p", "p/in/0", "v1")
	r.SetTask("p", "p/in/1", "v1")
	r.SetTask("p", "p/in/1", "")
	for i := 0; i < MaxRefusals+3; i++ {
		if running := r.Refuse("p", Info{ID: "bad"}, errors.New("too big"), time.Now()); running != "v1" {
			t.Fatalf("Refuse says %q runs, want v1", running)
		}
	}
	s, ok := r.Snapshot("p")
	if !ok || len(s.Tasks) != 1 || s.Tasks["p/in/0"] != "v1" {
		t.Fatalf("tasks %v", s.Tasks)
	}
	if len(s.Refused) != MaxRefusals || s.Refusals != MaxRefusals+3 || s.Refused[0].Reason != "too big" {
		t.Fatalf("refused %d kept of %d: %+v", len(s.Refused), s.Refusals, s.Refused)
	}
	// The snapshot is a copy.
	s.Tasks["x"] = "y"
	if s2, _ := r.Snapshot("p"); len(s2.Tasks) != 1 {
		t.Fatal("a snapshot shares the registry's map")
	}
}
