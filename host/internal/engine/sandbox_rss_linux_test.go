package engine

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAttackRSS measures the process's resident memory while the attacks
// run against a few instances at once, and asserts it loosely against the
// documented bound (abi/ABI.md, section 7; instanceBound) per instance plus
// a fixed overhead. Without the table cap and the stack accounting the same
// attacks took the process to 3.4 GB.
func TestAttackRSS(t *testing.T) {
	debug.FreeOSMemory()
	base := rss(t)
	peak := base
	const instances = 3
	var is []*Instance
	for range instances {
		i, _, _ := hostile(t, Options{RecordTimeout: 2 * time.Second}, Binding{Sink: &stagingSink{}, Name: "h"})
		is = append(is, i)
	}
	for _, key := range []string{"tgro", "fat!", "deep", "emit", "stat", "logs"} {
		for _, i := range is {
			_ = i.Process(bg, rec(key, strings.Repeat("v", 512<<10)))
			peak = max(peak, rss(t))
		}
	}
	grew := peak - base
	// The documented bound (abi/ABI.md, section 7) with this module's 40
	// pages of memory and default limits; the fixed part (compiled code, Go
	// heap slack) is allowed 64 MiB.
	tot, err := countTotals(wasmFile(t, "hostile"))
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(instances)*(instanceBound(40*PageSize, Options{})+estimate(tot).inst) + 64<<20
	t.Logf("RSS %d MiB before, peak %d MiB: +%d MiB for %d instances (bound %d MiB)", base>>20, peak>>20, grew>>20, instances, bound>>20)
	if grew > bound {
		t.Errorf("RSS grew by %d MiB, over the documented bound of %d MiB", grew>>20, bound>>20)
	}
}

func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// instanceBound is abi/ABI.md's bound of the host memory one instance can
// hold: memory + 2 x 8 B x table entries + 4 x (stack + 64 KiB) + emitted
// bytes + state bytes + 16 x (8 KiB + 1 MiB + 4 KiB) + 100 KiB, without the
// module's instance overhead (its estimate, cost.inst).
func instanceBound(memory int64, o Options) int64 {
	o.Module = o.Module.withDefaults()
	o.Record = o.Record.withDefaults()
	if o.StackLimit == 0 {
		o.StackLimit = DefaultStackLimit
	}
	return memory + 2*8*int64(o.Module.MaxTableEntries) + 4*(int64(o.StackLimit)+freeHeight) +
		int64(o.Record.MaxEmitBytes) + int64(o.Record.MaxStateBytes) + 16*(8<<10+1<<20+4<<10) + 100<<10
}
