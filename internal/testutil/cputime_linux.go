package testutil

import (
	"syscall"
	"unsafe"
)

// threadCPUTime is the CPU time the calling thread has used, in
// nanoseconds (CLOCK_THREAD_CPUTIME_ID), or -1 if it cannot be read.
// Benchmarks that lock their goroutine to its thread report it per
// operation: unlike wall time it leaves out the time the thread waited for
// a CPU, which on a shared machine is most of the noise.
func threadCPUTime() int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
