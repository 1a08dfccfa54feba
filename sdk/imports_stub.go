//go:build !wasip1

package sdk

import (
	"runtime"
	"strings"

	"github.com/wasmstream/wasmstream/sdk/internal/fakeabi"
)

// Outside Wasm the host functions go to the in-process host installed by
// sdk/sdktest, and the bodies of the Wasm exports are handed to it, so a
// plugin's tests run the same SDK code as the plugin does.

func init() {
	fakeabi.RegisterGuest(fakeabi.Guest{
		Input:   input,
		Process: func(n uint32) int32 { return int32(process(n)) },
		Init:    func() int32 { return int32(initialize()) },
		Reset:   reset,
	})
}

func host() fakeabi.Host {
	h := fakeabi.CurrentHost()
	if h == nil {
		panic("sdk: no host: outside Wasm the SDK runs only under sdk/sdktest (sdktest.New)")
	}
	return h
}

func hostEmit(rec []byte) int32         { return host().Emit(rec) }
func hostOutputIndex(name string) int32 { return host().OutputIndex(name) }
func hostStoreIndex(name string) int32  { return host().StoreIndex(name) }
func hostConfig(out []byte) int32       { return host().Config(out) }
func hostLog(level uint32, msg string)  { host().Log(level, msg) }
func hostSetError(msg string)           { host().SetError(msg) }

func hostStateGet(store uint32, key, out []byte) int32 {
	return host().StateGet(store, key, out)
}

func hostStatePut(store uint32, key, value []byte) int32 {
	return host().StatePut(store, key, value)
}

func hostStateDelete(store uint32, key []byte) int32 { return host().StateDelete(store, key) }

func hostScanOpen(store uint32, start, end []byte) int32 {
	return host().ScanOpen(store, start, end)
}

func hostScanNext(cursor uint32, out []byte) int32 { return host().ScanNext(cursor, out) }
func hostScanClose(cursor uint32) int32            { return host().ScanClose(cursor) }

// inPackageInit reports whether the caller runs in the program's package
// initialization (a package variable's initializer or an init function),
// where a plugin's handles are declared (declare.go). In Wasm that is
// everything before wasmstream_init; natively one test binary starts many
// fake instances, so the stack tells: the runtime runs every package's
// initialization from runtime.doInit (doInit1 since Go 1.21).
func inPackageInit() bool {
	var pcs [128]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "runtime.doInit") {
			return true
		}
		if !more {
			return false
		}
	}
}

func initDone() {}
