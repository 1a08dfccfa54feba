//go:build !linux

package testutil

import (
	"errors"
	"syscall"
)

func limitAddressSpace(uint64) error {
	return errors.New("an address-space cap is set on Linux only")
}

func maxRSSBytes(*syscall.Rusage) int64 { return -1 }
