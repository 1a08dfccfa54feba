package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// Benchmarks of the same plugins in Go, Rust and C next to the raw wazero
// floor, in one run so that the ratios compare like with like on a shared
// machine (they mirror host/internal/engine's BenchmarkGoSDKPath):
//
//	go test -run '^$' -bench Polyglot -count 5 ./host/internal/conformance/
//
// Every passthrough benchmark moves the engine benchmarks' record (8-byte
// key, 100-byte value, 144 bytes encoded) into guest memory and gets one
// emit back. Besides ns/op they report cpu-ns/op, the CPU time of the
// benchmarking thread per record (less disturbed by other processes on a
// shared machine than wall time). Compare medians.
//
//	floor                      raw wazero on the WAT passthrough (BenchmarkFloor/plain)
//	passthrough/<lang>/raw     raw wazero on the language's passthrough: the SDK's own cost
//	passthrough/<lang>/engine  the engine (instrumented, sandboxed) on it
//	wordcount/<lang>/raw       raw wazero on wordcount: a 10-word line of a
//	                           1,000-word vocabulary, a Go map as the store
//	wordcount/<lang>/engine    the engine on it, an in-memory store

// benchRecord is the engine benchmarks' record.
func benchRecord() *abi.Record {
	v := make([]byte, 100)
	for k := range v {
		v[k] = byte('a' + k%26)
	}
	return &abi.Record{Timestamp: 1700000000000, Offset: 1, Key: []byte("key00001"), Value: v}
}

// wordLines are wordcount's records: 1,000 lines of 10 words each from a
// 1,000-word vocabulary (words of 3 to 9 letters), cycled.
func wordLines() []*abi.Record {
	vocab := make([]string, 1000)
	for i := range vocab {
		w := make([]byte, 3+i%7)
		x := uint32(i*2654435761 + 1)
		for k := range w {
			w[k] = byte('a' + x%26)
			x = x*1103515245 + 12345
		}
		vocab[i] = string(w)
	}
	recs := make([]*abi.Record, 1000)
	for i := range recs {
		var words []string
		for k := 0; k < 10; k++ {
			words = append(words, vocab[(i*7+k*131)%len(vocab)])
		}
		recs[i] = &abi.Record{Timestamp: int64(i), Key: []byte("line"), Value: []byte(strings.Join(words, " "))}
	}
	return recs
}

// floorWasm is the engine's WAT passthrough: it imports only emit, reads
// its record at address 1024 and emits it back.
func floorWasm(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "passthrough.wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// rawHost is a bare wazero runtime (the compiler, no instrumentation, no
// sandbox limits) with WASI and every wasmstream import in its simplest
// form: emit bounds-checks and decodes into a reused record, outputs and
// stores resolve by name, the state is a map, config answers h.config.
type rawHost struct {
	rt      wazero.Runtime
	outputs []string
	stores  []string
	state   map[string][]byte
	config  []byte // what the config import answers; "{}" by default
	emitted abi.Record
	emits   int
	errMsg  string
}

var signatures = map[string]int{ // import -> i32 parameters; every result is one i32
	abi.ImportEmit: 2, abi.ImportOutputIndex: 2, abi.ImportStoreIndex: 2, abi.ImportConfig: 2,
	abi.ImportLog: 3, abi.ImportSetError: 2, abi.ImportStateGet: 5, abi.ImportStatePut: 5,
	abi.ImportStateDelete: 3, abi.ImportScanOpen: 5, abi.ImportScanNext: 3, abi.ImportScanClose: 1,
	// The Go wordcount links commit_mark for emit: commit; the raw host
	// runs it in update mode, which never calls it (it would get 0).
	abi.ImportCommitMark: 2,
}

func i32s(n int) []api.ValueType {
	t := make([]api.ValueType, n)
	for i := range t {
		t[i] = api.ValueTypeI32
	}
	return t
}

func newRawHost(tb testing.TB, outputs, stores []string) *rawHost {
	tb.Helper()
	ctx := context.Background()
	h := &rawHost{rt: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler()),
		outputs: outputs, stores: stores, state: map[string][]byte{}, config: []byte("{}")}
	tb.Cleanup(func() { h.rt.Close(ctx) })
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		tb.Fatal(err)
	}
	read := func(m api.Module, p, n uint64) []byte {
		b, _ := m.Memory().Read(api.DecodeU32(p), api.DecodeU32(n))
		return b
	}
	index := func(names []string) api.GoModuleFunc {
		return func(_ context.Context, m api.Module, s []uint64) {
			name := string(read(m, s[0], s[1]))
			for i, n := range names {
				if n == name {
					s[0] = uint64(i)
					return
				}
			}
			s[0] = api.EncodeI32(abi.ErrnoNoName.Result())
		}
	}
	b := h.rt.NewHostModuleBuilder(abi.ImportModule)
	for name, params := range signatures {
		var fn api.GoModuleFunc
		switch name {
		case abi.ImportEmit:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				buf, ok := m.Memory().Read(api.DecodeU32(s[0]), api.DecodeU32(s[1]))
				if !ok || h.emitted.Decode(buf) != nil {
					s[0] = api.EncodeI32(abi.ErrnoFault.Result())
					return
				}
				h.emits++
				s[0] = 0
			}
		case abi.ImportOutputIndex:
			fn = index(outputs)
		case abi.ImportStoreIndex:
			fn = index(stores)
		case abi.ImportConfig:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				if uint64(len(h.config)) <= uint64(api.DecodeU32(s[1])) {
					m.Memory().Write(api.DecodeU32(s[0]), h.config)
				}
				s[0] = uint64(len(h.config))
			}
		case abi.ImportSetError:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				h.errMsg = string(read(m, s[0], s[1]))
				s[0] = 0
			}
		case abi.ImportStateGet:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				v, ok := h.state[string(read(m, s[1], s[2]))]
				if !ok {
					s[0] = api.EncodeI32(abi.ErrnoNotFound.Result())
					return
				}
				if uint64(len(v)) <= uint64(api.DecodeU32(s[4])) {
					m.Memory().Write(api.DecodeU32(s[3]), v)
				}
				s[0] = uint64(len(v))
			}
		case abi.ImportStatePut:
			fn = func(_ context.Context, m api.Module, s []uint64) {
				h.state[string(read(m, s[1], s[2]))] = append([]byte(nil), read(m, s[3], s[4])...)
				s[0] = 0
			}
		default:
			fn = func(_ context.Context, _ api.Module, s []uint64) { s[0] = 0 }
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, i32s(params), i32s(1)).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		tb.Fatal(err)
	}
	return h
}

// instantiate runs wasm through _initialize (if any), wasmstream_init (if
// any) and wasmstream_input(4096), and returns the module and the input
// buffer's address (1024, the WAT passthrough's, when it has no input export).
func (h *rawHost) instantiate(tb testing.TB, wasm []byte) (api.Module, uint32) {
	tb.Helper()
	ctx := context.Background()
	mod, err := h.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mod.Close(ctx) })
	for _, name := range []string{abi.ExportInitialize, abi.ExportInit} {
		if f := mod.ExportedFunction(name); f != nil {
			if res, err := f.Call(ctx); err != nil || (len(res) == 1 && res[0] != 0) {
				tb.Fatalf("%s: %v %v %s", name, res, err, h.errMsg)
			}
		}
	}
	in := mod.ExportedFunction(abi.ExportInput)
	if in == nil {
		return mod, 1024
	}
	res, err := in.Call(ctx, 4096)
	if err != nil || res[0] == 0 {
		tb.Fatalf("%s(4096) = %v, %v", abi.ExportInput, res, err)
	}
	return mod, uint32(res[0])
}

// caller calls one module's wasmstream_process as the engine benchmarks'
// floor does: one api.Function (looking it up allocates a call engine), a
// reused stack, CallWithStack.
type caller struct {
	h       *rawHost
	mem     api.Memory
	in      uint32
	process api.Function
	stack   []uint64
}

func (h *rawHost) caller(mod api.Module, in uint32) *caller {
	return &caller{h: h, mem: mod.Memory(), in: in, process: mod.ExportedFunction(abi.ExportProcess), stack: make([]uint64, 1)}
}

// call copies rec into the input buffer and calls wasmstream_process.
func (c *caller) call(tb testing.TB, rec *abi.Record) {
	n := uint32(rec.EncodedSize())
	buf, ok := c.mem.Read(c.in, n)
	if !ok {
		tb.Fatalf("input buffer at %d too small for %d bytes", c.in, n)
	}
	rec.EncodeTo(buf)
	c.stack[0] = uint64(n)
	if err := c.process.CallWithStack(context.Background(), c.stack); err != nil || c.stack[0] != 0 {
		tb.Fatal(err, c.stack[0], c.h.errMsg)
	}
}

// directState is an engine.State over one map, written through (the
// benchmarks measure the plugins and the engine, not staging).
type directState map[string][]byte

func (s directState) Get(_ int, key []byte) ([]byte, bool, error) {
	v, ok := s[string(key)]
	return v, ok, nil
}
func (s directState) Put(_ int, key, value []byte) error {
	s[string(key)] = append([]byte(nil), value...)
	return nil
}
func (s directState) Delete(_ int, key []byte) error { delete(s, string(key)); return nil }
func (s directState) Scan(int, []byte, []byte) (engine.Iterator, error) {
	return nil, fmt.Errorf("directState: no scans")
}

type countSink struct{ n int }

func (s *countSink) Emit(int, *abi.Record) error { s.n++; return nil }

// benchEngine runs records through the engine on wasm.
func benchEngine(b *testing.B, name string, wasm []byte, bind engine.Binding, records []*abi.Record) {
	m, _ := module(b, name, wasm)
	sink := &countSink{}
	bind.Name, bind.Sink = name, sink
	i, err := m.Instantiate(context.Background(), bind)
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close(context.Background())
	ctx := context.Background()
	if err := i.Process(ctx, records[0]); err != nil { // warm the input buffer and caches
		b.Fatal(err)
	}
	k := 0
	testutil.LoopCPU(b, func() {
		if err := i.Process(ctx, records[k%len(records)]); err != nil {
			b.Fatal(err)
		}
		k++
	})
	if sink.n == 0 {
		b.Fatal("no emits")
	}
}

func BenchmarkPolyglot(b *testing.B) {
	rec := benchRecord()
	b.Run("floor", func(b *testing.B) {
		h := newRawHost(b, []string{"out"}, nil)
		c := h.caller(h.instantiate(b, floorWasm(b)))
		testutil.LoopCPU(b, func() { c.call(b, rec) })
	})
	for _, lang := range langs {
		b.Run("passthrough/"+lang+"/raw", func(b *testing.B) {
			h := newRawHost(b, []string{"out"}, nil)
			c := h.caller(h.instantiate(b, pluginWasm(b, lang, "passthrough")))
			testutil.LoopCPU(b, func() { c.call(b, rec) })
			if h.emits == 0 || len(h.emitted.Value) != len(rec.Value) {
				b.Fatalf("%d emits", h.emits)
			}
		})
	}
	b.Run("passthrough/wat/engine", func(b *testing.B) {
		benchEngine(b, "floor", floorWasm(b), engine.Binding{Outputs: []string{"out"}}, []*abi.Record{rec})
	})
	for _, lang := range langs {
		b.Run("passthrough/"+lang+"/engine", func(b *testing.B) {
			benchEngine(b, "passthrough-"+lang, pluginWasm(b, lang, "passthrough"),
				engine.Binding{Outputs: []string{"out"}}, []*abi.Record{rec})
		})
	}
	lines := wordLines()
	for _, lang := range langs {
		b.Run("wordcount/"+lang+"/raw", func(b *testing.B) {
			h := newRawHost(b, []string{"counts"}, []string{"counts"})
			c := h.caller(h.instantiate(b, pluginWasm(b, lang, "wordcount")))
			k := 0
			testutil.LoopCPU(b, func() {
				c.call(b, lines[k%len(lines)])
				k++
			})
			if h.emits == 0 {
				b.Fatal("no emits")
			}
		})
	}
	for _, lang := range langs {
		b.Run("wordcount/"+lang+"/engine", func(b *testing.B) {
			benchEngine(b, "wordcount-"+lang, pluginWasm(b, lang, "wordcount"),
				engine.Binding{Outputs: []string{"counts"}, Stores: []string{"counts"}, State: directState{}, Time: noTime{}}, lines)
		})
	}
}

// TestFootprint reports each language's module sizes and the linear memory
// of an instance after init and after 1,000 wordcount records (raw wazero),
// and holds Rust and C to the targets: modules under 200 KiB and
// instances under 256 KiB. Go's are reported only (about 2 MB, and a few
// MiB of memory: its runtime).
func TestFootprint(t *testing.T) {
	lines := wordLines()
	for _, lang := range langs {
		for _, name := range []string{"passthrough", "filter", "wordcount"} {
			wasm := pluginWasm(t, lang, name)
			h := newRawHost(t, []string{"counts", "out"}, []string{"counts"})
			if name == "filter" {
				h.config = []byte(`{"field":"a","value":1}`)
			}
			start := time.Now()
			mod, in := h.instantiate(t, wasm)
			inst := time.Since(start)
			initMem := mod.Memory().Size()
			after := initMem
			if name == "wordcount" {
				c := h.caller(mod, in)
				for _, r := range lines {
					c.call(t, r)
				}
				after = mod.Memory().Size()
			}
			t.Logf("%-5s %-12s module %7.1f KiB, compile+instantiate+init %6v, memory after init %7.1f KiB, after 1,000 records %7.1f KiB",
				lang, name, float64(len(wasm))/1024, inst.Round(10*time.Microsecond), float64(initMem)/1024, float64(after)/1024)
			if lang == "go" {
				continue
			}
			if len(wasm) >= 200<<10 {
				t.Errorf("%s %s: module %d bytes, want under 200 KiB", lang, name, len(wasm))
			}
			if after >= 256<<10 {
				t.Errorf("%s %s: instance memory %d bytes, want under 256 KiB", lang, name, after)
			}
		}
	}
}
