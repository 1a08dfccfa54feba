//go:build wasip1

package sdk

import "unsafe"

// The host functions, module "wasmstream" (abi.ImportModule). Pointers are
// lowered to i32 offsets into linear memory; every result is a value >= 0
// or -errno. The names must match the abi.Import* constants; a host refuses
// a module whose imports it does not know; abi_names_test.go checks the
// directives in this file against the constants.
//
// The imports that take a pointer are //go:noescape: the host reads or
// writes the memory only during the call and keeps no pointer into it
// (ABI.md section 4: what it keeps, it copies). Without the directive the
// compiler assumes the pointer escapes, and a buffer a plugin passes from
// its stack (a [8]byte value for state_put, say) is allocated on the heap
// on every call: garbage-collector work inside Wasm, per record.

//go:wasmimport wasmstream emit
//go:noescape
func abiEmit(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream output_index
//go:noescape
func abiOutputIndex(name unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream store_index
//go:noescape
func abiStoreIndex(name unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream config
//go:noescape
func abiConfig(out unsafe.Pointer, outCap uint32) int32

//go:wasmimport wasmstream log
//go:noescape
func abiLog(level uint32, msg unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream set_error
//go:noescape
func abiSetError(msg unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream state_get
//go:noescape
func abiStateGet(store uint32, key unsafe.Pointer, keyLen uint32, out unsafe.Pointer, outCap uint32) int32

//go:wasmimport wasmstream state_put
//go:noescape
func abiStatePut(store uint32, key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32) int32

//go:wasmimport wasmstream state_delete
//go:noescape
func abiStateDelete(store uint32, key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmstream scan_open
//go:noescape
func abiScanOpen(store uint32, start unsafe.Pointer, startLen uint32, end unsafe.Pointer, endLen uint32) int32

//go:wasmimport wasmstream scan_next
//go:noescape
func abiScanNext(cursor uint32, out unsafe.Pointer, outCap uint32) int32

//go:wasmimport wasmstream scan_close
func abiScanClose(cursor uint32) int32

// bp and sp turn a slice or string into the pointer half of a pointer/length
// pair. An empty one may give a nil pointer (0), which the host accepts
// with length 0.
func bp(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
func sp(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func hostEmit(rec []byte) int32         { return abiEmit(bp(rec), uint32(len(rec))) }
func hostOutputIndex(name string) int32 { return abiOutputIndex(sp(name), uint32(len(name))) }
func hostStoreIndex(name string) int32  { return abiStoreIndex(sp(name), uint32(len(name))) }
func hostConfig(out []byte) int32       { return abiConfig(bp(out), uint32(len(out))) }
func hostLog(level uint32, msg string)  { abiLog(level, sp(msg), uint32(len(msg))) }
func hostSetError(msg string)           { abiSetError(sp(msg), uint32(len(msg))) }

func hostStateGet(store uint32, key, out []byte) int32 {
	return abiStateGet(store, bp(key), uint32(len(key)), bp(out), uint32(len(out)))
}

func hostStatePut(store uint32, key, value []byte) int32 {
	return abiStatePut(store, bp(key), uint32(len(key)), bp(value), uint32(len(value)))
}

func hostStateDelete(store uint32, key []byte) int32 {
	return abiStateDelete(store, bp(key), uint32(len(key)))
}

func hostScanOpen(store uint32, start, end []byte) int32 {
	return abiScanOpen(store, bp(start), uint32(len(start)), bp(end), uint32(len(end)))
}

func hostScanNext(cursor uint32, out []byte) int32 {
	return abiScanNext(cursor, bp(out), uint32(len(out)))
}

func hostScanClose(cursor uint32) int32 { return abiScanClose(cursor) }

// started is set when the instance has started (wasmstream_init
// succeeded): handles made before are declared (declare.go). A Wasm module
// is one instance, so there is nothing between package initialization
// (_initialize) and wasmstream_init.
var started bool

func inPackageInit() bool { return !started }
func initDone()           { started = true }

// The exports. //go:wasmexport works from this non-main package: a
// c-shared build exports every such function of every linked package, and
// the toolchain adds _initialize, which runs the package init functions
// (main is never called).

// abiVersion1 is the ABI version marker (abi.VersionMarker); never called.
//
//go:wasmexport wasmstream_abi_version_1
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func abiVersion1() {}

// abiVersion2 is the ABI version 2 marker (abi.VersionMarkerBatch): the
// SDK also takes batches. A host that speaks only version 1 uses the
// version 1 exports; never called.
//
//go:wasmexport wasmstream_abi_version_2
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func abiVersion2() {}

// exportBatch is abi.ExportBatch.
//
//go:wasmexport wasmstream_batch
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportBatch(n uint32) int32 { return batch(n) }

// exportInput is abi.ExportInput.
//
//go:wasmexport wasmstream_input
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportInput(size uint32) uint32 {
	b := input(size)
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

// process (sdk.go) is abi.ExportProcess.

// exportInit is abi.ExportInit.
//
//go:wasmexport wasmstream_init
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportInit() int32 { return int32(initialize()) }
