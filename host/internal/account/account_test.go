package account

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// check asserts an account's figures and its pool's.
func check(t *testing.T, a *Account, held, granted int64) {
	t.Helper()
	if a.Held() != held {
		t.Fatalf("held %d, want %d", a.Held(), held)
	}
	if a.granted != granted {
		t.Fatalf("granted %d, want %d", a.granted, granted)
	}
}

func TestChargeAndReleaseOnCommit(t *testing.T) {
	p := NewPool(1 << 30)
	var gauge atomic.Int64
	a := p.Open(4*Grant, &gauge)
	if err := a.Charge(100); err != nil {
		t.Fatal(err)
	}
	check(t, a, 100, Grant)
	if p.Granted() != Grant || gauge.Load() != Grant {
		t.Fatalf("pool %d gauge %d, want one grant", p.Granted(), gauge.Load())
	}
	if err := a.Charge(Grant); err != nil { // passes the first grant
		t.Fatal(err)
	}
	check(t, a, Grant+100, 2*Grant)
	if a.Heavy() {
		t.Fatal("heavy below the budget")
	}
	if err := a.Charge(3 * Grant); err != nil {
		t.Fatal(err)
	}
	if !a.Heavy() {
		t.Fatal("not heavy at the budget")
	}
	a.WindowEnded(0) // committed
	check(t, a, 0, 0)
	if p.Granted() != 0 || gauge.Load() != 0 || a.Heavy() {
		t.Fatalf("after the commit: pool %d gauge %d heavy %v", p.Granted(), gauge.Load(), a.Heavy())
	}
	if a.Peak() != 4*Grant+100 {
		t.Fatalf("peak %d", a.Peak())
	}
}

// An aborted window is released like a committed one; carried marks stay
// held (and granted) until a later window ends without them.
func TestReleaseOnAbortKeepsCarried(t *testing.T) {
	p := NewPool(0)
	a := p.Open(1<<20, nil)
	if err := a.Charge(3 * Grant); err != nil {
		t.Fatal(err)
	}
	a.WindowEnded(1000) // dropped, 1000 bytes of marks carried
	check(t, a, 1000, Grant)
	if err := a.Charge(10); err != nil {
		t.Fatal(err)
	}
	check(t, a, 1010, Grant)
	a.WindowEnded(0)
	check(t, a, 0, 0)
}

func TestCloseReleasesEverything(t *testing.T) {
	p := NewPool(1 << 30)
	var gauge atomic.Int64
	a, b := p.Open(1<<20, &gauge), p.Open(1<<20, &gauge)
	for _, x := range []*Account{a, b} {
		if err := x.Charge(5000); err != nil {
			t.Fatal(err)
		}
	}
	a.WindowEnded(700)
	a.Close()
	a.Close() // idempotent
	if p.Granted() != Grant || gauge.Load() != Grant || p.accounts.Load() != 1 {
		t.Fatalf("after one close: pool %d gauge %d accounts %d", p.Granted(), gauge.Load(), p.accounts.Load())
	}
	b.Close()
	if p.Granted() != 0 || gauge.Load() != 0 || p.accounts.Load() != 0 {
		t.Fatalf("after both: pool %d gauge %d accounts %d", p.Granted(), gauge.Load(), p.accounts.Load())
	}
}

func TestHardCap(t *testing.T) {
	a := NewPool(0).Open(1000, nil)
	if err := a.Charge(2000); err != nil {
		t.Fatal(err) // exactly the cap
	}
	err := a.Charge(1)
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || le.Process || le.Limit != 2000 || le.Held != 2000 {
		t.Fatalf("charge past the cap: %v", err)
	}
	check(t, a, 2000, Grant) // the refused charge left nothing
	a.WindowEnded(0)
	if err := a.Charge(1); err != nil {
		t.Fatal(err)
	}
}

func TestPoolBudget(t *testing.T) {
	p := NewPool(3*Grant + 10)
	a, b := p.Open(1<<30, nil), p.Open(1<<30, nil)
	if err := a.Charge(2 * Grant); err != nil {
		t.Fatal(err)
	}
	if err := b.Charge(Grant); err != nil {
		t.Fatal(err)
	}
	if err := b.Charge(5); err != nil { // the rounded grant does not fit, the exact one does
		t.Fatal(err)
	}
	err := b.Charge(10)
	var le *LimitError
	if !errors.As(err, &le) || !le.Process {
		t.Fatalf("charge past the pool: %v", err)
	}
	if p.Granted() > p.Budget() {
		t.Fatalf("granted %d over the budget %d", p.Granted(), p.Budget())
	}
	a.WindowEnded(0)
	if err := b.Charge(10); err != nil {
		t.Fatalf("after a released: %v", err)
	}
}

// Past half the pool's budget the accounts above the average are heavy,
// whatever their own budgets.
func TestPoolPressure(t *testing.T) {
	p := NewPool(8 * Grant)
	big, small, idle := p.Open(1<<30, nil), p.Open(1<<30, nil), p.Open(1<<30, nil)
	if err := big.Charge(3 * Grant); err != nil {
		t.Fatal(err)
	}
	if err := small.Charge(1); err != nil {
		t.Fatal(err)
	}
	if big.Heavy() || small.Heavy() {
		t.Fatal("heavy at half the pool")
	}
	if err := big.Charge(Grant); err != nil { // 5 grants of 8
		t.Fatal(err)
	}
	if !big.Heavy() || small.Heavy() || idle.Heavy() {
		t.Fatalf("under pressure: big %v small %v idle %v", big.Heavy(), small.Heavy(), idle.Heavy())
	}
	big.WindowEnded(0)
	if big.Heavy() {
		t.Fatal("heavy after its window ended")
	}
}

// Many accounts charging at once never take the pool past its budget.
func TestPoolConcurrent(t *testing.T) {
	p := NewPool(40 * Grant)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 32 {
		a := p.Open(1<<30, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if err := a.Charge(Grant / 3); err != nil {
					refused.Add(1)
					a.WindowEnded(0)
				}
				if g := p.Granted(); g > p.Budget() {
					t.Errorf("granted %d over the budget %d", g, p.Budget())
					return
				}
			}
			a.Close()
		}()
	}
	wg.Wait()
	if p.Granted() != 0 || refused.Load() == 0 {
		t.Fatalf("granted %d after every close; %d refusals", p.Granted(), refused.Load())
	}
}

// BenchmarkCharge is the cost the common path pays per staged emit or
// state write: a charge inside the task's grant, a window ended every
// 1,000 charges (a commit point), one heavy check per charge (the runner's
// per call).
func BenchmarkCharge(b *testing.B) {
	p := NewPool(1 << 30)
	var gauge atomic.Int64
	a := p.Open(64<<20, &gauge)
	n := 0
	for b.Loop() {
		if err := a.Charge(120); err != nil {
			b.Fatal(err)
		}
		if a.Heavy() {
			b.Fatal("heavy")
		}
		if n++; n == 1000 {
			a.WindowEnded(0)
			n = 0
		}
	}
}

// The input a task holds is granted from the pool below half its budget
// only: past that SetInput reports it ungranted (the runner stops
// fetching), and a plugin's charge still finds its room; processing the
// input returns its grants; Close returns them all.
func TestInputIsGrantedBelowHalfThePool(t *testing.T) {
	p := NewPool(8 * Grant)
	var gauge atomic.Int64
	a := p.Open(2*Grant, &gauge)
	if !a.SetInput(3*Grant + 1) {
		t.Fatal("input below half the pool was not granted")
	}
	if a.inputGranted != 4*Grant || p.Granted() != 4*Grant || gauge.Load() != 4*Grant {
		t.Fatalf("input granted %d, pool %d, gauge %d; want 4 grants", a.inputGranted, p.Granted(), gauge.Load())
	}
	if a.Input() != 3*Grant+1 || a.Held() != 0 {
		t.Fatalf("input %d, window held %d", a.Input(), a.Held())
	}
	if a.SetInput(4*Grant + 1) {
		t.Fatal("input past half the pool was granted")
	}
	if a.Input() != 4*Grant+1 || p.Granted() != 4*Grant {
		t.Fatalf("refused input: input %d (the bytes are held anyway), pool %d (nothing more granted)", a.Input(), p.Granted())
	}
	// A plugin's charge takes the other half.
	if err := a.Charge(3 * Grant); err != nil {
		t.Fatalf("a charge beside input at half the pool: %v", err)
	}
	if !a.Heavy() {
		t.Fatal("a window at 1.5 budgets is not heavy")
	}
	a.WindowEnded(0)
	if p.Granted() != 4*Grant {
		t.Fatalf("after the window: pool %d, want the input's 4 grants", p.Granted())
	}
	if !a.SetInput(Grant) {
		t.Fatal("processed input")
	}
	if a.inputGranted != Grant || p.Granted() != Grant {
		t.Fatalf("processed input returns its grants: input granted %d, pool %d", a.inputGranted, p.Granted())
	}
	a.Close()
	if p.Granted() != 0 || gauge.Load() != 0 || a.Input() != 0 {
		t.Fatalf("after Close: pool %d gauge %d input %d", p.Granted(), gauge.Load(), a.Input())
	}
	// No pool: always granted.
	var none *Pool
	b := none.Open(Grant, nil)
	if !b.SetInput(1 << 40) {
		t.Fatal("input refused without a pool")
	}
	b.Close()
}
