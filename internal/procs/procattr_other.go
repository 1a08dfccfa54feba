//go:build !linux

package procs

import "syscall"

// sysProcAttr: without Linux's parent-death signal, a process outlives a
// driver that was killed (scripts/soak.sh then stops the broker under it).
func sysProcAttr() *syscall.SysProcAttr { return nil }
