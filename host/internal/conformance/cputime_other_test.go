//go:build !linux

package conformance

// threadCPUTime is not measured outside Linux.
func threadCPUTime() int64 { return -1 }
