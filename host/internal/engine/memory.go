package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs one instance's Wasm memory (experimental.LinearMemory)
// and enforces the memory cap. wazero's own cap (WithMemoryLimitPages) is
// checked before any hook runs, so a refused memory.grow would be invisible;
// here the refusal is recorded, which is how a failure is classified
// MemoryLimit rather than Trap.
//
// All methods but view, loadUint32 and storeUint32 run on the goroutine that
// is calling into the instance (memory grows only from guest code or
// instantiation); those three are the watchdog's (batch.go).
type linearMemory struct {
	buf        []byte
	limit      uint64 // bytes
	growFailed bool   // a grow past limit was refused since the last reset
	// acct is the task's account the memory is charged to (nil: none);
	// charged is what it was charged: the buffer's capacity, or, before
	// the first allocation, what reserve charged for it. refused is the
	// account's refusal of a grow since the last reset (growFailed is
	// then set too).
	acct    MemoryAccount
	charged uint64
	refused error
	// total is the runtime's count of the bytes its linear memories hold
	// (Counts.MemoryBytes): buf's capacity is added and taken off as it
	// changes.
	total *atomic.Int64
	// base and size publish buf's address and length for the watchdog
	// (view), which reads a running batch's progress from another
	// goroutine; nil when freed.
	base atomic.Pointer[byte]
	size atomic.Uint64
	// moving orders a grow's copy of the memory against the watchdog's
	// loads and stores of guest words (loadUint32, storeUint32): a word
	// stored into the old buffer while the copy runs would be lost with
	// it (the race detector found the batch's stop word so). Leaf
	// (docs/locks.md); taken only by a grow that moves the memory, never
	// on a call's path.
	moving sync.Mutex
}

// loadUint32 reads the aligned guest word at off, for the watchdog; ok is
// false when off is past the memory or the memory is freed.
func (l *linearMemory) loadUint32(off uint64) (v uint32, ok bool) {
	l.moving.Lock()
	defer l.moving.Unlock()
	base, size := l.view()
	if base == nil || off+4 > size {
		return 0, false
	}
	return atomic.LoadUint32((*uint32)(unsafe.Add(base, off))), true
}

// storeUint32 stores v in the aligned guest word at off, for the watchdog
// (the guest only reads it); false when off is past the memory or the
// memory is freed.
func (l *linearMemory) storeUint32(off uint64, v uint32) bool {
	l.moving.Lock()
	defer l.moving.Unlock()
	base, size := l.view()
	if base == nil || off+4 > size {
		return false
	}
	atomic.StoreUint32((*uint32)(unsafe.Add(base, off)), v)
	return true
}

// view returns the memory's address and length as last published. Safe
// for concurrent use; the address stays readable while the caller holds
// it (the garbage collector keeps the buffer alive).
func (l *linearMemory) view() (unsafe.Pointer, uint64) {
	return unsafe.Pointer(l.base.Load()), l.size.Load()
}

// publish makes buf visible to view.
func (l *linearMemory) publish() {
	if cap(l.buf) == 0 {
		l.base.Store(nil)
		l.size.Store(0)
		return
	}
	l.base.Store(unsafe.SliceData(l.buf[:cap(l.buf)]))
	l.size.Store(uint64(len(l.buf)))
}

// MemoryAccount is what an instance's linear memory is charged to: the
// task's account of what the host holds for its plugin, within the
// process's budget (host/internal/account; the engine knows it only by
// these two methods). Both may be called from any goroutine, ReleaseMemory
// after the task has ended.
type MemoryAccount interface {
	// ChargeMemory takes n more bytes for the instance's memory, or
	// refuses them (an error that says which budget): nothing is charged
	// then, and the memory does not grow.
	ChargeMemory(n int64) error
	// ReleaseMemory gives back n bytes charged before.
	ReleaseMemory(n int64)
}

// ErrMemoryBudget is matched by an instance that could not start, or a
// record that failed, because the account its memory is charged to
// refused the memory (Binding.Memory).
var ErrMemoryBudget = errors.New("engine: the process's memory budget refused the instance's memory")

func newLinearMemory(limit uint64, total *atomic.Int64, acct MemoryAccount) *linearMemory {
	return &linearMemory{limit: limit, total: total, acct: acct}
}

// reserve charges n bytes, the memory the module declares at least, before
// it is instantiated: wazero's first Reallocate must not fail (it cannot
// take a refusal there), so what it asks for is charged first. Nothing is
// charged on error.
func (l *linearMemory) reserve(n uint64) error {
	if l.acct == nil || n <= l.charged {
		return nil
	}
	if err := l.acct.ChargeMemory(int64(n - l.charged)); err != nil {
		return fmt.Errorf("%w: its %d KiB of initial memory: %w", ErrMemoryBudget, n>>10, err)
	}
	l.charged = n
	return nil
}

// charge makes the account's charge for the memory capacity bytes, or
// returns the account's refusal (nothing charged).
func (l *linearMemory) charge(capacity uint64) error {
	if l.acct == nil || capacity <= l.charged {
		return nil
	}
	if err := l.acct.ChargeMemory(int64(capacity - l.charged)); err != nil {
		return err
	}
	l.charged = capacity
	return nil
}

// Allocate implements experimental.MemoryAllocator; one linearMemory backs
// exactly one memory. Its buffer starts empty: Reallocate, which wazero
// calls next with the module's minimum, makes it (within what reserve
// charged).
func (l *linearMemory) Allocate(_, _ uint64) experimental.LinearMemory {
	l.setBuf([]byte{}) // not nil: wazero reads a nil buffer as a refused grow
	return l
}

// setBuf makes b the memory's buffer, counts the change in capacity and
// publishes it for view.
func (l *linearMemory) setBuf(b []byte) {
	l.total.Add(int64(cap(b)) - int64(cap(l.buf)))
	l.buf = b
	l.publish()
}

// Reallocate grows the memory to size bytes, or returns nil (memory.grow
// yields -1) when size is over the cap or the account refuses the growth.
// Bytes past the old length are zero: the memory never shrinks and
// capacity beyond the length is never written. The capacity made ahead
// (twice the old, up to the cap) is charged to the account as it is
// made; when the account refuses it, only size is asked for.
func (l *linearMemory) Reallocate(size uint64) []byte {
	if size > l.limit {
		l.growFailed = true
		return nil
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		l.publish()
		return l.buf
	}
	capacity := min(max(size, 2*uint64(cap(l.buf))), l.limit)
	if l.charge(capacity) != nil {
		capacity = size
		if err := l.charge(capacity); err != nil {
			l.growFailed, l.refused = true, fmt.Errorf("%w: %w", ErrMemoryBudget, err)
			return nil
		}
	}
	grown := make([]byte, size, capacity)
	l.moving.Lock()
	copy(grown, l.buf)
	l.setBuf(grown)
	l.moving.Unlock()
	return l.buf
}

// Free drops the buffer and releases its charge; wazero calls it when the
// module is closed, which the engine only does when no call is running,
// and the engine when an instantiation failed (wazero may not have).
// Calling it again does nothing.
func (l *linearMemory) Free() {
	l.moving.Lock()
	l.setBuf(nil)
	l.moving.Unlock()
	if l.acct != nil && l.charged > 0 {
		l.acct.ReleaseMemory(int64(l.charged))
	}
	l.charged = 0
}
