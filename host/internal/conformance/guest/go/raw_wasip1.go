//go:build wasip1

package main

import (
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// The host functions called directly, for the script's steps that the SDK
// never takes (bad indices, bad cursors, bad levels, bad pointers).

//go:wasmimport wasmstream emit
func hostEmit(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream emit
func hostEmitAt(ptr, n uint32) int32

//go:wasmimport wasmstream output_index
func hostOutputIndex(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream store_index
func hostStoreIndex(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream state_get
func hostStateGet(store uint32, key unsafe.Pointer, keyLen uint32, out unsafe.Pointer, outCap uint32) int32

//go:wasmimport wasmstream scan_open
func hostScanOpen(store uint32, start unsafe.Pointer, startLen uint32, end unsafe.Pointer, endLen uint32) int32

//go:wasmimport wasmstream scan_next
func hostScanNext(cursor uint32, out unsafe.Pointer, outCap uint32) int32

//go:wasmimport wasmstream scan_close
func hostScanClose(cursor uint32) int32

//go:wasmimport wasmstream timer_set
func hostTimerSetAt(kind uint32, ts int64, ptr, n uint32) int32

//go:wasmimport wasmstream time_now
func hostTimeNow(clock uint32) int64

func bp(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
func sp(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func rawEmit(rec []byte) int32              { return hostEmit(bp(rec), uint32(len(rec))) }
func rawEmitAt(ptr, n uint32) int32         { return hostEmitAt(ptr, n) }
func rawOutputIndex(name string) int32      { return hostOutputIndex(sp(name), uint32(len(name))) }
func rawStoreIndex(name string) int32       { return hostStoreIndex(sp(name), uint32(len(name))) }
func rawLog(level uint32, msg string) int32 { return hostLog(level, sp(msg), uint32(len(msg))) }
func rawScanClose(cursor uint32) int32      { return hostScanClose(cursor) }

func rawStateGet(store uint32, key, out []byte) int32 {
	return hostStateGet(store, bp(key), uint32(len(key)), bp(out), uint32(len(out)))
}

func rawScanOpen(store uint32, start, end []byte) int32 {
	return hostScanOpen(store, bp(start), uint32(len(start)), bp(end), uint32(len(end)))
}

func rawScanNext(cursor uint32, out []byte) int32 {
	return hostScanNext(cursor, bp(out), uint32(len(out)))
}

func rawTimerSetAt(kind abi.TimerKind, ts int64, ptr, n uint32) int32 {
	return hostTimerSetAt(uint32(kind), ts, ptr, n)
}

func rawTimeNow(clock uint32) int64 { return hostTimeNow(clock) }

// trapSink keeps rawTrap's load from being optimized away.
var trapSink byte

// rawTrap loads a byte far outside linear memory: a Wasm trap (out of
// bounds memory access), not a Go panic the SDK would recover.
func rawTrap() { trapSink = *(*byte)(unsafe.Add(unsafe.Pointer(nil), 0xFFFFFFF0)) }
