package engine

import (
	"sync"
	"sync/atomic"
	"testing"
)

// A word the watchdog stores while the instance's goroutine grows (and so
// copies) the memory is never lost: it is in the memory after the grow.
// (The race detector found the batch's stop word written into the old
// buffer while a grow copied it; the store was lost with the old buffer.)
// Under -race the test also fails on the unsynchronized copy itself.
func TestGrowKeepsTheWatchdogsStores(t *testing.T) {
	const page = 64 << 10
	var total atomic.Int64
	lm := newLinearMemory(512*page, &total, nil)
	if lm.Reallocate(page) == nil {
		t.Fatal("the first page was refused")
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	var lost atomic.Uint32
	wg.Add(1)
	go func() { // the watchdog
		defer wg.Done()
		for v := uint32(1); !done.Load(); v++ {
			if !lm.storeUint32(8, v) {
				t.Error("the store was refused")
				return
			}
			if got, _ := lm.loadUint32(8); got != v {
				lost.Store(v)
			}
		}
	}()
	// The instance's goroutine: grows that move the memory, one page at a
	// time past the capacity each grow leaves (a new buffer every time).
	for size := uint64(2 * page); size <= 512*page; size += page {
		if lm.Reallocate(size) == nil {
			t.Fatalf("a grow to %d bytes was refused", size)
		}
	}
	done.Store(true)
	wg.Wait()
	if v := lost.Load(); v != 0 {
		t.Fatalf("the watchdog's store of %d was lost in a grow", v)
	}
	lm.Free()
	if ok := lm.storeUint32(8, 1); ok {
		t.Fatal("a store into freed memory was taken")
	}
}
