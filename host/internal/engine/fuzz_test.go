package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// FuzzModuleShape: the pre-parse and rewrite of instrument.go see every
// module a user deploys. Whatever the bytes, instrumentWith must not panic;
// and every module that wazero accepts and the pre-parse lets through must
// still be accepted by wazero once rewritten (the rewrite keeps a valid
// module valid: block types, added locals, types and exports); and the
// compile budget's totals walk must read whatever the pre-parse reads.
// Seeds: the test modules and testdata/fuzz/FuzzModuleShape.
func FuzzModuleShape(f *testing.F) {
	for _, name := range []string{"passthrough", "stateops", "opcodes", "startloop", "hostile", "multivalue", "trap"} {
		f.Add(wasmFile(f, name))
	}
	f.Add(moduleWithBody([]byte{1, 0x80, 0xE1, 0xEB, 0x17, 0x7F}, []byte{0x0B}))
	f.Add(tableModule(100))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	f.Cleanup(func() { _ = rt.Close(ctx) })
	lim := ModuleLimits{MaxModuleSize: 1 << 20, MaxFunctionLocals: 1000, MaxNestingDepth: 100, MaxTableEntries: 1000}.withDefaults()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		ins, err := instrumentWith(wasm, lim)
		if err != nil {
			return
		}
		// The compile budget's walk reads every module the
		// instrumentation reads (compilecost.go relies on it).
		if _, err := countTotals(wasm); err != nil {
			var ol *errOverLimit
			if !errors.As(err, &ol) {
				t.Fatalf("instrumented, but the totals walk failed: %v", err)
			}
		}
		orig, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		_ = orig.Close(ctx)
		c, err := rt.CompileModule(ctx, ins.wasm)
		if err != nil {
			t.Fatalf("valid module, invalid once instrumented: %v", err)
		}
		_ = c.Close(ctx)
	})
}

// FuzzHostCalls: every host function, called with arbitrary arguments (junk
// in the upper half of each i32 slot included, as wazero may pass) over
// arbitrary guest memory, in any phase (init; with record set, fn's bits
// 4-5 choose process, on_timer or on_commit). It must never panic, must
// return a result >= 0 (for time_now, a time or NoTime) or a named errno,
// and must record an ABI misuse for every EFAULT. Seeds: one well-formed
// call of each function and testdata/fuzz/FuzzHostCalls.
func FuzzHostCalls(f *testing.F) {
	var rec abi.Record
	rec.Key, rec.Value, rec.Headers = []byte("k"), []byte("value"), []abi.Header{{Key: "h", Value: []byte("v")}}
	encoded := rec.AppendEncode(nil)
	f.Add(uint8(0), true, uint64(1024), uint64(len(encoded)), uint64(0), uint64(0), uint64(0), encoded)
	f.Add(uint8(1), true, uint64(1024), uint64(3), uint64(0), uint64(0), uint64(0), []byte("out"))
	f.Add(uint8(2), false, uint64(1024), uint64(1), uint64(0), uint64(0), uint64(0), []byte("s"))
	f.Add(uint8(3), false, uint64(1024), uint64(100), uint64(0), uint64(0), uint64(0), []byte{})
	f.Add(uint8(4), true, uint64(1), uint64(1024), uint64(5), uint64(0), uint64(0), []byte("hello"))
	f.Add(uint8(5), true, uint64(1024), uint64(5), uint64(0), uint64(0), uint64(0), []byte("error"))
	f.Add(uint8(6), true, uint64(0), uint64(1024), uint64(1), uint64(2048), uint64(16), []byte("k"))
	f.Add(uint8(7), true, uint64(0), uint64(1024), uint64(1), uint64(1025), uint64(4), []byte("kval!"))
	f.Add(uint8(8), true, uint64(0), uint64(1024), uint64(1), uint64(0), uint64(0), []byte("k"))
	f.Add(uint8(9), true, uint64(0), uint64(1024), uint64(0), uint64(1024), uint64(0), []byte{})
	f.Add(uint8(10), true, uint64(0), uint64(2048), uint64(64), uint64(0), uint64(0), []byte{})
	f.Add(uint8(11), true, uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), []byte{})
	f.Add(uint8(12), true, uint64(0), uint64(60000), uint64(1024), uint64(1), uint64(0), []byte("k"))
	f.Add(uint8(13|1<<4), true, uint64(1), uint64(60000), uint64(1024), uint64(1), uint64(0), []byte("k"))
	f.Add(uint8(14|2<<4), true, uint64(1), uint64(0), uint64(0), uint64(0), uint64(0), []byte{})
	f.Add(uint8(15|1<<4), true, uint64(1024), uint64(1), uint64(0), uint64(0), uint64(0), []byte("k"))
	f.Add(uint8(0), true, uint64(0xdeadbeef00000400), uint64(0xffffffff00000010), uint64(0), uint64(0), uint64(0), []byte{})

	r, _ := newRuntime(f, Options{})
	st := newMemState(1)
	st.stores[0]["k"] = []byte("value")
	ft := newFakeTime(1700000000000, 1700000001000)
	ft.maxTimers, ft.maxMarks = 100, 100
	i, _ := instantiate(f, compileFile(f, r, "hostile"), Binding{
		Outputs: []string{"out", "second"}, Stores: []string{"s"}, State: st,
		Config: []byte(`{"a":1}`), Sink: &countSink{}, Time: ft,
	})
	mem := i.cur.mem
	f.Fuzz(func(t *testing.T, fn uint8, record bool, a0, a1, a2, a3, a4 uint64, data []byte) {
		h := hostFuncs[int(fn)%len(hostFuncs)]
		if len(data) > 64<<10 {
			data = data[:64<<10]
		}
		if !mem.Write(1024, data) {
			t.Fatal("guest memory write failed")
		}
		p := phaseInit
		if record {
			p = [4]phase{phaseRecord, phaseTimer, phaseCommit, phaseRecord}[fn>>4&3]
		}
		i.beginCall(p)
		i.streamNow, i.wallNow = ft.Now()
		ft.calls = ft.calls[:0]
		stack := []uint64{a0, a1, a2, a3, a4}
		h.fn(i.ctx, nil, stack)
		i.closeCursors()
		i.phase = phaseNone
		res := int64(int32(stack[0]))
		if h.result == api.ValueTypeI64 {
			if res = int64(stack[0]); res == abi.NoTime {
				return
			}
		}
		if res >= 0 {
			return
		}
		if res < -1<<16 {
			t.Fatalf("%s returned %d, not a named errno", h.name, res)
		}
		e := abi.Errno(-res)
		if e.Name() == "E"+itoa(int(e)) {
			t.Fatalf("%s returned %d, not a named errno", h.name, res)
		}
		if e == abi.ErrnoFault && i.misuseMsg == "" {
			t.Fatalf("%s returned EFAULT without recording a misuse", h.name)
		}
	})
}

func itoa(n int) string {
	var b [20]byte
	p := len(b)
	for {
		p--
		b[p] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[p:])
		}
	}
}
