package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

var bg = context.Background()

// TestModuleErrors covers every refusal at Compile (and Inspect) time.
func TestModuleErrors(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	cases := []struct {
		file string
		kind ModuleErrorKind
		want []string // substrings of the message
	}{
		{"corrupt", NotWasm, []string{"not a WebAssembly module", "256 bytes", "44208"}},
		{"truncated", CompileFailed, []string{"truncated"}},
		{"noabi", NoABIMarker, []string{"wasmstream_abi_version_N", "wasmstream_abi_version_1: func () -> ()",
			"link the SDK's wasmstream.c", "into a C plugin", "export * from \"./wasmstream-sdk/exports\" in a TypeScript one"}},
		{"abi3", UnsupportedABIVersion, []string{"offers ABI version(s) 3", "supports 1, 2"}},
		{"missingprocess", MissingExport, []string{"wasmstream_process, want func (i32) -> i32"}},
		{"nomemory", MissingExport, []string{`export its linear memory as "memory"`}},
		{"nomem", MissingExport, []string{`export its linear memory as "memory"`}},
		{"wrongsig", WrongSignature, []string{"wasmstream_process is func (i64) -> i32, want func (i32) -> i32"}},
		{"forbiddenimport", ForbiddenImport, []string{`env.foo: import module "env" is not allowed`}},
		{"badhostimport", ForbiddenImport, []string{
			"wasmstream.emit is func (i64) -> i32, want func (i32, i32) -> i32",
			"wasmstream.open_socket: the host provides no such function",
			"wasi_snapshot_preview1.sock_connect: the host provides no such function",
		}},
		{"importmemory", ForbiddenImport, []string{"wasmstream.memory is a memory import"}},
		{"bigmemory", MemoryTooLarge, []string{"2048 pages", "over the limit of 1024 pages"}},
		{"reserved", CompileFailed, []string{`"__wasmstream_interrupt" uses the reserved prefix`}},
		{"escape", CompileFailed, []string{"global index 0 out of range"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			wasm := wasmFile(t, c.file)
			for _, via := range []string{"Compile", "Inspect"} {
				var err error
				if via == "Compile" {
					var m *Module
					m, err = r.Compile(bg, c.file, wasm)
					if m != nil {
						t.Fatalf("Compile accepted %s", c.file)
					}
				} else {
					_, err = Inspect(bg, wasm)
				}
				var me *ModuleError
				if !errors.As(err, &me) {
					t.Fatalf("%s: got %v (%T), want *ModuleError", via, err, err)
				}
				if me.Kind != c.kind || !errors.Is(err, c.kind) || ModuleErrorKindOf(err) != c.kind {
					t.Fatalf("%s: kind %v, want %v (%v)", via, me.Kind, c.kind, err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not contain %q", via, err, w)
					}
				}
			}
		})
	}
}

func TestInspectAndInfo(t *testing.T) {
	wasm := wasmFile(t, "passthrough")
	info, err := Inspect(bg, wasm)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "passthrough")
	if got := m.Info(); fmt.Sprint(got) != fmt.Sprint(info) {
		t.Errorf("Module.Info %+v != Inspect %+v", got, info)
	}
	if info.ABIVersion != 1 || fmt.Sprint(info.ABIVersions) != "[1]" || info.Size != len(wasm) || len(info.SHA256) != 64 {
		t.Errorf("info = %+v", info)
	}
	var exports, imports []string
	for _, s := range info.Exports {
		exports = append(exports, s.String())
	}
	for _, s := range info.Imports {
		imports = append(imports, s.String())
	}
	wantExports := "memory: memory|wasmstream_abi_version_1: func () -> ()|wasmstream_input: func (i32) -> i32|wasmstream_process: func (i32) -> i32"
	if got := strings.Join(exports, "|"); got != wantExports {
		t.Errorf("exports = %s\nwant      %s", got, wantExports)
	}
	if got := strings.Join(imports, "|"); got != "wasmstream.emit: func (i32, i32) -> i32" {
		t.Errorf("imports = %s", got)
	}
	if info.MemoryMinPages != 2 || info.HasMemoryMax || info.HasInit || info.HasInitialize || info.HasStart {
		t.Errorf("info = %+v", info)
	}
	if info.InstrumentedFunctions != 3 || info.InstrumentedLoops != 0 {
		t.Errorf("instrumented %d functions, %d loops", info.InstrumentedFunctions, info.InstrumentedLoops)
	}

	// A module speaking versions 1 and 3 (with an export only version 3
	// knows) is accepted as version 1.
	info, err = Inspect(bg, wasmFile(t, "abi13"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ABIVersion != 1 || fmt.Sprint(info.ABIVersions) != "[1 3]" {
		t.Errorf("abi13: %+v", info)
	}
}

func TestPassthrough(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, sink := instantiate(t, compileFile(t, r, "passthrough"), Binding{})
	in := rec("k", "v")
	in.Headers = []abi.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2"}}
	for n := range 3 {
		if err := i.Process(bg, in); err != nil {
			t.Fatal(n, err)
		}
	}
	got := sink.take()
	if len(got) != 3 {
		t.Fatalf("%d emits", len(got))
	}
	e := got[0].rec
	if got[0].output != 0 || string(e.Key) != "k" || string(e.Value) != "v" || e.Offset != -1 || e.Partition != 3 ||
		e.Timestamp != in.Timestamp || len(e.Headers) != 2 || e.Headers[0].Key != "h1" || e.Headers[1].Value != nil {
		t.Errorf("emitted %+v", e)
	}
	// Null key and value stay null; an empty value stays empty.
	in = &abi.Record{Value: []byte{}}
	if err := i.Process(bg, in); err != nil {
		t.Fatal(err)
	}
	if e := sink.take()[0].rec; e.Key != nil || e.Value == nil || len(e.Value) != 0 {
		t.Errorf("emitted %+v", e)
	}
}

// TestProcessAllocs: the per-record host path makes no heap allocation.
func TestProcessAllocs(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, _ := instantiate(t, compileFile(t, r, "passthrough"), Binding{Sink: &countSink{}})
	in := benchRecord()
	if err := i.Process(bg, in); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if err := i.Process(bg, in); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Process allocates %v times per record, want 0", n)
	}

	st := newMemState(1)
	si, _ := instantiate(t, compileFile(t, r, "statecounter"), Binding{Sink: &countSink{}, Stores: []string{"counts"}, State: st})
	if err := si.Process(bg, in); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if err := si.Process(bg, in); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Process with state_get/state_put allocates %v times per record, want 0", n)
	}
}

func TestTrap(t *testing.T) {
	r, logs := newRuntime(t, Options{})
	i, sink := instantiate(t, compileFile(t, r, "trap"), Binding{Name: "trapper"})
	process := func(key string) error { return i.Process(bg, rec(key, "v")) }

	if err := process("aaaa"); err != nil {
		t.Fatal(err)
	}
	if err := process("bbbb"); err != nil {
		t.Fatal(err)
	}
	if got := sink.take(); got[1].rec.Partition != 2 {
		t.Fatalf("count = %d, want 2", got[1].rec.Partition)
	}

	err := process("boom")
	var re *RecordError
	if !errors.As(err, &re) || re.Kind != Trap || !IsTrap(err) || !errors.Is(err, Trap) || KindOf(err) != Trap {
		t.Fatalf("got %v, want a Trap", err)
	}
	for _, w := range []string{`processor "trapper"`, "trap", "wasmstream_process", "unreachable"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not contain %q", err, w)
		}
	}
	if !Trap.Discards() || re.Err == nil {
		t.Errorf("Discards=%v Err=%v", Trap.Discards(), re.Err)
	}
	// The next record runs on a fresh instance: the counter starts again.
	if err := process("cccc"); err != nil {
		t.Fatal(err)
	}
	if got := sink.take(); len(got) != 1 || got[0].rec.Partition != 1 {
		t.Fatalf("after the trap: %+v, want one emit with count 1", got)
	}

	err = process("exit")
	if !IsTrap(err) || !strings.Contains(err.Error(), "plugin exited with code 3") {
		t.Fatalf("exit: %v", err)
	}
	// A Go plugin prints its panic to stderr before it dies: the error
	// quotes it, and the lines are logged with the processor name.
	err = process("pani")
	if !IsTrap(err) || !strings.Contains(err.Error(), "(stderr: panic: boom)") {
		t.Fatalf("panic: %v", err)
	}
	lines := logs.find("goroutine 1 [running]:")
	if len(lines) != 1 || lines[0].attrs["processor"] != "trapper" || lines[0].attrs["stream"] != "stderr" {
		t.Fatalf("stderr lines: %+v", lines)
	}
	if err := process("dddd"); err != nil {
		t.Fatal(err)
	}
}

// TestTimeout: a runaway loop and a loop-free runaway recursion are both
// interrupted within about the limit, and the next record runs on a fresh
// instance (restored from the snapshot of its init: init does not run
// again).
func TestTimeout(t *testing.T) {
	const limit = 100 * time.Millisecond
	r, logs := newRuntime(t, Options{RecordTimeout: limit})
	i, sink := instantiate(t, compileFile(t, r, "loop"), Binding{})
	for _, key := range []string{"spin", "fib"} {
		start := time.Now()
		err := i.Process(bg, rec(key, ""))
		took := time.Since(start)
		if !IsTimeout(err) || !errors.Is(err, Timeout) {
			t.Fatalf("%s: got %v, want a timeout", key, err)
		}
		if !strings.Contains(err.Error(), "longer than 100ms") {
			t.Errorf("%s: %v", key, err)
		}
		t.Logf("%s: interrupted after %v", key, took)
		// Both runaways would run for ever: the upper bound only has to
		// tell "interrupted" from that, loosely enough for a loaded
		// machine (the interruption's precision is a benchmark's matter).
		if took < limit || took > limit+2*time.Second {
			t.Errorf("%s: interrupted after %v, want within [%v, %v]", key, took, limit, limit+2*time.Second)
		}
		if err := i.Process(bg, rec("ok", "v")); err != nil {
			t.Fatalf("after %s: %v", key, err)
		}
		if got := sink.take(); len(got) != 1 {
			t.Fatalf("after %s: %d emits", key, len(got))
		}
	}
	if n := len(logs.find("init")); n != 1 {
		t.Errorf("init ran %d times, want 1 (the replacements are restored from its snapshot)", n)
	}
}

// TestGCWhileGuestSpins: a guest spinning in native code still lets the Go
// runtime stop the world (it passes through Go every checkPeriod checks);
// without that, a GC would wait for the guest and the watchdog with it.
func TestGCWhileGuestSpins(t *testing.T) {
	// The record runs 5 s; a GC blocked until the guest stops would take
	// that long, one that gets through takes far less even on a loaded
	// machine.
	r, _ := newRuntime(t, Options{RecordTimeout: 5 * time.Second})
	i, _ := instantiate(t, compileFile(t, r, "loop"), Binding{})
	done := make(chan error)
	go func() { done <- i.Process(bg, rec("spin", "")) }()
	time.Sleep(20 * time.Millisecond)
	for _, key := range []string{"spin", "fib"} {
		if key == "fib" {
			go func() { done <- i.Process(bg, rec("fib", "")) }()
			time.Sleep(20 * time.Millisecond)
		}
		start := time.Now()
		runtime.GC()
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: runtime.GC took %v while the guest ran", key, took)
		}
		if err := <-done; !IsTimeout(err) {
			t.Fatalf("%s: %v", key, err)
		}
	}
}

// TestInterruptFlagReset: a record that finishes just as the watchdog
// fires is not failed, and the instance stays usable.
func TestInterruptFlagReset(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, sink := instantiate(t, compileFile(t, r, "passthrough"), Binding{})
	if err := i.Process(bg, rec("a", "b")); err != nil {
		t.Fatal(err)
	}
	// Simulate the race: the watchdog fired, the call still completed.
	i.cur.flag.Set(1)
	if !i.clearInterrupt() || i.cur.flag.Get() != 0 {
		t.Fatal("flag not cleared")
	}
	if err := i.Process(bg, rec("a", "b")); err != nil {
		t.Fatal(err)
	}
	// And with the flag left set, the guest is interrupted at its next check.
	i.cur.interrupt()
	if err := i.Process(bg, rec("a", "b")); !IsTrap(err) {
		t.Fatalf("with the flag set: %v", err)
	}
	if len(sink.take()) != 2 {
		t.Fatal("emits")
	}
}

func TestMemoryLimit(t *testing.T) {
	r, _ := newRuntime(t, Options{MemoryLimit: 1<<20 + 1000}) // rounds down to 16 pages
	if r.MemoryLimit() != 1<<20 {
		t.Fatalf("limit %d", r.MemoryLimit())
	}
	i, _ := instantiate(t, compileFile(t, r, "membomb"), Binding{})
	err := i.Process(bg, rec("bomb", ""))
	if !IsMemoryLimit(err) || !errors.Is(err, MemoryLimit) {
		t.Fatalf("got %v, want MemoryLimit", err)
	}
	if !strings.Contains(err.Error(), "memory.grow refused at 1024 KiB (limit 1024 KiB)") {
		t.Errorf("%v", err)
	}
	// A plugin that handles the refused grow is fine...
	if err := i.Process(bg, rec("soft", "")); err != nil {
		t.Fatalf("soft: %v", err)
	}
	if got := i.cur.mem.Size(); got != 1<<20 {
		t.Errorf("memory is %d bytes, limit 1 MiB", got)
	}
	// ...and the flag does not leak into the next failure's classification.
	if err := i.Process(bg, rec("bomb", "")); !IsMemoryLimit(err) {
		t.Fatalf("got %v", err)
	}
}

func TestBadPointer(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, sink := instantiate(t, compileFile(t, r, "badptr"), Binding{Config: []byte(`{"a":1}`)})
	for _, c := range []struct{ key, want string }{
		{"emit", "emit: EFAULT: [4294963200, 4294963300) is outside plugin memory of 131072 bytes"},
		{"long", "emit: EFAULT: [1024, 132095) is outside plugin memory"},
		{"logp", "log: EFAULT: [131072, 131073)"},
		{"cfgp", "config: EFAULT: [131056, 131156)"},
	} {
		// The plugin ignores the error and returns OK: the record fails
		// all the same, and the instance is replaced.
		err := i.Process(bg, rec(c.key, ""))
		if !IsABIMisuse(err) || !errors.Is(err, ABIMisuse) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want ABI misuse %q", c.key, err, c.want)
		}
		if i.cur != nil {
			t.Fatalf("%s: the instance was kept", c.key)
		}
		got := sink.take()
		if len(got) != 1 || got[0].rec.Partition != abi.ErrnoFault.Result() {
			t.Fatalf("%s: the plugin saw %+v, want %d", c.key, got, abi.ErrnoFault.Result())
		}
		if err := i.Process(bg, rec("next", "")); err != nil {
			t.Fatal(err)
		}
		if got := sink.take(); len(got) != 1 || got[0].rec.Partition != 0 {
			t.Fatalf("%s: next record: %+v", c.key, got)
		}
	}
}

func TestUndeclaredOutput(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, sink := instantiate(t, compileFile(t, r, "undeclared"), Binding{Outputs: []string{"a", "b"}})
	err := i.Process(bg, rec("k", "v"))
	if !IsABIMisuse(err) || !strings.Contains(err.Error(), "ENOOUTPUT: output index 7, but the processor declares 2 output(s)") {
		t.Fatalf("got %v", err)
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("the sink got %d records", len(got))
	}
}

// A start that fails after asking for names the processor does not
// declare carries them, at most 16, so that the host can say which config
// field to add them to.
func TestStartNamesUndeclared(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "undeclaredinit")
	_, err := m.Instantiate(bg, Binding{Name: "proc", Outputs: []string{"b"}, Sink: &sinkCapture{}})
	var me *ModuleError
	if !errors.As(err, &me) || me.Kind != InitFailed || !strings.Contains(me.Msg, "undeclared") {
		t.Fatalf("start: %v", err)
	}
	want := []Undeclared{{"output", "alerts"}, {"store", "cards"}, {"output", "a"}}
	if len(me.Undeclared) != maxUndeclared || !slices.Equal(me.Undeclared[:3], want) {
		t.Fatalf("undeclared %v, want %d starting with %v", me.Undeclared, maxUndeclared, want)
	}
	for _, u := range me.Undeclared {
		if u.Name == "b" {
			t.Fatalf("the declared output b is listed: %v", me.Undeclared)
		}
	}
}

// A WASI command module (a Go plugin built without -buildmode=c-shared)
// traps in its first export; the error says how to build it instead.
func TestCommandModuleSaysHowToBuild(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	_, err := compileFile(t, r, "command").Instantiate(bg, Binding{Name: "proc"})
	if err == nil || !errors.Is(err, InitTrapped) || !strings.Contains(err.Error(), "-buildmode=c-shared") ||
		!strings.Contains(err.Error(), "exports _start, not _initialize") {
		t.Fatalf("start: %v", err)
	}
	// A reactor whose init traps gets no such advice.
	_, err = compileFile(t, r, "cfginit").Instantiate(bg, Binding{Name: "proc", Config: []byte("f")})
	if err != nil && strings.Contains(err.Error(), "c-shared") {
		t.Fatalf("a reactor: %v", err)
	}
}

func TestInitFailures(t *testing.T) {
	r, _ := newRuntime(t, Options{InitTimeout: 100 * time.Millisecond})
	cases := []struct {
		file string
		kind ModuleErrorKind
		want string
	}{
		{"initfail", InitFailed, `wasmstream_init returned StatusFailed: bad config: missing field "threshold"`},
		{"inittrap", InitTrapped, "_initialize: trap: wasm error: unreachable"},
		{"startloop", InitTrapped, "start function: timeout: interrupted after running longer than 100ms"},
	}
	cases = append(cases, struct {
		file string
		kind ModuleErrorKind
		want string
	}{"cfginit", InitFailed, "wasmstream_init: ABI misuse: config: EFAULT: [4294967280, 4294967380)"})
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			m := compileFile(t, r, c.file)
			sink := &sinkCapture{}
			start := time.Now()
			i, err := m.Instantiate(bg, Binding{Name: "p", Outputs: []string{"o"}, Sink: sink, Config: []byte("f")})
			if i != nil {
				t.Fatal("instantiated")
			}
			if ModuleErrorKindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %v containing %q", err, c.kind, c.want)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if len(sink.take()) != 0 {
				t.Error("emit during init reached the sink")
			}
		})
	}
	// The init of a re-instantiation failing makes the record InstanceLost,
	// and the next record tries again (cfginit is not snapshotted: its
	// replacements run init again).
	m := compileFile(t, r, "cfginit")
	i, _ := instantiate(t, m, Binding{Config: []byte("ok")})
	if err := i.Process(bg, rec("k", "")); !IsTrap(err) {
		t.Fatal(err)
	}
	i.b.Config = []byte("x") // the next init fails
	err := i.Process(bg, rec("k", ""))
	if !IsInstanceLost(err) || ModuleErrorKindOf(err) != InitFailed ||
		!strings.Contains(err.Error(), "re-instantiation failed") || !strings.Contains(err.Error(), "config says fail") {
		t.Fatalf("got %v", err)
	}
	i.b.Config = []byte("ok")
	if err := i.Process(bg, rec("k", "")); !IsTrap(err) {
		t.Fatalf("got %v, want the plugin's trap again", err)
	}
}

func TestSandbox(t *testing.T) {
	r, logs := newRuntime(t, Options{})
	m := compileFile(t, r, "sandbox")
	var first []byte
	for n := range 2 { // two instances see the same clock and random bytes
		i, sink := instantiate(t, m, Binding{Name: fmt.Sprint("sb", n)})
		if err := i.Process(bg, rec("k", "")); err != nil {
			t.Fatal(err)
		}
		got := sink.take()
		if len(got) != 1 || len(got[0].rec.Value) != 84 {
			t.Fatalf("emits: %+v", got)
		}
		v := got[0].rec.Value
		u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(v[off:]) }
		u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(v[off:]) }
		const ebadf = 8
		if u32(0) != 0 || u32(4) != 0 || u32(8) != 0 || u32(12) != 0 {
			t.Errorf("args/env visible: %d %d %d %d", u32(0), u32(4), u32(8), u32(12))
		}
		if u32(16) != ebadf || u32(20) != ebadf {
			t.Errorf("filesystem visible: path_open errno %d, fd_prestat_get errno %d", u32(16), u32(20))
		}
		epoch := uint64(FakeEpoch.UnixNano())
		if u64(24) != epoch || u64(32) != epoch+uint64(time.Millisecond) {
			t.Errorf("realtime %d, %d; want %d and +1ms", u64(24), u64(32), epoch)
		}
		if u64(40) != 0 || u64(48) != uint64(time.Millisecond) {
			t.Errorf("monotonic %d, %d; want 0, 1ms", u64(40), u64(48))
		}
		want := make([]byte, 16)
		_, _ = rand.NewChaCha8(SandboxSeed).Read(want)
		if !bytes.Equal(v[56:72], want) {
			t.Errorf("random %x, want %x", v[56:72], want)
		}
		if u32(72) != 0 || u32(76) != 0 || u32(80) != 0 {
			t.Errorf("stdin read errno %d n %d, stdout write errno %d", u32(72), u32(76), u32(80))
		}
		if n == 0 {
			first = v
		} else if !bytes.Equal(first, v) {
			t.Errorf("second instance saw %x, first %x", v, first)
		}
	}
	lines := logs.find("hello from the sandbox")
	if len(lines) != 2 || lines[0].attrs["processor"] != "sb0" || lines[1].attrs["processor"] != "sb1" ||
		lines[0].attrs["stream"] != "stdout" || lines[0].level != slog.LevelInfo {
		t.Errorf("stdout lines: %+v", lines)
	}
}

func TestStateImports(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	st := newMemState(1)
	i, sink := instantiate(t, compileFile(t, r, "stateops"), Binding{Stores: []string{"s"}, State: st})
	op := func(key, value string) []abi.Record {
		t.Helper()
		if err := i.Process(bg, rec(key, value)); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		var out []abi.Record
		for _, e := range sink.take() {
			out = append(out, e.rec)
		}
		return out
	}
	one := func(key, value string, code int32, want string) {
		t.Helper()
		got := op(key, value)
		if len(got) != 1 || got[0].Partition != code || string(got[0].Value) != want {
			t.Fatalf("%s(%q): got %+v, want code %d value %q", key, value, got, code, want)
		}
	}
	one("get_", "", abi.ErrnoNotFound.Result(), "")
	one("put_", "hi", 0, "")
	one("get_", "", 2, "hi")
	one("put_", "hello world", 0, "")
	one("get_", "", 11, "hello world") // did not fit 4 bytes: retried with 11
	one("miss", "", abi.ErrnoNotFound.Result(), "")
	one("big_", "", abi.ErrnoTooLarge.Result(), "")
	one("bigk", "", abi.ErrnoTooLarge.Result(), "")
	if string(st.stores[0]["k1"]) != "hello world" {
		t.Fatalf("store: %q", st.stores[0]["k1"])
	}
	one("del_", "", 0, "")
	one("get_", "", abi.ErrnoNotFound.Result(), "")

	for k, v := range map[string]string{"a1": "x", "a2": strings.Repeat("y", 20), "b1": "z", "0": "before start"} {
		_ = st.Put(0, []byte(k), []byte(v))
	}
	var entries []string
	for _, e := range op("scan", "") {
		k, v, err := abi.DecodeScanEntry(e.Value)
		if err != nil || int(e.Partition) != len(e.Value) {
			t.Fatalf("entry %+v: %v", e, err)
		}
		entries = append(entries, string(k)+"="+string(v))
	}
	if got := strings.Join(entries, " "); got != "a1=x a2="+strings.Repeat("y", 20)+" b1=z" {
		t.Errorf("scan: %s", got)
	}
	if st.openIters != 0 {
		t.Errorf("%d iterators open", st.openIters)
	}
	one("leak", "", abi.ErrnoLimit.Result(), "")
	if st.openIters != 0 || st.closed < 17 {
		t.Errorf("after leak: %d iterators open, %d closed", st.openIters, st.closed)
	}

	// An undeclared store and an unknown cursor are errors the plugin gets
	// (and may handle); they do not fail the record.
	one("sto9", "", abi.ErrnoNoStore.Result(), "")
	one("curs", "", abi.ErrnoNoCursor.Result(), "")

	// Without a State the state imports return ENOSTORE.
	j, jsink := instantiate(t, compileFile(t, r, "stateops"), Binding{})
	if err := j.Process(bg, rec("get_", "")); err != nil {
		t.Fatal(err)
	}
	if got := jsink.take(); len(got) != 1 || got[0].rec.Partition != abi.ErrnoNoStore.Result() {
		t.Fatalf("no state: %+v", got)
	}
}

func TestHostFailures(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "passthrough")
	fail := true
	i, _ := instantiate(t, m, Binding{Sink: sinkFunc(func(int, *abi.Record) error {
		if fail {
			panic("sink bug")
		}
		return nil
	})})
	err := i.Process(bg, rec("k", "v"))
	if !IsHostFailed(err) || !errors.Is(err, HostFailed) || !strings.Contains(err.Error(), "sink: panic: sink bug") {
		t.Fatalf("got %v", err)
	}
	fail = false
	if err := i.Process(bg, rec("k", "v")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("broker gone")
	j, _ := instantiate(t, m, Binding{Sink: sinkFunc(func(int, *abi.Record) error { return boom })})
	if err := j.Process(bg, rec("k", "v")); !errors.Is(err, boom) || KindOf(err) != HostFailed {
		t.Fatalf("got %v", err)
	}
	if _, err := m.Instantiate(bg, Binding{Outputs: []string{"o"}}); err == nil {
		t.Error("outputs without a sink accepted")
	}
	if _, err := m.Instantiate(bg, Binding{Stores: []string{"s"}}); err == nil {
		t.Error("stores without a state accepted")
	}
}

func TestInputBuffer(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	// passthrough has a fixed 64 KiB buffer: a larger record is refused by
	// the plugin (PluginFailed), and smaller ones still work afterwards.
	i, sink := instantiate(t, compileFile(t, r, "passthrough"), Binding{})
	err := i.Process(bg, rec("k", strings.Repeat("x", 70000)))
	if !IsPluginFailed(err) || !strings.Contains(err.Error(), "no input buffer for a record of 70037 bytes") {
		t.Fatalf("got %v", err)
	}
	if err := i.Process(bg, rec("k", "v")); err != nil {
		t.Fatal(err)
	}
	// The host asks for 4096 bytes at start; for a larger record it asks for
	// the next power of two, then (stateops holds at most 30000) the exact
	// size, and keeps that buffer for the records that fit.
	st := newMemState(1)
	j, _ := instantiate(t, compileFile(t, r, "stateops"), Binding{Stores: []string{"s"}, State: st})
	if j.cur.inCap != 4096 {
		t.Fatalf("inCap %d, want 4096", j.cur.inCap)
	}
	value := strings.Repeat("v", 20000-36-4)
	if err := j.Process(bg, rec("put_", value)); err != nil {
		t.Fatal(err)
	}
	if j.cur.inCap != 20000 || string(st.stores[0]["k1"]) != value {
		t.Fatalf("inCap %d, want 20000", j.cur.inCap)
	}
	_ = sink.take()
}

func TestLogImport(t *testing.T) {
	r, logs := newRuntime(t, Options{})
	_, _ = instantiate(t, compileFile(t, r, "loop"), Binding{Name: "looper"})
	lines := logs.find("init")
	if len(lines) != 1 || lines[0].level != slog.LevelInfo || lines[0].attrs["processor"] != "looper" {
		t.Fatalf("%+v", lines)
	}
}

func TestManyInstances(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "trap")
	const instances, records = 32, 200
	var wg sync.WaitGroup
	errs := make(chan error, instances)
	for n := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sink := &sinkCapture{}
			i, err := m.Instantiate(bg, Binding{Name: fmt.Sprint("p", n), Outputs: []string{"o"}, Sink: sink})
			if err != nil {
				errs <- err
				return
			}
			defer i.Close(bg)
			for k := range records {
				key := "aaaa"
				if k == records/2 {
					key = "boom"
				}
				err := i.Process(bg, rec(key, fmt.Sprint(n, "/", k)))
				if (key == "boom") != IsTrap(err) {
					errs <- fmt.Errorf("instance %d record %d: %v", n, k, err)
					return
				}
			}
			got := sink.take()
			if len(got) != records-1 || string(got[records-2].rec.Value) != fmt.Sprint(n, "/", records-1) {
				errs <- fmt.Errorf("instance %d: %d emits", n, len(got))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClose(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "passthrough")
	i, _ := instantiate(t, m, Binding{})
	if err := i.Process(bg, rec("k", "v")); err != nil {
		t.Fatal(err)
	}
	if err := i.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := i.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := i.Process(bg, rec("k", "v")); !IsInstanceLost(err) || !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// A closed module keeps its live instances and refuses new ones.
	j, _ := instantiate(t, m, Binding{})
	if err := m.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Instantiate(bg, Binding{Outputs: []string{"o"}, Sink: &countSink{}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Instantiate on a closed module: %v", err)
	}
	if err := j.Process(bg, rec("k", "v")); err != nil {
		t.Fatal(err)
	}
	// A canceled context is refused before the call.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := j.Process(ctx, rec("k", "v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

// TestRuntimeCloseInterrupts: closing the Runtime interrupts a running call
// long before its RecordTimeout and leaves the instance InstanceLost.
func TestRuntimeCloseInterrupts(t *testing.T) {
	logs := &logCapture{}
	r, err := NewRuntime(bg, Options{RecordTimeout: time.Minute, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	i, _ := instantiate(t, compileFile(t, r, "loop"), Binding{})
	done := make(chan error)
	go func() { done <- i.Process(bg, rec("spin", "")) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := r.Close(bg); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !IsInstanceLost(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
	if err := i.Process(bg, rec("k", "")); !IsInstanceLost(err) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := r.Compile(bg, "x", wasmFile(t, "passthrough")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compile after close: %v", err)
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		r, _ := newRuntime(t, Options{CacheDir: dir})
		i, _ := instantiate(t, compileFile(t, r, "passthrough"), Binding{})
		if err := i.Process(bg, rec("k", "v")); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("cache dir: %v %v", entries, err)
	}
}

func TestErrorStrings(t *testing.T) {
	e := &RecordError{Processor: "p", Kind: Timeout, Msg: "took too long"}
	if e.Error() != `processor "p": timeout: took too long` {
		t.Error(e.Error())
	}
	wrapped := fmt.Errorf("task 3: %w", e)
	if !IsTimeout(wrapped) || !errors.Is(wrapped, Timeout) || errors.Is(wrapped, Trap) {
		t.Error("classification through wrapping")
	}
	me := &ModuleError{Module: "m", Kind: MissingExport, Msg: "x"}
	if me.Error() != `module "m": missing export: x` || !errors.Is(fmt.Errorf("w: %w", me), MissingExport) {
		t.Error(me.Error())
	}
	for k := Trap; k <= InstanceLost; k++ {
		if strings.Contains(k.String(), "unknown") {
			t.Errorf("kind %d has no name", k)
		}
	}
	for k := NotWasm; k <= InitFailed; k++ {
		if strings.Contains(k.String(), "unknown") {
			t.Errorf("module kind %d has no name", k)
		}
	}
}

// overBudget is a State whose every Put is past the task's disk budget.
type overBudget struct{ *memState }

func (overBudget) Put(int, []byte, []byte) error {
	return fmt.Errorf("task p/in/0 store \"s\": %w", ErrStateLimit)
}

// A state_put past the task's disk budget (limits.state_disk): the plugin
// gets ELIMIT and decides, like at the timer limit; the record does not
// fail for it and nothing is written.
func TestStatePutOverDiskBudget(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	st := overBudget{newMemState(1)}
	i, sink := instantiate(t, compileFile(t, r, "stateops"), Binding{Stores: []string{"s"}, State: st})
	if err := i.Process(bg, rec("put_", "hi")); err != nil {
		t.Fatalf("the record failed: %v", err)
	}
	got := sink.take()
	if len(got) != 1 || got[0].rec.Partition != abi.ErrnoLimit.Result() {
		t.Fatalf("state_put over the disk budget reported %+v, want ELIMIT (%d)", got, abi.ErrnoLimit.Result())
	}
	if len(st.stores[0]) != 0 {
		t.Fatalf("the store holds %v", st.stores[0])
	}
}

// tooLargeState is a State whose every Put is more than its store's
// changelog takes in one record.
type tooLargeState struct{ *memState }

func (tooLargeState) Put(int, []byte, []byte) error {
	return fmt.Errorf("store \"s\": an entry of 2000 bytes: %w", ErrStateTooLarge)
}

// A state_put its store's changelog would refuse: the plugin gets
// ETOOLARGE and the record fails (LimitExceeded, naming the store's
// reason), whatever the plugin does next, as for an emit its output would
// refuse; nothing is written and the instance is kept. Likewise a
// timer_set whose timer the time store's changelog would refuse.
func TestStateWriteTooLargeForChangelog(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	st := tooLargeState{newMemState(1)}
	i, sink := instantiate(t, compileFile(t, r, "stateops"), Binding{Stores: []string{"s"}, State: st})
	err := i.Process(bg, rec("put_", "hi"))
	var re *RecordError
	if !errors.As(err, &re) || re.Kind != LimitExceeded || re.Errno != abi.ErrnoTooLarge || !strings.Contains(err.Error(), "an entry of 2000 bytes") {
		t.Fatalf("the record: %v, want LimitExceeded with ETOOLARGE and the store's reason", err)
	}
	if got := sink.take(); len(got) != 1 || got[0].rec.Partition != abi.ErrnoTooLarge.Result() {
		t.Fatalf("state_put reported %+v, want ETOOLARGE (%d)", got, abi.ErrnoTooLarge.Result())
	}
	if len(st.stores[0]) != 0 {
		t.Fatalf("the store holds %v", st.stores[0])
	}
	if err := i.Process(bg, rec("miss", "")); err != nil {
		t.Fatalf("the next record, on the same instance: %v", err)
	}

	ft := newFakeTime(0, 0)
	ft.failSet = fmt.Errorf("time store: %w", ErrStateTooLarge)
	ti, _ := timersInstance(t, Options{}, ft)
	err = runRecord(ti, 1, cmd{op: opSet, ts: 1, key: []byte("k")})
	if !errors.As(err, &re) || re.Kind != LimitExceeded || re.Errno != abi.ErrnoTooLarge || !strings.Contains(err.Error(), "timer_set") {
		t.Fatalf("timer_set: %v, want LimitExceeded with ETOOLARGE naming timer_set", err)
	}
}

// overHeld is a State whose every Put and Delete the host refuses for
// what it already holds for the task (its account's cap, or the process's
// budget): abi.ErrnoLimit in the error's chain.
type overHeld struct{ *memState }

func (overHeld) Put(int, []byte, []byte) error {
	return fmt.Errorf("task p/in/0: the host holds 134217728 bytes for this task's commit window: %w", abi.ErrnoLimit)
}

func (overHeld) Delete(int, []byte) error {
	return fmt.Errorf("task p/in/0: over the cap: %w", abi.ErrnoLimit)
}

// A state write the host cannot hold (abi/ABI.md section 7, "Per task: what
// the host holds"): the plugin gets ELIMIT and the record fails (limit
// exceeded), unlike the disk budget, which only returns ELIMIT.
func TestStateWritePastTheHeldCapFailsTheRecord(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	st := overHeld{newMemState(1)}
	i, _ := instantiate(t, compileFile(t, r, "stateops"), Binding{Stores: []string{"s"}, State: st})
	for _, key := range []string{"put_", "del_"} {
		err := i.Process(bg, rec(key, "hi"))
		var re *RecordError
		if !IsLimitExceeded(err) || !errors.As(err, &re) || re.Errno != abi.ErrnoLimit || !strings.Contains(err.Error(), "commit window") && key == "put_" {
			t.Fatalf("%s past the held cap: %v, want a limit exceeded failure with ELIMIT", key, err)
		}
	}
	if len(st.stores[0]) != 0 {
		t.Fatalf("the store holds %v", st.stores[0])
	}
}
