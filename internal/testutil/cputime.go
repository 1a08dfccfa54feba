package testutil

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the process's user+system CPU time, every thread counted
// (an in-process kfake broker too).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// LoopCPU runs op b.N times on a goroutine locked to its thread and
// reports, besides the wall time, cpu-ns/op: the thread's CPU time per
// operation, which leaves out the time the thread waited for a CPU (most
// of the noise on a shared machine). Outside Linux only wall time is
// reported.
func LoopCPU(b *testing.B, op func()) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	start := threadCPUTime()
	for k := 0; k < b.N; k++ {
		op()
	}
	end := threadCPUTime()
	b.StopTimer()
	if start >= 0 && end >= 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}
