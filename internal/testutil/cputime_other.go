//go:build !linux

package testutil

// threadCPUTime is not measured outside Linux.
func threadCPUTime() int64 { return -1 }
