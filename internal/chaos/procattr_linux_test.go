//go:build linux

package chaos

import "syscall"

// sysProcAttr makes the kernel SIGKILL a child when the test process dies,
// so no wasmstream process outlives a test binary that panicked or timed
// out before its cleanups ran.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
