package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// budgetAccount is a MemoryAccount of budget bytes.
type budgetAccount struct {
	mu                 sync.Mutex
	held, peak, budget int64
}

func (a *budgetAccount) ChargeMemory(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held+n > a.budget {
		return fmt.Errorf("%d more bytes would pass the test's budget of %d", n, a.budget)
	}
	a.held += n
	a.peak = max(a.peak, a.held)
	return nil
}

func (a *budgetAccount) ReleaseMemory(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held -= n; a.held < 0 {
		panic("released more than was charged")
	}
}

func (a *budgetAccount) get() (held, peak int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held, a.peak
}

// An instance's linear memory is charged to its binding's account as it
// is made and grown (the capacity made ahead included), never past what
// the account grants: memory.grow returns -1 there, as at the memory
// limit. A trap drops the instance and releases its memory; the
// replacement is charged again; Close releases everything.
func TestMemoryChargedToTheAccount(t *testing.T) {
	r, _ := newRuntime(t, Options{MemoryLimit: 4 << 20})
	acct := &budgetAccount{budget: 640 << 10}
	i, _ := instantiate(t, compileFile(t, r, "membomb"), Binding{Memory: acct})
	if held, _ := acct.get(); held != 2*PageSize {
		t.Fatalf("after the start the account holds %d bytes, want the module's 2 pages", held)
	}
	err := i.Process(bg, rec("bomb", ""))
	if !IsMemoryLimit(err) || !errors.Is(err, ErrMemoryBudget) || !strings.Contains(err.Error(), "the test's budget") {
		t.Fatalf("got %v, want MemoryLimit naming the account's refusal", err)
	}
	if held, peak := acct.get(); held != 0 || peak > acct.budget || peak < acct.budget-PageSize {
		t.Fatalf("after the trap the account holds %d bytes (peak %d, budget %d): want 0, the trapped instance's memory released", held, peak, acct.budget)
	}
	// The replacement (from the snapshot) is charged; a plugin that
	// handles the refused grow keeps its instance, within the budget.
	if err := i.Process(bg, rec("soft", "")); err != nil {
		t.Fatalf("soft: %v", err)
	}
	held, _ := acct.get()
	if size := int64(i.cur.mem.Size()); held < size || held > acct.budget || held != int64(i.cur.lm.charged) {
		t.Fatalf("the account holds %d bytes for a memory of %d (charged %d, budget %d)", held, size, i.cur.lm.charged, acct.budget)
	}
	if err := i.Close(bg); err != nil {
		t.Fatal(err)
	}
	if held, _ := acct.get(); held != 0 {
		t.Fatalf("after Close the account holds %d bytes", held)
	}
}

// Instances sharing one account never hold more than it grants together.
func TestMemoryAccountSharedByInstances(t *testing.T) {
	r, _ := newRuntime(t, Options{MemoryLimit: 4 << 20})
	acct := &budgetAccount{budget: 2 << 20}
	m := compileFile(t, r, "membomb")
	var insts []*Instance
	for range 4 {
		i, _ := instantiate(t, m, Binding{Memory: acct})
		insts = append(insts, i)
	}
	for k, i := range insts {
		if err := i.Process(bg, rec("soft", "")); err != nil {
			t.Fatalf("instance %d: %v", k, err)
		}
	}
	held, peak := acct.get()
	var sizes int64
	for _, i := range insts {
		sizes += int64(i.cur.mem.Size())
	}
	if peak > acct.budget || sizes > held {
		t.Fatalf("4 instances: memories of %d bytes, account holds %d (peak %d, budget %d)", sizes, held, peak, acct.budget)
	}
	if sizes < acct.budget-4*4*PageSize {
		t.Errorf("the instances grew to %d bytes of a budget of %d: the account refused early", sizes, acct.budget)
	}
	for _, i := range insts {
		_ = i.Close(bg)
	}
	if held, _ := acct.get(); held != 0 {
		t.Fatalf("after Close the account holds %d bytes", held)
	}
}

// An instance whose initial memory the account refuses is an error
// (ErrMemoryBudget), or, with StartLater, starts without a live instance:
// its records fail (MemoryLimit, naming the budget) while the account
// refuses, nothing is charged, and the first record after the account has
// room starts it.
func TestInstanceStartsWhenTheBudgetHasRoom(t *testing.T) {
	r, logs := newRuntime(t, Options{MemoryLimit: 4 << 20})
	acct := &budgetAccount{budget: PageSize} // the module needs 2 pages
	m := compileFile(t, r, "membomb")
	if _, err := m.Instantiate(bg, Binding{Name: "proc", Memory: acct}); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("without StartLater: %v, want ErrMemoryBudget", err)
	}
	if held, _ := acct.get(); held != 0 {
		t.Fatalf("a refused instance left %d bytes charged", held)
	}
	i, _ := instantiate(t, m, Binding{Memory: acct, StartLater: true})
	if i.cur != nil || len(logs.find("does not fit the process's memory budget")) != 1 {
		t.Fatalf("the instance started (%v) or the refusal was not logged once", i.cur != nil)
	}
	err := i.Process(bg, rec("soft", ""))
	if !IsMemoryLimit(err) || !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("got %v, want MemoryLimit from the budget", err)
	}
	if held, _ := acct.get(); held != 0 {
		t.Fatalf("the account holds %d bytes for an instance that did not start", held)
	}
	acct.mu.Lock()
	acct.budget = 1 << 20
	acct.mu.Unlock()
	if err := i.Process(bg, rec("soft", "")); err != nil {
		t.Fatalf("with room: %v", err)
	}
	if held, _ := acct.get(); held == 0 || held > 1<<20 {
		t.Fatalf("the account holds %d bytes", held)
	}
}

// The snapshot of an init is charged to Options.Snapshots while an
// instance holds it (once, however many share it), and released with the
// last; when the account refuses it, no snapshot is kept and a
// replacement runs init again.
func TestSnapshotsCharged(t *testing.T) {
	acct := &budgetAccount{budget: 1 << 20}
	r, _ := newRuntime(t, Options{Snapshots: acct})
	m := compileFile(t, r, "membomb")
	a, _ := instantiate(t, m, Binding{})
	b, _ := instantiate(t, m, Binding{})
	if held, _ := acct.get(); held != 2*PageSize || a.snap == nil || a.snap != b.snap {
		t.Fatalf("two instances sharing one snapshot: the account holds %d bytes, want the snapshot's %d once", held, 2*PageSize)
	}
	_ = a.Close(bg)
	if held, _ := acct.get(); held != 2*PageSize {
		t.Fatalf("one instance left: the account holds %d bytes", held)
	}
	_ = b.Close(bg)
	if held, _ := acct.get(); held != 0 {
		t.Fatalf("no instance left: the account holds %d bytes", held)
	}

	none := &budgetAccount{budget: PageSize}
	r2, _ := newRuntime(t, Options{Snapshots: none})
	c, _ := instantiate(t, compileFile(t, r2, "membomb"), Binding{})
	if c.snap != nil {
		t.Fatal("a snapshot was kept that the account refused")
	}
	if err := c.Process(bg, rec("bomb", "")); !IsMemoryLimit(err) {
		t.Fatalf("bomb: %v", err)
	}
	if err := c.Process(bg, rec("soft", "")); err != nil { // a replacement that ran init again
		t.Fatalf("after the trap, without a snapshot: %v", err)
	}
	if held, _ := none.get(); held != 0 {
		t.Fatalf("the refusing account holds %d bytes", held)
	}
}
