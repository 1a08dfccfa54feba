//go:build !linux

package engine

// threadCPUTime is not measured outside Linux.
func threadCPUTime() int64 { return -1 }
