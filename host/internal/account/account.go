// Package account keeps the one account of what the host holds in memory on
// a plugin's behalf: per task, the bytes its calls staged in the open commit
// window (emitted records, state writes, timers set, commit marks), the
// commit marks carried past a commit point, the input records fetched
// for it and not processed yet, and the linear memory of its plugin's
// instances; per process, the sum over every task (abi/ABI.md section 7,
// "Per task: what the host holds").
//
// An Account is charged when something is staged (Charge) and released when
// the commit window ends, committed or dropped (WindowEnded), and when its
// task closes (Close); nothing else changes it. Its window has a budget and a
// hard cap: at the budget the task is Heavy and the runner brings its commit
// point forward (more, smaller transactions, no record fails); a charge that
// would pass the cap fails (*LimitError, the plugin gets ELIMIT and the
// record fails). The Pool is the process's budget over every account: each
// account takes its bytes from it in grants, so no charge past the pool's
// budget is ever taken, and past half of it the accounts holding more than
// the average are Heavy too. The input a task holds (SetInput) is granted
// from the same pool, but only below half its budget, so it never makes a
// plugin's charge fail: past that the runner stops fetching for the task
// until it has processed what it holds.
//
// An instance's linear memory (what memory.grow has given it, and the room
// the engine made ahead for it) is charged apart from the window
// (ChargeMemory, ReleaseMemory): it is not released by a commit point but
// when the instance is dropped, and it is charged from whichever goroutine
// grows or frees the instance (an instance of a new version is made in the
// background), so that part of the account is atomic. It is taken from the
// same pool, within the instances' room (SetInstanceRoom: the budget less
// what the windows need to reach their caps), and past what the other
// tasks' shares leave of it (a share is half the room over the open
// accounts) only a task within its own share may grow: no plugin's
// instances, however many tasks it has, can take the room another
// processor's instances need to start. What no task holds alone (an init's
// snapshot, shared by a module version's instances) is charged to the
// pool itself (Pool.ChargeMemory), without a share.
//
// The package knows neither Wasm, Kafka nor the store: the runner charges
// and releases, the engine charges and releases instances' memory through
// an interface, the state package only reports the bytes of its writes.
package account

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Grant is the unit in which an account takes bytes from its pool: a charge
// that fits in what the account was granted costs no shared atomic, and
// the pool's figure is above the accounts' by at most one grant per
// account.
const Grant = 256 << 10

// ErrLimit is matched by every *LimitError.
var ErrLimit = errors.New("account: the host holds as much as it may for the task")

// LimitError is a charge refused: it would take the task past its hard cap,
// or the process past its budget.
type LimitError struct {
	Process bool  // the process's budget (runtime.memory_budget), not the task's cap
	Held    int64 // bytes held before the charge: the task's, or the process's
	Size    int   // bytes of the refused charge
	Limit   int64
	// Instances is a refused charge of instance memory (ChargeMemory):
	// Held and Limit are then the instances' bytes and room, or, when
	// Share is set, the task's instances' bytes and its fair share.
	Instances, Share bool
}

func (e *LimitError) Error() string {
	switch {
	case e.Instances && e.Share:
		return fmt.Sprintf("the instances of this task hold %d bytes of linear memory; %d more would pass its share of %d while the plugins' instances hold over half their room in runtime.memory_budget",
			e.Held, e.Size, e.Limit)
	case e.Instances:
		return fmt.Sprintf("the plugins' instances in this process hold %d bytes of linear memory; %d more would pass their room of %d (runtime.memory_budget less twice the largest limits.window_bytes)",
			e.Held, e.Size, e.Limit)
	case e.Process:
		return fmt.Sprintf("the host holds %d bytes for the plugins of this process; %d more would pass its budget of %d (runtime.memory_budget)",
			e.Held, e.Size, e.Limit)
	default:
		return fmt.Sprintf("the host holds %d bytes for this task's commit window; %d more would pass its cap of %d (twice limits.window_bytes)",
			e.Held, e.Size, e.Limit)
	}
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Pool is a process's budget over all its tasks' accounts. Safe for
// concurrent use. A nil *Pool is no budget.
type Pool struct {
	budget int64
	// room is the most the instances' memory may take (SetInstanceRoom).
	room atomic.Int64
	// used is everything taken: granted plus memory. The budget is
	// checked against it, with one compare-and-swap, so no two charges
	// together pass it.
	used atomic.Int64
	// granted is what the accounts took for windows and input (each its
	// held bytes rounded up to a Grant); memory what they took for
	// instances' linear memory; accounts counts the open ones.
	granted  atomic.Int64
	memory   atomic.Int64
	accounts atomic.Int64
	peak     atomic.Int64 // the most used ever was
}

// NewPool returns a pool of budget bytes; 0 or less is no budget. Its
// instances' room is half the budget until SetInstanceRoom.
func NewPool(budget int64) *Pool {
	p := &Pool{budget: budget}
	p.room.Store(budget / 2)
	return p
}

// SetInstanceRoom sets the most the instances' linear memory may take of
// the budget, at most all of it. The host gives it the budget less twice
// the largest limits.window_bytes, so that the windows of the tasks can
// always reach one task's cap whatever the instances hold.
func (p *Pool) SetInstanceRoom(n int64) {
	if p != nil {
		p.room.Store(min(max(n, 0), p.budget))
	}
}

// InstanceRoom is the most the instances' memory may take (0: no budget).
func (p *Pool) InstanceRoom() int64 {
	if p == nil || p.budget <= 0 {
		return 0
	}
	return p.room.Load()
}

// Memory is the bytes of instances' linear memory the pool's accounts
// hold.
func (p *Pool) Memory() int64 {
	if p == nil {
		return 0
	}
	return p.memory.Load()
}

// Used is everything the pool's accounts hold: Granted plus Memory.
func (p *Pool) Used() int64 {
	if p == nil {
		return 0
	}
	return p.used.Load()
}

// Budget is the pool's budget in bytes (0: none).
func (p *Pool) Budget() int64 {
	if p == nil || p.budget <= 0 {
		return 0
	}
	return p.budget
}

// Granted is the bytes the pool's accounts hold for windows and input,
// rounded up to a Grant each (instances' memory apart: Memory).
func (p *Pool) Granted() int64 {
	if p == nil {
		return 0
	}
	return p.granted.Load()
}

// Peak is the most the pool's accounts ever held together (Used).
func (p *Pool) Peak() int64 {
	if p == nil {
		return 0
	}
	return p.peak.Load()
}

// take grants n bytes, unless that would pass the budget.
func (p *Pool) take(n int64) bool {
	if p == nil {
		return true
	}
	if !p.takeUsed(n, p.budget) {
		return false
	}
	p.granted.Add(n)
	return true
}

// takeBelowHalf grants n bytes, unless that would take the windows and
// input past half of what the instances leave of the budget (input's
// share: SetInput).
func (p *Pool) takeBelowHalf(n int64) bool {
	if p == nil {
		return true
	}
	if p.budget > 0 && p.granted.Load()+n > (p.budget-p.memory.Load())/2 {
		return false
	}
	return p.take(n)
}

// takeUsed adds n to used unless that would pass limit (when the pool
// has a budget).
func (p *Pool) takeUsed(n, limit int64) bool {
	for {
		cur := p.used.Load()
		if p.budget > 0 && cur+n > limit {
			return false
		}
		if p.used.CompareAndSwap(cur, cur+n) {
			for {
				pk := p.peak.Load()
				if cur+n <= pk || p.peak.CompareAndSwap(pk, cur+n) {
					return true
				}
			}
		}
	}
}

func (p *Pool) give(n int64) {
	if p != nil && n != 0 {
		p.granted.Add(-n)
		p.used.Add(-n)
	}
}

// ChargeMemory charges n bytes of instances' memory that no task holds
// alone (the snapshot of an init, which the instances of a module version
// share), within the instances' room and the budget; no share applies.
// Safe for concurrent use; a nil pool charges nothing.
func (p *Pool) ChargeMemory(n int64) error {
	if n <= 0 {
		return nil
	}
	if err := p.takeMemory(n, -1); err != nil {
		return err
	}
	return nil
}

// ReleaseMemory releases n bytes charged by the pool's ChargeMemory.
func (p *Pool) ReleaseMemory(n int64) {
	if n > 0 {
		p.giveMemory(n)
	}
}

// takeMemory takes n bytes for instances' memory for an account that
// holds held of it (-1: no account, no share applies), or says why not.
func (p *Pool) takeMemory(n, held int64) *LimitError {
	if p == nil || p.budget <= 0 {
		if p != nil {
			p.memory.Add(n)
			p.used.Add(n)
		}
		return nil
	}
	room := p.room.Load()
	for {
		cur := p.memory.Load()
		if cur+n > room {
			return &LimitError{Process: true, Instances: true, Held: cur, Size: int(n), Limit: room}
		}
		// Past what the others' shares leave (half the room over the
		// open accounts each), only a task within its own share grows:
		// a plugin with many tasks cannot take the room a neighbour's
		// instances need to start.
		accounts := max(p.accounts.Load(), 1)
		share := room / 2 / accounts
		if held >= 0 && held+n > share && cur+n > room-(accounts-1)*share {
			return &LimitError{Process: true, Instances: true, Share: true, Held: held, Size: int(n), Limit: share}
		}
		if p.memory.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	if !p.takeUsed(n, p.budget) {
		p.memory.Add(-n)
		return &LimitError{Process: true, Held: p.used.Load(), Size: int(n), Limit: p.budget}
	}
	return nil
}

func (p *Pool) giveMemory(n int64) {
	if p != nil && n != 0 {
		p.memory.Add(-n)
		p.used.Add(-n)
	}
}

// pressed reports whether the accounts hold, for windows and input, more
// than half of what the instances leave of the budget: the accounts above
// the average then bring their commit points forward.
func (p *Pool) pressed() bool {
	return p != nil && p.budget > 0 && p.granted.Load() > (p.budget-p.memory.Load())/2
}

// average is the bytes granted per open account.
func (p *Pool) average() int64 {
	n := p.accounts.Load()
	if n <= 0 {
		return 0
	}
	return p.granted.Load() / n
}

// Account is one task's account. Used by one goroutine at a time, like its
// task (the task's processing goroutine during a poll, the loop between
// polls); its pool and gauge are shared.
//
// Transitions (the only ones):
//
//	Open            an empty account: nothing held, nothing granted
//	Charge(n)       window += n, unless window + carried + n > cap, or the
//	                pool cannot grant what it needs: *LimitError
//	WindowEnded(c)  the window committed or was dropped: window = 0,
//	                carried = c (the marks carried past it), the grants
//	                above what is left returned
//	SetInput(n)     input = n (the records fetched and not processed);
//	                its grants follow, up to half the pool's budget
//	Close           the task closed: everything released
type Account struct {
	pool  *Pool
	gauge *atomic.Int64 // the processor's bytes held (granted), if set

	budget, cap int64
	// window is the bytes charged since the window opened, carried the
	// bytes of commit marks carried past earlier windows; granted is what
	// the pool gave for them (their sum rounded up to a Grant).
	window, carried, granted int64
	// peak is the most window + carried ever reached.
	peak int64
	// input is the bytes of the input records the runner holds for the
	// task, fetched and not processed yet; inputGranted what the pool
	// gave for them (at most input rounded up to a Grant: less when the
	// pool was at half its budget). Apart from the window's grants, so
	// that input never takes the room of a plugin's charge.
	input, inputGranted int64
	closed              bool
	// memory is the bytes of linear memory the task's instances hold
	// (ChargeMemory): atomic, charged from whichever goroutine grows or
	// frees an instance; memGauge, if set, follows it.
	memory   atomic.Int64
	memGauge *atomic.Int64
}

// SetMemoryGauge makes g follow the bytes of instances' memory the account
// holds (set before any is charged).
func (a *Account) SetMemoryGauge(g *atomic.Int64) { a.memGauge = g }

// Open returns the account of a task whose commit window has budget bytes
// (its hard cap is twice that); gauge, if set, follows the bytes it is
// granted for windows and input (SetMemoryGauge: for instances' memory).
// budget must be positive.
func (p *Pool) Open(budget int64, gauge *atomic.Int64) *Account {
	if p != nil {
		p.accounts.Add(1)
	}
	return &Account{pool: p, gauge: gauge, budget: budget, cap: 2 * budget}
}

// Charge charges n bytes staged in the open window, or refuses them with a
// *LimitError (nothing charged).
func (a *Account) Charge(n int) error {
	held := a.window + a.carried
	if held+int64(n) > a.cap {
		return &LimitError{Held: held, Size: n, Limit: a.cap}
	}
	if need := held + int64(n) - a.granted; need > 0 {
		want := (need + Grant - 1) / Grant * Grant
		if !a.pool.take(want) {
			want = need // the rounding may be what does not fit
			if !a.pool.take(want) {
				return &LimitError{Process: true, Held: a.pool.Used(), Size: n, Limit: a.pool.budget}
			}
		}
		a.grew(want)
	}
	a.window += int64(n)
	a.peak = max(a.peak, a.window+a.carried)
	return nil
}

// grew records n more bytes granted (negative: returned).
func (a *Account) grew(n int64) {
	a.granted += n
	if a.gauge != nil {
		a.gauge.Add(n)
	}
}

// WindowEnded releases the window's bytes: it committed, or was dropped
// (abort, rollback, a failed runner). carried is the bytes of the commit
// marks carried past it (they are held until a later commit point calls
// them). Grants above what is still held, rounded up, go back to the pool.
func (a *Account) WindowEnded(carried int) {
	a.window, a.carried = 0, int64(carried)
	keep := (a.carried + Grant - 1) / Grant * Grant
	if a.granted > keep {
		a.pool.give(a.granted - keep)
		a.grew(keep - a.granted)
	}
}

// SetInput sets the bytes of input records the runner holds for the task,
// fetched and not processed yet, to n, and reports whether the pool granted
// them all. The grants for them are taken only while the pool is below
// half its budget (where the tasks are pressed to commit), so the input
// never takes the room a plugin's charge needs; when they are not granted
// the caller stops fetching for the task until it holds less. The bytes
// are held either way (they were fetched): Input reports them.
func (a *Account) SetInput(n int64) bool {
	a.input = max(n, 0)
	keep := (a.input + Grant - 1) / Grant * Grant
	switch {
	case a.inputGranted > keep:
		a.pool.give(a.inputGranted - keep)
		a.grewInput(keep - a.inputGranted)
	case a.inputGranted < a.input:
		want := keep - a.inputGranted
		if !a.pool.takeBelowHalf(want) {
			want = a.input - a.inputGranted // the rounding may be what does not fit
			if !a.pool.takeBelowHalf(want) {
				return false
			}
		}
		a.grewInput(want)
	}
	return true
}

// grewInput records n more bytes granted for input (negative: returned).
func (a *Account) grewInput(n int64) {
	a.inputGranted += n
	if a.gauge != nil {
		a.gauge.Add(n)
	}
}

// ChargeMemory charges n bytes of linear memory an instance of the task
// takes (memory.grow, or room made ahead for it), or refuses them with a
// *LimitError (nothing charged): the instances would pass their room in
// the pool, or this task its share of it, or the process its budget.
// Safe for concurrent use, and on a closed account (an instance outlives
// its task's account until it is closed). A nil account charges nothing.
func (a *Account) ChargeMemory(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if err := a.pool.takeMemory(n, a.memory.Load()); err != nil {
		return err
	}
	a.memory.Add(n)
	if a.memGauge != nil {
		a.memGauge.Add(n)
	}
	return nil
}

// ReleaseMemory releases n bytes charged by ChargeMemory: the instance
// that held them was dropped. Safe for concurrent use.
func (a *Account) ReleaseMemory(n int64) {
	if a == nil || n <= 0 {
		return
	}
	a.memory.Add(-n)
	a.pool.giveMemory(n)
	if a.memGauge != nil {
		a.memGauge.Add(-n)
	}
}

// Memory is the bytes of linear memory the task's instances hold.
func (a *Account) Memory() int64 {
	if a == nil {
		return 0
	}
	return a.memory.Load()
}

// Input is the bytes of input records the task holds (SetInput).
func (a *Account) Input() int64 { return a.input }

// Close releases everything staged and held as input: the task closed
// (its partition moved, the runner stopped). The account is not charged
// again, but its instances' memory is released as they close
// (ReleaseMemory).
func (a *Account) Close() {
	if a.closed {
		return
	}
	a.closed = true
	a.window, a.carried, a.input = 0, 0, 0
	a.pool.give(a.granted + a.inputGranted)
	a.grew(-a.granted)
	a.grewInput(-a.inputGranted)
	if a.pool != nil {
		a.pool.accounts.Add(-1)
	}
}

// Heavy reports whether the task's commit point should come now rather
// than at its interval: its window reached its budget, or the process's
// accounts hold more than half the pool's budget and this one holds more
// than the average. Only a window's bytes are released by a commit point,
// so an account with none is never heavy.
func (a *Account) Heavy() bool {
	if a.window >= a.budget {
		return true
	}
	return a.window > 0 && a.pool.pressed() && a.granted >= a.pool.average()
}

// Held is the bytes charged and not released: the window's and the
// carried marks' (instances' memory apart: Memory).
func (a *Account) Held() int64 { return a.window + a.carried }

// Peak is the most Held ever was.
func (a *Account) Peak() int64 { return a.peak }

// Budget is the window's budget; the hard cap is twice it.
func (a *Account) Budget() int64 { return a.budget }
