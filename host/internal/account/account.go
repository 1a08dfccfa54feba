// Package account keeps the one account of what the host holds in memory on
// a plugin's behalf: per task, the bytes its calls staged in the open commit
// window (emitted records, state writes, timers set, commit marks), the
// commit marks carried past a commit point and the input records fetched
// for it and not processed yet; per process, the sum over every task
// (abi/ABI.md section 7, "Per task: what the host holds").
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
// The package knows neither Wasm, Kafka nor the store: the runner charges
// and releases, the state package only reports the bytes of its writes.
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
}

func (e *LimitError) Error() string {
	if e.Process {
		return fmt.Sprintf("the host holds %d bytes for the plugins of this process; %d more would pass its budget of %d (runtime.memory_budget)",
			e.Held, e.Size, e.Limit)
	}
	return fmt.Sprintf("the host holds %d bytes for this task's commit window; %d more would pass its cap of %d (twice limits.window_bytes)",
		e.Held, e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Pool is a process's budget over all its tasks' accounts. Safe for
// concurrent use. A nil *Pool is no budget.
type Pool struct {
	budget int64
	// granted is what the accounts took (each its held bytes rounded up
	// to a Grant); accounts counts the open ones.
	granted  atomic.Int64
	accounts atomic.Int64
	peak     atomic.Int64 // the most granted ever was
}

// NewPool returns a pool of budget bytes; 0 or less is no budget.
func NewPool(budget int64) *Pool { return &Pool{budget: budget} }

// Budget is the pool's budget in bytes (0: none).
func (p *Pool) Budget() int64 {
	if p == nil || p.budget <= 0 {
		return 0
	}
	return p.budget
}

// Granted is the bytes the pool's accounts hold, rounded up to a Grant each.
func (p *Pool) Granted() int64 {
	if p == nil {
		return 0
	}
	return p.granted.Load()
}

// Peak is the most the pool's accounts were ever granted together.
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
	return p.takeUpTo(n, p.budget)
}

// takeBelowHalf grants n bytes, unless that would take the pool past half
// its budget (input's share: SetInput).
func (p *Pool) takeBelowHalf(n int64) bool {
	if p == nil {
		return true
	}
	return p.takeUpTo(n, p.budget/2)
}

// takeUpTo grants n bytes unless the pool would then have granted more than
// limit (when it has a budget).
func (p *Pool) takeUpTo(n, limit int64) bool {
	for {
		cur := p.granted.Load()
		if p.budget > 0 && cur+n > limit {
			return false
		}
		if p.granted.CompareAndSwap(cur, cur+n) {
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
	}
}

// pressed reports whether the accounts hold more than half the budget: the
// accounts above the average then bring their commit points forward.
func (p *Pool) pressed() bool {
	return p != nil && p.budget > 0 && p.granted.Load() > p.budget/2
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
}

// Open returns the account of a task whose commit window has budget bytes
// (its hard cap is twice that); gauge, if set, follows the bytes it is
// granted. budget must be positive.
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
				return &LimitError{Process: true, Held: a.pool.Granted(), Size: n, Limit: a.pool.budget}
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

// Input is the bytes of input records the task holds (SetInput).
func (a *Account) Input() int64 { return a.input }

// Close releases everything: the task closed (its partition moved, the
// runner stopped). The account is not used again.
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
// carried marks'.
func (a *Account) Held() int64 { return a.window + a.carried }

// Peak is the most Held ever was.
func (a *Account) Peak() int64 { return a.peak }

// Budget is the window's budget; the hard cap is twice it.
func (a *Account) Budget() int64 { return a.budget }
