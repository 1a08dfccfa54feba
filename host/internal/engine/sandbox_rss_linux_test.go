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
// documented bound (abi/ABI.md, section 7): per instance, linear memory +
// tables + 2 x stack budget + staged bytes, plus a fixed overhead.
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
	// The bound per instance with default limits: 2.5 MiB of linear memory
	// (this module's), 8 MiB of table, 2 x 8 MiB of stack, 16 MiB emitted
	// plus 16 MiB of state kept by the test's sink and store: 58.5 MiB; the
	// fixed part (compiled code, Go heap slack) is allowed 64 MiB.
	bound := int64(instances)*(2.5*(1<<20)+8<<20+16<<20+32<<20) + 64<<20
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
