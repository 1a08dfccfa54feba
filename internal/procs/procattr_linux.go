//go:build linux

package procs

import "syscall"

// sysProcAttr makes the kernel SIGKILL a wasmstream process when the
// driver dies, so none outlives a driver that was killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
