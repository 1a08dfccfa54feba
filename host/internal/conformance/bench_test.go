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
//	passthrough/<lang>/engine  the engine (instrumented, sandboxed) on it, one record per call
//	passthrough/<lang>/batch   the engine on it, batchSize records per call (ABI version 2,
//	                           engine.Instance.ProcessBatch); op is still one record
//	wordcount/<lang>/raw       raw wazero on wordcount: a 10-word line of a
//	                           1,000-word vocabulary, a Go map as the store
//	wordcount/<lang>/engine    the engine on it, an in-memory store, one record per call
//	wordcount/<lang>/batch     the same in batches
//
// lang is go, rust, c, or wat: the floor by hand (the engine's
// testdata/passthrough.wat one at a time and passthrough2.wat in
// batches; testdata/wordcount.wat here, both ways).

// batchSize is the records per ProcessBatch call of the batch benchmarks
// (the runner hands up to 1,024 at a time).
const batchSize = 100

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

// wordKeyed are wordLines' words one per record, keyed by the word:
// what the general word count's counting side reads from its
// repartition topic.
func wordKeyed() []*abi.Record {
	var recs []*abi.Record
	for _, l := range wordLines() {
		for _, w := range strings.Fields(string(l.Value)) {
			recs = append(recs, &abi.Record{Timestamp: l.Timestamp, Key: []byte(w), Value: []byte(w)})
		}
	}
	return recs
}

// floorWasm is the engine's WAT passthrough: it imports only emit, reads
// its record at address 1024 and emits it back.
func floorWasm(tb testing.TB) []byte {
	return readWasm(tb, filepath.Join("..", "engine", "testdata", "passthrough.wasm"))
}

// floor2Wasm is the engine's WAT passthrough in ABI version 2: a batch's
// records forwarded in place.
func floor2Wasm(tb testing.TB) []byte {
	return readWasm(tb, filepath.Join("..", "engine", "testdata", "passthrough2.wasm"))
}

// wordcountWasm is the word count's floor by hand (testdata/wordcount.wat),
// in ABI versions 1 and 2.
func wordcountWasm(tb testing.TB) []byte {
	return readWasm(tb, filepath.Join("testdata", "wordcount.wasm"))
}

func readWasm(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
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

// nopHooks are the batch benchmarks' BatchHooks: nothing per call.
type nopHooks struct{}

func (nopHooks) Begin(int)           {}
func (nopHooks) End(int, error) bool { return false }

// benchBatch runs records through the engine on wasm in batches of
// batchSize (ProcessBatch): op is one record, every batchSize-th runs a
// batch, so that cpu-ns/op is per record as in benchEngine.
func benchBatch(b *testing.B, name string, wasm []byte, bind engine.Binding, records []*abi.Record) {
	m, _ := module(b, name, wasm)
	if !m.Info().Batch {
		b.Fatalf("%s speaks ABI version %d: no batches", name, m.Info().ABIVersion)
	}
	sink := &countSink{}
	bind.Name, bind.Sink = name, sink
	i, err := m.Instantiate(context.Background(), bind)
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close(context.Background())
	ctx := context.Background()
	// The batches: consecutive records, cycled.
	var batches [][]engine.Call
	for lo := 0; lo < max(len(records), batchSize); lo += batchSize {
		calls := make([]engine.Call, batchSize)
		for k := range calls {
			calls[k] = engine.Call{Record: records[(lo+k)%len(records)]}
		}
		batches = append(batches, calls)
	}
	run := func(calls []engine.Call) {
		for done := 0; done < len(calls); {
			n := i.ProcessBatch(ctx, calls[done:], nopHooks{}, time.Time{})
			if n == 0 {
				b.Fatal("ProcessBatch ended no call")
			}
			done += n
		}
	}
	run(batches[0]) // warm the input buffer, the arena and caches
	k := 0
	testutil.LoopCPU(b, func() {
		k++
		if k%batchSize == 0 {
			run(batches[(k/batchSize)%len(batches)])
		}
	})
	if m, ok := bind.Time.(*markAll); ok {
		if m.n == 0 {
			b.Fatal("no marks") // commit mode emits only at commit points
		}
	} else if sink.n == 0 {
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
	b.Run("passthrough/wat/batch", func(b *testing.B) {
		benchBatch(b, "floor2", floor2Wasm(b), engine.Binding{Outputs: []string{"out"}}, []*abi.Record{rec})
	})
	for _, lang := range langs {
		b.Run("passthrough/"+lang+"/batch", func(b *testing.B) {
			benchBatch(b, "passthrough-"+lang, pluginWasm(b, lang, "passthrough"),
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
	wcBinding := func() engine.Binding {
		return engine.Binding{Outputs: []string{"counts"}, Stores: []string{"counts"}, State: directState{}, Time: noTime{}}
	}
	b.Run("wordcount/wat/engine", func(b *testing.B) {
		benchEngine(b, "wordcount-wat", wordcountWasm(b), wcBinding(), lines)
	})
	for _, lang := range langs {
		b.Run("wordcount/"+lang+"/engine", func(b *testing.B) {
			benchEngine(b, "wordcount-"+lang, pluginWasm(b, lang, "wordcount"), wcBinding(), lines)
		})
	}
	b.Run("wordcount/wat/batch", func(b *testing.B) {
		benchBatch(b, "wordcount-wat", wordcountWasm(b), wcBinding(), lines)
	})
	for _, lang := range langs {
		b.Run("wordcount/"+lang+"/batch", func(b *testing.B) {
			benchBatch(b, "wordcount-"+lang, pluginWasm(b, lang, "wordcount"), wcBinding(), lines)
		})
	}
	// The general word count's first step: a line in, a record per word
	// out (keyed by the word, for the repartition topic).
	for _, lang := range splitLangs {
		b.Run("split/"+lang+"/batch", func(b *testing.B) {
			benchBatch(b, "split-"+lang, pluginWasm(b, lang, "split"), engine.Binding{Outputs: []string{"words"}}, lines)
		})
	}
	// The counting side of the general word count: one word a record.
	words := wordKeyed()
	for _, lang := range langs {
		b.Run("count/"+lang+"/batch", func(b *testing.B) {
			benchBatch(b, "count-"+lang, pluginWasm(b, lang, "wordcount"), wcBinding(), words)
		})
	}
	// The same in commit mode (emit: commit, the benchmark's "-commit"
	// configurations): marks instead of emits.
	for _, lang := range langs {
		b.Run("count-commit/"+lang+"/batch", func(b *testing.B) {
			bd := wcBinding()
			bd.Time = &markAll{}
			bd.Config = []byte(`{"emit":"commit","value_format":"int64"}`)
			benchBatch(b, "count-commit-"+lang, pluginWasm(b, lang, "wordcount"), bd, words)
		})
	}
}

// TestWordcountFloor: the word count's floor (testdata/wordcount.wat)
// does what the Go wordcount does on the benchmark's lines, one at a time
// and in batches, so that the benchmark compares like with like.
func TestWordcountFloor(t *testing.T) {
	var recs []abi.Record
	for _, r := range wordLines()[:300] {
		recs = append(recs, *r)
	}
	b := binding{outputs: []string{"counts"}, stores: []string{"counts"}, config: "{}"}
	var want string
	for _, c := range []struct {
		name    string
		wasm    []byte
		batched bool
	}{{"go", pluginWasm(t, "go", "wordcount"), false}, {"wat", wordcountWasm(t), false}, {"wat", wordcountWasm(t), true}} {
		p := start(t, "wordcount-"+c.name, c.wasm, b)
		var steps []step
		if c.batched {
			var names []string
			for i := range recs {
				names = append(names, "record "+itoa(i))
			}
			var n int
			steps, n = p.processBatch(names, recs)
			if n != (len(recs)+maxBatch-1)/maxBatch {
				t.Errorf("%d records in %d batches", len(recs), n)
			}
		} else {
			for i, r := range recs {
				steps = append(steps, p.process("record "+itoa(i), r))
			}
		}
		got := transcript(b.outputs, steps) + strings.Join(p.state.dump(b.stores), "\n")
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("%s (batched %v) differs from the go wordcount: %s", c.name, c.batched, firstDiff(want, got))
		}
	}
}

// maxBatch is the engine's most calls per batch (engine.maxBatchCalls).
const maxBatch = 1024

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

// markAll is the Time of the commit-mode count's benchmark: every
// commit_mark succeeds and is counted (the window's marks are not kept).
type markAll struct {
	noTime
	n int
}

func (m *markAll) Mark([]byte, int64) (bool, error) { m.n++; return true, nil }
