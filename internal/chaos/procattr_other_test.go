//go:build unix && !linux

package chaos

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; the
// tests' cleanups kill every child.
func sysProcAttr() *syscall.SysProcAttr { return nil }
