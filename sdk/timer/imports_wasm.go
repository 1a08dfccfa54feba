//go:build wasip1

package timer

import "unsafe"

// The time imports of module "wasmstream" (ABI.md section 8.2). ts is an
// i64; the names must match the abi.Import* constants (checked by
// abi_names_test.go). Those that take a pointer are //go:noescape, as in
// package sdk (sdk/imports_wasm.go): the host keeps no pointer past a call.

//go:wasmimport wasmstream timer_set
//go:noescape
func abiTimerSet(kind uint32, ts int64, key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmstream timer_cancel
//go:noescape
func abiTimerCancel(kind uint32, ts int64, key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmstream time_now
func abiTimeNow(clock uint32) int64

//go:wasmimport wasmstream commit_mark
//go:noescape
func abiCommitMark(key unsafe.Pointer, keyLen uint32) int32

func bp(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func hostTimerSet(kind uint32, ts int64, key []byte) int32 {
	return abiTimerSet(kind, ts, bp(key), uint32(len(key)))
}

func hostTimerCancel(kind uint32, ts int64, key []byte) int32 {
	return abiTimerCancel(kind, ts, bp(key), uint32(len(key)))
}

func hostTimeNow(clock uint32) int64 { return abiTimeNow(clock) }

func hostCommitMark(key []byte) int32 { return abiCommitMark(bp(key), uint32(len(key))) }

// The optional exports (ABI.md section 8.3). They are in this package, not
// in package sdk, so that only plugins that import it carry them.

// exportOnTimer is abi.ExportOnTimer.
//
//go:wasmexport wasmstream_on_timer
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportOnTimer(n uint32) int32 { return int32(fire(n)) }

// exportOnCommit is abi.ExportOnCommit.
//
//go:wasmexport wasmstream_on_commit
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportOnCommit(n uint32) int32 { return int32(commitKey(n)) }
