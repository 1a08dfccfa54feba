package engine

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// Benchmarks of the Go SDK's per-record path against the call floor, in one
// run so that the ratios compare like with like on a shared machine:
//
//	go test -run '^$' -bench GoSDKPath -count 10 ./host/internal/engine/
//
// Besides ns/op they report cpu-ns/op, the CPU time of the benchmarking
// thread per record, which other processes on a shared machine disturb
// much less than wall time (it leaves out the time the thread waited for a
// CPU). Compare medians.
//
// BenchmarkGoWasmVariants runs any Go plugins (wasip1 c-shared builds) in
// $WASMSTREAM_BENCH_WASM (a directory of .wasm files) the same ways: the
// tool to find where a Go plugin's time goes, by building variants of a
// plugin, or of the SDK, that stop at different points of the path.

// BenchmarkGoSDKPath: the 100-byte record of benchRecord, copied into guest
// memory, processed, one emit back.
//
//	floor                  raw wazero, the WAT passthrough, no protection (BenchmarkFloor/plain)
//	wat/engine             the engine on the WAT passthrough (BenchmarkProcessWAT)
//	gosdk/raw              raw wazero on plugins/passthrough, the Go SDK's, uninstrumented
//	gosdk/raw-instrumented the same binary as the engine rewrites it: the cost of the interrupt checks
//	gosdk/engine           the engine on plugins/passthrough (BenchmarkProcessGoSDK)
func BenchmarkGoSDKPath(b *testing.B) {
	wasm, err := os.ReadFile(wasmbuild.Build(b, "./plugins/passthrough"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("floor", benchFloorCPU)
	b.Run("wat/engine", func(b *testing.B) {
		r, _ := newRuntime(b, Options{})
		benchEngine(b, compileFile(b, r, "passthrough"))
	})
	b.Run("gosdk/raw", func(b *testing.B) { benchRawGo(b, wasm, false) })
	b.Run("gosdk/raw-instrumented", func(b *testing.B) { benchRawGo(b, wasm, true) })
	b.Run("gosdk/engine", func(b *testing.B) {
		r, _ := newRuntime(b, Options{CacheDir: benchCacheDir(b)})
		m, err := r.Compile(bg, "passthrough-go", wasm)
		if err != nil {
			b.Fatal(err)
		}
		benchEngine(b, m)
	})
}

// BenchmarkGoWasmVariants runs every $WASMSTREAM_BENCH_WASM/*.wasm raw
// ("plain"), raw instrumented and through the engine, after the floor and
// the WAT passthrough; $WASMSTREAM_BENCH_MODES (comma-separated) picks the
// modes. A module that does not emit is measured all the same. Skipped
// without $WASMSTREAM_BENCH_WASM.
func BenchmarkGoWasmVariants(b *testing.B) {
	dir := os.Getenv("WASMSTREAM_BENCH_WASM")
	if dir == "" {
		b.Skip("WASMSTREAM_BENCH_WASM is not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	sort.Strings(files)
	modes := []string{"plain", "instrumented", "engine"}
	if m := os.Getenv("WASMSTREAM_BENCH_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	b.Run("0floor", benchFloorCPU)
	b.Run("0wat/engine", func(b *testing.B) {
		r, _ := newRuntime(b, Options{})
		benchEngine(b, compileFile(b, r, "passthrough"))
	})
	for _, f := range files {
		wasm, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".wasm")
		for _, mode := range modes {
			b.Run(name+"/"+mode, func(b *testing.B) {
				if mode != "engine" {
					benchRawGo(b, wasm, mode == "instrumented")
					return
				}
				r, _ := newRuntime(b, Options{CacheDir: benchCacheDir(b)})
				m, err := r.Compile(bg, name, wasm)
				if err != nil {
					b.Fatal(err)
				}
				benchEngine(b, m)
			})
		}
	}
}

// benchCache keeps the Go plugins compiled by rawGoHost for the test
// process: compiling a 2 MB Go plugin takes most of a second, and every
// sub-benchmark round would do it again.
var benchCache = wazero.NewCompilationCache()

// benchCacheDir is the engine's compilation cache for the Go plugins of the
// benchmarks, kept across test processes.
func benchCacheDir(tb testing.TB) string {
	return filepath.Join(os.TempDir(), "wasmstream-bench-cache-"+strconv.Itoa(os.Getuid()))
}

// rawGoHost is a bare wazero runtime, configured like the engine's, with
// WASI and a minimal wasmstream module: emit bounds-checks and decodes
// into a reused record (as BenchmarkFloor's does), config answers "{}",
// set_error keeps the message, the others answer 0.
type rawGoHost struct {
	rt      wazero.Runtime
	emitted abi.Record
	emits   int
	errMsg  string
}

func newRawGoHost(tb testing.TB) *rawGoHost {
	tb.Helper()
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2).WithCompilationCache(benchCache)
	h := &rawGoHost{rt: wazero.NewRuntimeWithConfig(ctx, cfg)}
	tb.Cleanup(func() { _ = h.rt.Close(ctx) })
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		tb.Fatal(err)
	}
	b := h.rt.NewHostModuleBuilder(abi.ImportModule)
	for _, f := range hostFuncs {
		var fn api.GoModuleFunc
		switch f.name {
		case abi.ImportEmit:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				buf, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
				if !ok || h.emitted.Decode(buf) != nil {
					s[0] = api.EncodeI32(abi.ErrnoFault.Result())
					return
				}
				h.emits++
				s[0] = 0
			}
		case abi.ImportConfig:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				if s[1] >= 2 {
					m.Memory().Write(uint32(s[0]), []byte("{}"))
				}
				s[0] = 2
			}
		case abi.ImportSetError:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				msg, _ := m.Memory().Read(uint32(s[0]), uint32(s[1]))
				h.errMsg = string(msg)
				s[0] = 0
			}
		default:
			fn = func(_ context.Context, _ api.Module, s []uint64) { s[0] = 0 }
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, f.params, []api.ValueType{f.result}).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		tb.Fatal(err)
	}
	return h
}

// instantiate runs wasm (rewritten by instrument, or not) through its start
// function, _initialize, wasmstream_init and wasmstream_input(4096), and
// returns the module and the input buffer's address (0 if it exports no
// wasmstream_input).
func (h *rawGoHost) instantiate(tb testing.TB, wasm []byte, instrumented bool) (api.Module, uint32) {
	tb.Helper()
	ctx := context.Background()
	if instrumented {
		ins, err := instrument(wasm)
		if err != nil {
			tb.Fatal(err)
		}
		wasm = ins.wasm
	}
	mod, err := h.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = mod.Close(ctx) })
	for _, name := range []string{exportStart, abi.ExportInitialize, abi.ExportInit} {
		if f := mod.ExportedFunction(name); f != nil {
			if _, err := f.Call(ctx); err != nil {
				tb.Fatalf("%s: %v", name, err)
			}
		}
	}
	in := mod.ExportedFunction(abi.ExportInput)
	if in == nil {
		return mod, 0
	}
	res, err := in.Call(ctx, 4096)
	if err != nil || res[0] == 0 {
		tb.Fatalf("%s(4096) = %v, %v", abi.ExportInput, res, err)
	}
	return mod, uint32(res[0])
}

// benchRawGo is benchRaw for a Go plugin: copy benchRecord into its input
// buffer and call wasmstream_process with CallWithStack and a reused stack.
func benchRawGo(b *testing.B, wasm []byte, instrumented bool) {
	h := newRawGoHost(b)
	mod, inPtr := h.instantiate(b, wasm, instrumented)
	if inPtr == 0 {
		b.Fatalf("the module exports no %s", abi.ExportInput)
	}
	process := mod.ExportedFunction(abi.ExportProcess)
	mem := mod.Memory()
	rec := benchRecord()
	n := uint32(rec.EncodedSize())
	stack := make([]uint64, 1)
	ctx := context.Background()
	testutil.LoopCPU(b, func() {
		buf, _ := mem.Read(inPtr, n)
		rec.EncodeTo(buf)
		stack[0] = uint64(n)
		if err := process.CallWithStack(ctx, stack); err != nil || stack[0] != 0 {
			b.Fatal(err, stack[0], h.errMsg)
		}
	})
	if h.emits > 0 && len(h.emitted.Value) != len(rec.Value) {
		b.Fatalf("emitted a value of %d bytes", len(h.emitted.Value))
	}
}

// benchEngine is benchModule with cpu-ns/op, and without counting emits (a
// variant may not emit).
func benchEngine(b *testing.B, m *Module) {
	i, _ := instantiate(b, m, Binding{Config: []byte("{}"), Sink: &countSink{}})
	rec := benchRecord()
	if err := i.Process(bg, rec); err != nil { // warm the input buffer and caches
		b.Fatal(err)
	}
	testutil.LoopCPU(b, func() {
		if err := i.Process(bg, rec); err != nil {
			b.Fatal(err)
		}
	})
}

// benchFloorCPU is BenchmarkFloor/plain with cpu-ns/op.
func benchFloorCPU(b *testing.B) {
	mod, emitted := rawPassthrough(b, false, false, "passthrough")
	process := mod.ExportedFunction(abi.ExportProcess)
	mem := mod.Memory()
	rec := benchRecord()
	n := uint32(rec.EncodedSize())
	stack := make([]uint64, 1)
	ctx := context.Background()
	testutil.LoopCPU(b, func() {
		buf, _ := mem.Read(1024, n)
		rec.EncodeTo(buf)
		stack[0] = uint64(n)
		if err := process.CallWithStack(ctx, stack); err != nil || stack[0] != 0 {
			b.Fatal(err, stack[0])
		}
	})
	if len(emitted.Value) != len(rec.Value) {
		b.Fatal("no emit")
	}
}
