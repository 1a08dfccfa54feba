package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// Benchmarks. Every one moves a record with an 8-byte key and a 100-byte
// value (144 bytes encoded) into guest memory and gets one emit back, with
// timeout protection on unless the name says otherwise.
//
//	go test -run '^$' -bench . -benchmem ./host/internal/engine/

// benchRecord is the record every benchmark processes.
func benchRecord() *abi.Record {
	v := make([]byte, 100)
	for k := range v {
		v[k] = byte('a' + k%26)
	}
	return &abi.Record{Timestamp: 1700000000000, Offset: 1, Partition: 0, Key: []byte("key00001"), Value: v}
}

// benchModule measures Instance.Process on any compiled module: the helper
// for the Go SDK passthrough benchmark (compile its .wasm with
// Runtime.Compile and call this). records yields the record for iteration
// n; nil means benchRecord for every iteration.
func benchModule(b *testing.B, m *Module, bind Binding, records func(n int) *abi.Record) {
	b.Helper()
	if bind.Name == "" {
		bind.Name = "bench"
	}
	if bind.Outputs == nil {
		bind.Outputs = []string{"out"}
	}
	sink := &countSink{}
	if bind.Sink == nil {
		bind.Sink = sink
	}
	i, err := m.Instantiate(context.Background(), bind)
	if err != nil {
		b.Fatal(err)
	}
	defer i.Close(context.Background())
	if records == nil {
		r := benchRecord()
		records = func(int) *abi.Record { return r }
	}
	ctx := context.Background()
	if err := i.Process(ctx, records(0)); err != nil { // warm the input buffer and caches
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if err := i.Process(ctx, records(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if sink.n != b.N+1 && bind.Sink == Sink(sink) {
		b.Fatalf("%d emits for %d records", sink.n, b.N+1)
	}
}

// BenchmarkProcessWAT is the engine's per-record cost on the passthrough
// plugin: encode into guest memory, process, emit decoded and handed to the
// Sink, watchdog bookkeeping, misuse and status checks.
func BenchmarkProcessWAT(b *testing.B) {
	r, _ := newRuntime(b, Options{})
	benchModule(b, compileFile(b, r, "passthrough"), Binding{}, nil)
}

// BenchmarkStateGetPut compares statecounter (state_get + add + state_put +
// emit) with passthrough on the same records, 10,000 keys cycled, against
// the in-memory State of the tests (so the difference is the engine's cost
// of two state calls, not a store's).
func BenchmarkStateGetPut(b *testing.B) {
	const keys = 10000
	recs := make([]*abi.Record, keys)
	for k := range recs {
		recs[k] = benchRecord()
		recs[k].Key = []byte(fmt.Sprintf("key%05d", k))
	}
	next := func(n int) *abi.Record { return recs[n%keys] }
	for _, name := range []string{"passthrough", "statecounter"} {
		b.Run(name, func(b *testing.B) {
			r, _ := newRuntime(b, Options{})
			st := newMemState(1)
			benchModule(b, compileFile(b, r, name), Binding{Stores: []string{"counts"}, State: st}, next)
		})
	}
}

// BenchmarkFloor is raw wazero on the original (uninstrumented) passthrough:
// the same record copy, the same process call with CallWithStack and a
// reused stack, an emit host function that bounds-checks and decodes into a
// reused record, and nothing else.
//
//	plain:                         no timeout protection at all (the floor)
//	closeOnContextDone:            WithCloseOnContextDone(true), context.Background
//	closeOnContextDone+WithTimeout: the same plus a per-call context.WithTimeout
//	instrumented:                  the engine's instrumented binary, raw (the cost of the checks alone)
func BenchmarkFloor(b *testing.B) {
	for _, mode := range []string{"plain", "closeOnContextDone", "closeOnContextDone+WithTimeout", "instrumented"} {
		b.Run(mode, func(b *testing.B) { benchRaw(b, mode) })
	}
}

// rawPassthrough instantiates passthrough (instrumented or not) in a bare
// wazero runtime with a minimal emit.
func rawPassthrough(b *testing.B, closeOnDone, instrumented bool, file string) (api.Module, *abi.Record) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone))
	b.Cleanup(func() { _ = rt.Close(ctx) })
	var emitted abi.Record
	_, err := rt.NewHostModuleBuilder(abi.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
			buf, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
			if !ok || emitted.Decode(buf) != nil {
				s[0] = api.EncodeI32(abi.ErrnoFault.Result())
				return
			}
			s[0] = 0
		}), i32s(2), i32s(1)).Export(abi.ImportEmit).Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wasm := wasmFile(b, file)
	if instrumented {
		ins, err := instrument(wasm)
		if err != nil {
			b.Fatal(err)
		}
		wasm = ins.wasm
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		b.Fatal(err)
	}
	return mod, &emitted
}

func benchRaw(b *testing.B, mode string) {
	closeOnDone := mode == "closeOnContextDone" || mode == "closeOnContextDone+WithTimeout"
	mod, emitted := rawPassthrough(b, closeOnDone, mode == "instrumented", "passthrough")
	process := mod.ExportedFunction(abi.ExportProcess)
	mem := mod.Memory()
	rec := benchRecord()
	n := uint32(rec.EncodedSize())
	stack := make([]uint64, 1)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		buf, _ := mem.Read(1024, n)
		rec.EncodeTo(buf)
		stack[0] = uint64(n)
		var err error
		if mode == "closeOnContextDone+WithTimeout" {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err = process.CallWithStack(cctx, stack)
			cancel()
		} else {
			err = process.CallWithStack(ctx, stack)
		}
		if err != nil || stack[0] != 0 {
			b.Fatal(err, stack[0])
		}
	}
	b.StopTimer()
	if len(emitted.Value) != 100 {
		b.Fatal("no emit")
	}
}

// BenchmarkGuestCode measures what timeout protection costs inside guest
// code: spin = 1000 iterations of a tight loop, fib = fib(20), 21,891 calls
// and no loop. plain has no protection; closeOnContextDone is wazero's
// (a Go round trip at every loop head, nothing at calls); instrumented is the
// engine's (a global load and branch at every loop head and function entry).
func BenchmarkGuestCode(b *testing.B) {
	for _, fn := range []string{"spin", "fib"} {
		for _, mode := range []string{"plain", "closeOnContextDone", "instrumented"} {
			b.Run(fn+"/"+mode, func(b *testing.B) {
				mod, _ := rawPassthrough(b, mode == "closeOnContextDone", mode == "instrumented", "spin")
				f := mod.ExportedFunction(fn)
				stack := make([]uint64, 1)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for k := 0; k < b.N; k++ {
					if fn == "spin" {
						stack[0] = 1000
					} else {
						stack[0] = 20
					}
					if err := f.CallWithStack(ctx, stack); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkTimeCallbacks puts the cost of a timer or commit callback next
// to a record's in the same run: Process on passthrough (the 144-byte
// record in, one emit back) and OnTimer/OnCommit on testdata/timers (a
// 40-byte trigger in, the trigger emitted back; Time.Now read once).
func BenchmarkTimeCallbacks(b *testing.B) {
	r, _ := newRuntime(b, Options{})
	b.Run("Process", func(b *testing.B) {
		benchModule(b, compileFile(b, r, "passthrough"), Binding{}, nil)
	})
	m := compileFile(b, r, "timers")
	for _, kind := range []abi.TimerKind{abi.TimerEventTime, abi.TriggerCommit} {
		name := "OnTimer"
		if kind == abi.TriggerCommit {
			name = "OnCommit"
		}
		b.Run(name, func(b *testing.B) {
			sink := &countSink{}
			i, err := m.Instantiate(context.Background(), Binding{Name: "bench", Outputs: []string{"out"}, Sink: sink, Time: newFakeTime(1, 2)})
			if err != nil {
				b.Fatal(err)
			}
			defer i.Close(context.Background())
			call := i.OnTimer
			if kind == abi.TriggerCommit {
				call = i.OnCommit
			}
			trig := &abi.Trigger{Timestamp: 1700000000000, Kind: kind, Key: []byte("key00001")}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				if err := call(ctx, trig); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if sink.n != b.N {
				b.Fatalf("%d emits for %d calls", sink.n, b.N)
			}
		})
	}
}
