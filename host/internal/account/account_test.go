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

// Instances' memory is charged to the task's account and the pool apart
// from the window, within the instances' room: past it a charge is
// refused (nothing charged); it counts against the budget the windows
// share, and a commit point does not release it.
func TestInstanceMemoryInTheBudget(t *testing.T) {
	p := NewPool(16 * Grant)
	p.SetInstanceRoom(12 * Grant)
	var gauge atomic.Int64
	a := p.Open(2*Grant, nil)
	a.SetMemoryGauge(&gauge)
	if err := a.ChargeMemory(10 * Grant); err != nil {
		t.Fatal(err)
	}
	if p.Memory() != 10*Grant || p.Used() != 10*Grant || a.Memory() != 10*Grant || gauge.Load() != 10*Grant {
		t.Fatalf("pool memory %d used %d, account %d, gauge %d", p.Memory(), p.Used(), a.Memory(), gauge.Load())
	}
	err := a.ChargeMemory(3 * Grant)
	var le *LimitError
	if !errors.As(err, &le) || !le.Instances || le.Limit != 12*Grant || p.Memory() != 10*Grant {
		t.Fatalf("past the instances' room: %v (pool memory %d)", err, p.Memory())
	}
	// The windows take the rest of the budget, and no more.
	if err := a.Charge(4 * Grant); err != nil {
		t.Fatal(err)
	}
	if err := a.Charge(3 * Grant); !errors.Is(err, ErrLimit) {
		t.Fatalf("a window charge past the budget the instances share: %v", err)
	}
	// Input takes at most half of what the instances leave.
	if a.SetInput(2 * Grant) {
		t.Fatalf("input granted past half of what the instances leave (used %d)", p.Used())
	}
	a.WindowEnded(0)
	if p.Memory() != 10*Grant || p.Used() != 10*Grant {
		t.Fatalf("a commit point released instance memory: memory %d used %d", p.Memory(), p.Used())
	}
	if err := a.ChargeMemory(2 * Grant); err != nil {
		t.Fatalf("up to the room: %v", err)
	}
	// An instance outlives its task's account: it releases after Close.
	a.Close()
	a.ReleaseMemory(12 * Grant)
	if p.Memory() != 0 || p.Used() != 0 || gauge.Load() != 0 || a.Memory() != 0 {
		t.Fatalf("after release: pool memory %d used %d gauge %d", p.Memory(), p.Used(), gauge.Load())
	}
	if p.Peak() != 14*Grant {
		t.Fatalf("peak %d, want 14 grants: the instances' and the windows' bytes together", p.Peak())
	}
}

// Past what the other tasks' shares leave of the room, only a task
// within its share grows: a plugin whose many tasks each grow to their
// limit cannot take the room a neighbour's instance needs to start.
func TestInstanceMemoryShare(t *testing.T) {
	const room = 64 * Grant
	p := NewPool(2 * room)
	p.SetInstanceRoom(room)
	var greedy []*Account
	for range 7 {
		greedy = append(greedy, p.Open(Grant, nil))
	}
	neighbour := p.Open(Grant, nil)
	// 8 accounts: a share is room/16; the greedy ones grow to what the
	// others' shares leave, room - 7 x room/16.
	for {
		grew := false
		for _, a := range greedy {
			if a.ChargeMemory(Grant) == nil {
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	share := int64(room / 16)
	if p.Memory() > room-7*share || p.Memory() < room-7*share-7*Grant {
		t.Fatalf("the greedy tasks hold %d, want about %d (the room less the others' shares)", p.Memory(), room-7*share)
	}
	var le *LimitError
	if err := greedy[0].ChargeMemory(Grant); !errors.As(err, &le) || !le.Share {
		t.Fatalf("a greedy task past its share: %v", err)
	}
	if err := neighbour.ChargeMemory(share); err != nil {
		t.Fatalf("the neighbour could not take its share: %v", err)
	}
	// Alone, a task may take the whole room.
	q := NewPool(2 * room)
	q.SetInstanceRoom(room)
	if err := q.Open(Grant, nil).ChargeMemory(room); err != nil {
		t.Fatalf("a lone task: %v", err)
	}
}

// What no task holds alone (an init's snapshot) is charged to the pool,
// within the instances' room, without a share.
func TestPoolMemory(t *testing.T) {
	p := NewPool(16 * Grant)
	p.SetInstanceRoom(8 * Grant)
	for range 4 {
		p.Open(Grant, nil) // shares of a sixteenth of the room
	}
	if err := p.ChargeMemory(6 * Grant); err != nil {
		t.Fatalf("no share applies to the pool's own charge: %v", err)
	}
	if err := p.ChargeMemory(3 * Grant); !errors.Is(err, ErrLimit) {
		t.Fatalf("past the room: %v", err)
	}
	p.ReleaseMemory(6 * Grant)
	if p.Memory() != 0 || p.Used() != 0 {
		t.Fatalf("memory %d used %d after release", p.Memory(), p.Used())
	}
}

// Instances grow and are freed on many goroutines at once: the pool never
// passes its budget and ends at zero.
func TestInstanceMemoryConcurrent(t *testing.T) {
	p := NewPool(64 * Grant)
	p.SetInstanceRoom(64 * Grant)
	var wg sync.WaitGroup
	for range 8 {
		a := p.Open(Grant, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if a.ChargeMemory(3*Grant) == nil {
					if u := p.Used(); u > 64*Grant {
						t.Errorf("used %d past the budget", u)
					}
					a.ReleaseMemory(3 * Grant)
				}
			}
			a.Close()
		}()
	}
	wg.Wait()
	if p.Used() != 0 || p.Memory() != 0 || p.Peak() > 64*Grant {
		t.Fatalf("used %d memory %d peak %d", p.Used(), p.Memory(), p.Peak())
	}
}
