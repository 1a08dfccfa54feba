package versions

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"
)

// released records the plugins a registry released, in order.
type released struct{ got []string }

func (r *released) fn(p string) { r.got = append(r.got, p) }

// The registry is the one record of the active version: a proposal becomes
// active only when taken in, a version that does not start is kept back,
// and a rollback returns to what was active before, unless a later
// version was taken in since.
func TestLifecycle(t *testing.T) {
	var rel released
	r := New(rel.fn)
	if !r.Start("p", Info{ID: "v1", Hash: "h1"}, "plugin-1") || r.Start("p", Info{ID: "other"}, "x") {
		t.Fatal("Start: the first must register, the second must not")
	}
	woken, other := 0, 0
	r.OnPropose("p", func() { woken++ })
	r.OnPropose("q", func() { other++ }) // another runner's processor: not told
	if err := r.Propose("nope", Info{ID: "v2"}, "plugin-nope", Canary{}); err == nil {
		t.Fatal("a proposal for an unknown processor succeeded")
	}
	if !slices.Equal(rel.got, []string{"plugin-nope"}) {
		t.Fatalf("released %v, want the refused proposal's plugin", rel.got)
	}
	rel.got = nil
	i2 := Info{ID: "v2", Hash: "h2", Size: 10}
	watch := Canary{Window: time.Minute}
	if err := r.Propose("p", i2, "plugin-2", watch); err != nil {
		t.Fatal(err)
	}
	if woken != 1 || other != 0 {
		t.Fatalf("p's runner woken %d times, want 1; q's %d, want 0", woken, other)
	}
	if tg, _ := r.Target("p"); tg.ID != "v2" {
		t.Fatalf("target %q, want v2", tg.ID)
	}
	if s, _ := r.Snapshot("p"); s.Active.ID != "v1" || s.Pending.ID != "v2" || s.Held != 2 {
		t.Fatalf("before the runner took the proposal in: %+v", s)
	}
	from, to := r.TakePending("p")
	if from.ID != "v1" || to.ID != "v2" || to.Plugin != "plugin-2" || r.Active("p") != to {
		t.Fatalf("TakePending: from %+v to %+v", from, to)
	}
	if c := r.Current("p"); c.Active != to || c.Back != from || c.Canary != watch {
		t.Fatalf("Current after taking v2 in: %+v", c)
	}
	if _, to := r.TakePending("p"); to != nil {
		t.Fatal("a proposal was taken in twice")
	}
	// A version that does not start: the previous one stays active, and
	// nothing is left to roll back to; v2 is released.
	r.Keep("p", from)
	if c := r.Current("p"); c.Active != from || c.Back != nil || c.Canary != (Canary{}) {
		t.Fatalf("Current after Keep: %+v", c)
	}
	if !slices.Equal(rel.got, []string{"plugin-2"}) {
		t.Fatalf("released %v after Keep, want [plugin-2]", rel.got)
	}
	// Proposed again and taken in; then a third is taken in before the
	// rollback of the second lands: the third stays.
	_ = r.Propose("p", i2, "plugin-2b", Canary{})
	_, v2 := r.TakePending("p")
	_ = r.Propose("p", Info{ID: "v3"}, "plugin-3", watch)
	_, v3 := r.TakePending("p")
	if !slices.Equal(rel.got, []string{"plugin-2", "plugin-1"}) {
		t.Fatalf("released %v, want v1 released once v3 was taken in (v2 is what a rollback returns to)", rel.got)
	}
	if back := r.RollBack("p", v2); back != nil || r.Active("p") != v3 {
		t.Fatalf("a stale rollback returned %v, active %q, want nil and v3", back, r.Active("p").ID)
	}
	if back := r.RollBack("p", v3); back != v2 || r.Active("p") != v2 {
		t.Fatalf("rolling v3 back returned %v, active %q, want v2", back, r.Active("p").ID)
	}
	if c := r.Current("p"); c.Back != nil || c.Canary != (Canary{}) {
		t.Fatalf("after the rollback: %+v, want nothing to roll back to and no watch", c)
	}
	if !slices.Equal(rel.got, []string{"plugin-2", "plugin-1", "plugin-3"}) {
		t.Fatalf("released %v, want v3 released by its rollback", rel.got)
	}
	// Proposing the active version changes nothing; its new plugin is
	// released, the active one is not.
	_ = r.Propose("p", i2, "plugin-2c", Canary{})
	if _, to := r.TakePending("p"); to != nil || r.Active("p") != v2 {
		t.Fatal("the active version was taken in again")
	}
	if rel.got[len(rel.got)-1] != "plugin-2c" {
		t.Fatalf("released %v, want the redundant proposal's plugin last", rel.got)
	}
	if v, ok := r.Lookup("p", "v2"); !ok || v.Hash != "h2" || v.Size != 10 {
		t.Fatalf("Lookup v2: %+v %v", v, ok)
	}
	if v, ok := r.Lookup("p", "v3"); !ok || v.ID != "v3" {
		t.Fatalf("Lookup of the released v3: %+v %v", v, ok)
	}
}

// However many versions are taken in, the registry holds the active one
// and the one before it, plus those tasks still run; every other version
// is released exactly once, when its last task leaves it.
func TestHeldVersionsBounded(t *testing.T) {
	var rel released
	r := New(rel.fn)
	r.Start("p", Info{ID: "v0"}, "plugin-0")
	r.SetTask("p", "t0", r.Active("p"))
	r.SetTask("p", "t1", r.Active("p"))
	const n = 200
	for i := 1; i <= n; i++ {
		id := "v" + strconv.Itoa(i)
		if err := r.Propose("p", Info{ID: id}, "plugin-"+strconv.Itoa(i), Canary{}); err != nil {
			t.Fatal(err)
		}
		_, to := r.TakePending("p")
		// t0 follows at once; t1 lags one version behind.
		r.SetTask("p", "t0", to)
		if i%2 == 0 {
			r.SetTask("p", "t1", to)
		}
		s, _ := r.Snapshot("p")
		if s.Held > 3 {
			t.Fatalf("after %d versions the processor holds %d, want at most 3", i, s.Held)
		}
	}
	s, _ := r.Snapshot("p")
	if s.Held != 2 || s.Back.ID != "v199" || s.Active.ID != "v200" {
		t.Fatalf("at rest: %+v, want v200 active and v199 held to roll back to", s)
	}
	if len(rel.got) != n-1 {
		t.Fatalf("released %d versions, want %d", len(rel.got), n-1)
	}
	seen := map[string]bool{}
	for _, p := range rel.got {
		if seen[p] {
			t.Fatalf("%s released twice", p)
		}
		seen[p] = true
	}
	if seen["plugin-199"] || seen["plugin-200"] {
		t.Fatal("a held version was released")
	}
	// The tasks leave: their versions are still held by roles.
	r.SetTask("p", "t0", nil)
	r.SetTask("p", "t1", nil)
	if len(rel.got) != n-1 {
		t.Fatal("a version in a role was released when its tasks left")
	}
	// Only the latest released versions are remembered.
	if _, ok := r.Lookup("p", "v1"); ok {
		t.Fatal("the registry remembers every version it ever released")
	}
}

// A version a task still runs is not released with its role: a task that
// lags behind two swaps keeps its instance's module until it moves on.
func TestTaskHoldsItsVersion(t *testing.T) {
	var rel released
	r := New(rel.fn)
	r.Start("p", Info{ID: "v1"}, "plugin-1")
	r.SetTask("p", "t", r.Active("p"))
	for _, i := range []string{"2", "3"} {
		_ = r.Propose("p", Info{ID: "v" + i}, "plugin-"+i, Canary{})
		r.TakePending("p")
	}
	if len(rel.got) != 0 {
		t.Fatalf("released %v while a task runs v1", rel.got)
	}
	if s, _ := r.Snapshot("p"); s.Held != 3 || s.Tasks["t"] != "v1" {
		t.Fatalf("%+v", s)
	}
	r.SetTask("p", "t", r.Active("p"))
	if !slices.Equal(rel.got, []string{"plugin-1"}) {
		t.Fatalf("released %v once the task moved on, want [plugin-1]", rel.got)
	}
}

// A rollback through the control topic to the version before the active
// one proposes the held version again: no new plugin, and the roles swap.
func TestProposeHeld(t *testing.T) {
	var rel released
	r := New(rel.fn)
	r.Start("p", Info{ID: "v1", Hash: "h1"}, "plugin-1")
	_ = r.Propose("p", Info{ID: "v2", Hash: "h2"}, "plugin-2", Canary{})
	v1 := r.Active("p")
	r.TakePending("p")
	v2 := r.Active("p")
	if _, ok := r.ProposeHeld("p", "h2", Canary{}); ok {
		t.Fatal("the active version was proposed again")
	}
	if _, ok := r.ProposeHeld("p", "h9", Canary{}); ok {
		t.Fatal("a version not held was found")
	}
	info, ok := r.ProposeHeld("p", "h1", Canary{})
	if !ok || info.ID != "v1" {
		t.Fatalf("ProposeHeld h1: %+v %v", info, ok)
	}
	if _, to := r.TakePending("p"); to != v1 {
		t.Fatalf("took in %v, want the held v1", to)
	}
	if c := r.Current("p"); c.Active != v1 || c.Back != v2 {
		t.Fatalf("after the held rollback: %+v, want v1 active and v2 to roll forward to", c)
	}
	if len(rel.got) != 0 {
		t.Fatalf("released %v, want nothing (both versions are held)", rel.got)
	}
	// A new proposal replaces one not taken in: the replaced one is
	// released unless held.
	_ = r.Propose("p", Info{ID: "v3"}, "plugin-3", Canary{})
	_ = r.Propose("p", Info{ID: "v4"}, "plugin-4", Canary{})
	if !slices.Equal(rel.got, []string{"plugin-3"}) {
		t.Fatalf("released %v, want the replaced proposal", rel.got)
	}
	if _, ok := r.ProposeHeld("p", "h2", Canary{}); !ok {
		t.Fatal("the held back version was not found")
	}
	if !slices.Equal(rel.got, []string{"plugin-3", "plugin-4"}) {
		t.Fatalf("released %v", rel.got)
	}
}

func TestTasksAndRefusals(t *testing.T) {
	r := New[int](nil)
	r.Start("p", Info{ID: "v1"}, 1)
	v1 := r.Active("p")
	r.SetTask("p", "p/in/0", v1)
	r.SetTask("p", "p/in/1", v1)
	r.SetTask("p", "p/in/1", nil)
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
