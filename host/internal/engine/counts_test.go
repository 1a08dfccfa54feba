package engine

import (
	"context"
	"testing"
)

// Counts follow what a runtime holds: a module until it is closed and its
// last instance is, every instance until it is closed, and the bytes of
// their linear memories (a discarded instance's memory goes with it; its
// revival makes it anew), and of the snapshots of their inits (one copy,
// the three inits being the same, until the last instance closes). A
// closed module hands out nothing more.
func TestCounts(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	ctx := context.Background()
	check := func(what string, want Counts) {
		t.Helper()
		if got := r.Counts(); got != want {
			t.Fatalf("%s: %+v, want %+v", what, got, want)
		}
	}
	check("new runtime", Counts{})
	m := compileFile(t, r, "trap") // 2 pages of memory
	const pages2 = 2 * PageSize
	check("compiled", Counts{Modules: 1})
	var insts []*Instance
	for range 3 {
		i, err := m.Instantiate(ctx, Binding{Name: "p", Outputs: []string{"out"}, Sink: &countSink{}})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, i)
	}
	check("3 instances", Counts{Modules: 1, Instances: 3, MemoryBytes: 3 * pages2, SnapshotBytes: pages2})
	if err := insts[0].Process(ctx, rec("boom", "v")); !IsTrap(err) {
		t.Fatalf("boom: %v", err)
	}
	check("one discarded", Counts{Modules: 1, Instances: 3, MemoryBytes: 2 * pages2, SnapshotBytes: pages2})
	if err := insts[0].Process(ctx, rec("aaaa", "v")); err != nil {
		t.Fatal(err)
	}
	check("revived", Counts{Modules: 1, Instances: 3, MemoryBytes: 3 * pages2, SnapshotBytes: pages2})
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Instantiate(ctx, Binding{Name: "p", Outputs: []string{"out"}, Sink: &countSink{}}); err == nil {
		t.Fatal("a closed module was instantiated")
	}
	check("module closed, instances live", Counts{Modules: 1, Instances: 3, MemoryBytes: 3 * pages2, SnapshotBytes: pages2})
	for n, i := range insts {
		if err := i.Close(ctx); err != nil {
			t.Fatal(err)
		}
		left := len(insts) - n - 1
		modules, snaps := 1, int64(pages2)
		if left == 0 {
			modules, snaps = 0, 0
		}
		check("instances closing", Counts{Modules: modules, Instances: left, MemoryBytes: int64(left) * pages2, SnapshotBytes: snaps})
	}
	if m.compiled != nil {
		t.Fatal("a released module still references its compiled code")
	}
}
