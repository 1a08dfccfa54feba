package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// invalidInputs are testdata modules instrument must refuse.
var invalidInputs = map[string]bool{"corrupt": true, "truncated": true, "escape": true, "reserved": true}

// TestInstrumentTestdata: every valid test module instruments into a module
// wazero accepts, with the interrupt flag exported and no start section.
func TestInstrumentTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.wasm")
	if len(files) < 20 {
		t.Fatalf("%d test modules", len(files))
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".wasm")
		wasm, _ := os.ReadFile(f)
		ins, err := instrument(wasm)
		if invalidInputs[name] {
			if err == nil {
				t.Errorf("%s: instrumented", name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c, err := rt.CompileModule(ctx, ins.wasm)
		if err != nil {
			t.Errorf("%s: the instrumented module does not compile: %v", name, err)
			continue
		}
		if _, ok := c.ExportedFunctions()[exportStart]; ok != ins.hasStart {
			t.Errorf("%s: start export %v, had a start section %v", name, ok, ins.hasStart)
		}
		_ = c.Close(ctx)
	}
}

func TestInstrumentCounts(t *testing.T) {
	for _, c := range []struct {
		file         string
		funcs, loops int
		start        bool
	}{
		{"passthrough", 3, 0, false},
		{"loop", 5, 1, false},
		{"stateops", 4, 2, false},
		{"startloop", 4, 1, true},
	} {
		ins, err := instrument(wasmFile(t, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if ins.funcs != c.funcs || ins.loops != c.loops || ins.hasStart != c.start {
			t.Errorf("%s: %d funcs, %d loops, start %v; want %d, %d, %v",
				c.file, ins.funcs, ins.loops, ins.hasStart, c.funcs, c.loops, c.start)
		}
		if bytes.Contains(ins.wasm, []byte(".debug_")) {
			t.Errorf("%s: DWARF kept", c.file)
		}
	}
}

// TestInstrumentPreservesSemantics runs the original and the instrumented
// opcodes module side by side: every kind of immediate must be skipped
// exactly, or the results (or validation) differ.
func TestInstrumentPreservesSemantics(t *testing.T) {
	ctx := context.Background()
	wasm := wasmFile(t, "opcodes")
	ins, err := instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if ins.loops != 2 {
		t.Errorf("%d loops instrumented, want 2", ins.loops)
	}
	run := func(bin []byte) uint64 {
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		m, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.ExportedFunction("run").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	want, got := run(wasm), run(ins.wasm)
	if want != got || want == 0 {
		t.Fatalf("instrumented run() = %d, original %d", got, want)
	}
}

// TestInstrumentMultiValue: functions with two results, returns and
// branches to the function's own label keep their meaning once the body is
// wrapped in a block for the stack accounting (a block of a new type).
func TestInstrumentMultiValue(t *testing.T) {
	ctx := context.Background()
	wasm := wasmFile(t, "multivalue")
	ins, err := instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	run := func(bin []byte) uint64 {
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		m, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.ExportedFunction("run").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if want, got := run(wasm), run(ins.wasm); want != 77 || got != want {
		t.Fatalf("instrumented run() = %d, original %d, want 77", got, want)
	}
}

// TestTablesShareTheCap: two tables share MaxTableEntries; each keeps a
// smaller declared maximum.
func TestTablesShareTheCap(t *testing.T) {
	// (table 10 funcref) (table 100 1000 externref) (table 0 5 funcref)
	p := []byte{3, 0x70, 0, 10, 0x6F, 1, 100, 0xE8, 0x07, 0x70, 1, 0, 5}
	got, err := capTables(p, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// slack 1000-110 = 890, 296 each: 10+296, min(100+296, 1000), min(0+296, 5)
	want := []byte{3, 0x70, 1, 10, 0xB2, 0x02, 0x6F, 1, 100, 0x8C, 0x03, 0x70, 1, 0, 5}
	if !bytes.Equal(got, want) {
		t.Fatalf("capTables = %x, want %x", got, want)
	}
	if _, err := capTables(p, 100); err == nil || !strings.Contains(err.Error(), "tables of 110 entries at least") {
		t.Fatalf("over the cap: %v", err)
	}
}

// TestInstrumentMalformed: no prefix or bit flip of a valid module panics;
// each either fails cleanly or yields a module wazero judges for itself.
func TestInstrumentMalformed(t *testing.T) {
	for _, name := range []string{"stateops", "opcodes", "sandbox"} {
		wasm := wasmFile(t, name)
		for n := 0; n < len(wasm); n++ {
			_, _ = instrument(wasm[:n])
			flipped := bytes.Clone(wasm)
			flipped[n] ^= 0x80
			_, _ = instrument(flipped)
		}
	}
	if _, err := instrument([]byte("\x00asm\x0d\x00\x01\x00")); !errors.Is(err, errNotWasm) || !strings.Contains(err.Error(), "component") {
		t.Errorf("component: %v", err)
	}
}

func FuzzInstrument(f *testing.F) {
	for _, name := range []string{"passthrough", "stateops", "opcodes", "startloop"} {
		f.Add(wasmFile(f, name))
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		ins, err := instrument(wasm)
		if err != nil {
			return
		}
		// Whatever came out must not be a module in which the guest can name
		// the flag: instrumenting it again must still work or fail cleanly.
		_, _ = instrument(ins.wasm)
	})
}

// TestWazeroCloseOnContextDone records the wazero behaviour the engine's
// design rests on (see instrument.go). If wazero changes, revisit the design.
func TestWazeroCloseOnContextDone(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	// 1. Module.Close from another goroutine interrupts a running loop, as
	// the WithCloseOnContextDone documentation says.
	spin, err := rt.InstantiateWithConfig(ctx, wasmFile(t, "spin"), wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	const after = 50 * time.Millisecond
	go func() { time.Sleep(after); _ = spin.CloseWithExitCode(ctx, 77) }()
	start := time.Now()
	_, err = spin.ExportedFunction("spin").Call(ctx, 0) // 2^32 iterations
	var exit *sys.ExitError
	// The exit code proves the Close interrupted the loop; the time bound
	// only rules out a loop that ran to its end (2^32 iterations take
	// seconds) and is loose so that a loaded machine does not fail it.
	if !errors.As(err, &exit) || exit.ExitCode() != 77 || time.Since(start) > time.Second+after {
		t.Fatalf("loop: %v after %v", err, time.Since(start))
	}

	// 2. It does not interrupt loop-free recursion: fib(37) runs to the end and
	// only then reports the exit. (This is why the engine instruments
	// function entries too.)
	fib, err := rt.InstantiateWithConfig(ctx, wasmFile(t, "spin"), wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(5 * time.Millisecond); _ = fib.CloseWithExitCode(ctx, 78) }()
	stack := []uint64{37}
	err = fib.ExportedFunction("fib").CallWithStack(ctx, stack)
	if err == nil {
		t.Log("fib finished before the Close ran (busy machine): inconclusive")
		return
	}
	if !errors.As(err, &exit) || exit.ExitCode() != 78 {
		t.Fatalf("fib: %v", err)
	}
	if stack[0] != 24157817 {
		t.Logf("wazero now interrupts recursion (fib result %d): the function-entry checks may be redundant", stack[0])
	}
}
