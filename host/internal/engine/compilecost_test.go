package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmgen"
)

// The compile budget's tests measure compilations in a child process (the
// test binary started again, testutil.Child) under an address-space cap, so
// a module the estimate gets wrong cannot take the machine's memory.

func TestMain(m *testing.M) {
	testutil.RunChild(map[string]func() int{"compile": compileChild})
	os.Exit(m.Run())
}

// childCap is the address-space cap of a measuring child: the done-when of
// the compile budget (a 3 GB cap) with room for Go's own reservations,
// which alone take about 1.6 GB of address space in this test binary.
const childCap = 3 << 30

// compileSpec is what a measuring child does, passed in its environment.
type compileSpec struct {
	File string
	// Mode is "compile" (Runtime.Compile), "inspect" (Inspect) or
	// "instantiate" (Runtime.Compile unmeasured, then Instances
	// instantiations measured).
	Mode      string
	Limits    ModuleLimits
	Instances int
}

// compileMeasure is what the child measured. Growth is the rise of the
// child's resident memory from just before the operation to its peak
// during it (VmHWM, reset first), per instance for "instantiate".
type compileMeasure struct {
	Err        string
	Kind       string
	Growth     int64
	Alloc      uint64 // bytes allocated on the Go heap during the operation
	Wall       time.Duration
	CPU        time.Duration
	Estimate   int64 // cost.mem, or cost.inst for "instantiate"
	EstimateNs int64 // cost.ns
}

const compileSpecEnv = "WASMSTREAM_COMPILE_SPEC"

// measure runs spec's operation on wasm in a child under childCap and
// returns what it measured; it fails t if the child fails (an
// out-of-memory crash under the cap included).
func measure(t testing.TB, wasm []byte, spec compileSpec) compileMeasure {
	t.Helper()
	spec.File = filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(spec.File, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	res := testutil.Child(t, "compile", childCap, 2*time.Minute, compileSpecEnv+"="+string(b))
	var m compileMeasure
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &m) != nil {
		t.Fatalf("%s child: %v; stdout %q", spec.Mode, res, res.Stdout)
	}
	return m
}

// compileChild is the measuring child's main.
func compileChild() int {
	var spec compileSpec
	if err := json.Unmarshal([]byte(os.Getenv(compileSpecEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	wasm, err := os.ReadFile(spec.File)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	var out compileMeasure
	var r *Runtime
	if spec.Mode != "inspect" {
		if r, err = NewRuntime(ctx, Options{Module: spec.Limits, CompileTimeout: time.Hour}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	var mod *Module
	if spec.Mode == "instantiate" {
		if mod, err = r.Compile(ctx, "m", wasm); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	ins, err := instrumentWith(wasm, spec.Limits.withDefaults())
	if err == nil {
		if t, err := countTotals(ins.wasm, len(wasm)); err == nil {
			c := estimate(t)
			out.Estimate, out.EstimateNs = c.mem, c.ns
			if spec.Mode == "instantiate" {
				out.Estimate = c.inst
			}
		}
	}
	ins = nil

	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0, rss0, cpu0, start := ms.TotalAlloc, procStatus("VmRSS"), cpuTime(), time.Now()
	var keep []any
	switch spec.Mode {
	case "compile":
		var m *Module
		m, err = r.Compile(ctx, "m", wasm)
		keep = append(keep, m)
	case "inspect":
		var info Info
		info, err = Inspect(ctx, wasm)
		keep = append(keep, info)
	case "instantiate":
		for range spec.Instances {
			var i *Instance
			if i, err = mod.Instantiate(ctx, Binding{Name: "m", Sink: &countSink{}}); err != nil {
				break
			}
			keep = append(keep, i)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", spec.Mode)
		return 2
	}
	out.Wall, out.CPU = time.Since(start), cpuTime()-cpu0
	out.Growth = procStatus("VmHWM") - rss0
	runtime.ReadMemStats(&ms)
	out.Alloc = ms.TotalAlloc - alloc0
	if spec.Mode == "instantiate" {
		out.Growth /= int64(max(spec.Instances, 1))
		out.Alloc /= uint64(max(spec.Instances, 1))
	}
	runtime.KeepAlive(keep)
	if err != nil {
		out.Err = err.Error()
		out.Kind = ModuleErrorKindOf(err).String()
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

// procStatus reads a field of /proc/self/status in bytes.
func procStatus(key string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return -1
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// estimateShapes each weigh on one dimension of the estimate, or on a
// product of two, at a size where what they cost is well above the
// measurement's noise (tens to hundreds of MiB, up to seconds).
var estimateShapes = []wasmgen.Shape{
	{Funcs: 1000, Locals: 2000},
	{Funcs: 20000},
	{Funcs: 1, Ops: 30000, OpKind: wasmgen.OpStore},
	{Funcs: 1, Ops: 100000, OpKind: wasmgen.OpCall},
	{Funcs: 1, Ops: 300000, OpKind: wasmgen.OpEqz},
	{Funcs: 100, Ops: 2000, OpKind: wasmgen.OpStore},
	{Funcs: 100, Ops: 10000, OpKind: wasmgen.OpEqz},
	{Funcs: 1, Ops: 3000, OpKind: wasmgen.OpFill},
	{Funcs: 1, Ops: 3000, OpKind: wasmgen.OpLoop},
	{Funcs: 1, Ops: 6000, OpKind: wasmgen.OpIf},
	{Funcs: 1, Ops: 6000, OpKind: wasmgen.OpBrIf},
	{Funcs: 1, Ops: 1500, OpKind: wasmgen.OpIf, Locals: 1000, Live: true},
	{Funcs: 20, Nesting: 2000},
	{Funcs: 50, Loops: 500},
	{Funcs: 1, Nesting: 100, BrTable: 100000},
	{Funcs: 100, Nesting: 100, BrTable: 2000},
	{Types: 100000},
	{Types: 2000, TypeParams: 1000},
	{DataSegments: 300000, DataBytes: 1},
	{Funcs: 1, ElemSegments: 1, ElemEntries: 200000},
	{Funcs: 1, ElemSegments: 50000, ElemEntries: 1},
	{Funcs: 1, Exports: 200000},
	{Imports: 50000},
	{Globals: 99000},
	{Funcs: 500, Locals: 500, Names: 500},
}

// TestCompileEstimate checks the estimate against what compiling,
// inspecting and instantiating modules measurably cost, each in a child
// under a 3 GB address-space cap: the process's resident memory must grow
// by less than the estimate, for modules that weigh on each dimension of
// the estimate, for the test modules and for a Go SDK plugin. Run with -v
// it prints, for each, the estimate, the growth and the CPU time against
// the estimate's (not asserted: a shared machine's timing is noise; the
// fuzz target checks time against a loose bound).
func TestCompileEstimate(t *testing.T) {
	lim := ModuleLimits{CompileMemory: 1 << 40, CompileTime: time.Hour, InstanceMemory: 1 << 40}
	type module struct {
		name        string
		wasm        []byte
		instantiate bool // instantiable without a binding's imports
	}
	var modules []module
	for _, name := range []string{"passthrough", "stateops", "opcodes", "hostile", "bulkline"} {
		modules = append(modules, module{name, wasmFile(t, name), false})
	}
	modules = append(modules, module{"Go SDK passthrough", goSDKWasm(t), false})
	for _, s := range estimateShapes {
		s.Plugin = true
		modules = append(modules, module{s.String(), wasmgen.Module(s), true})
	}
	for _, mod := range modules {
		ins, err := instrumentWith(mod.wasm, lim.withDefaults())
		if err != nil {
			t.Fatalf("%s: %v", mod.name, err)
		}
		tot, err := countTotals(ins.wasm, len(mod.wasm))
		if err != nil {
			t.Fatalf("%s: %v", mod.name, err)
		}
		c := estimate(tot)
		t.Logf("%s: %d bytes; estimate %s (%s), %s (%s); per instance %s (%s)", mod.name, len(mod.wasm),
			formatBytes(c.mem), describeTerms(c.memTerms, formatBytes), formatNanos(c.ns), describeTerms(c.nsTerms, formatNanos),
			formatBytes(c.inst), describeTerms(c.instTerms, formatBytes))
		modes := []string{"compile", "inspect"}
		if mod.instantiate {
			modes = append(modes, "instantiate")
		}
		for _, mode := range modes {
			m := measure(t, mod.wasm, compileSpec{Mode: mode, Limits: lim, Instances: 8})
			t.Logf("    %-11s grew %9s of %9s (%.2f), cpu %6v of %6v (%.2f) %s", mode, formatBytes(m.Growth), formatBytes(m.Estimate),
				float64(m.Growth)/float64(max(m.Estimate, 1)), m.CPU.Round(time.Millisecond), formatNanos(m.EstimateNs),
				float64(m.CPU)/float64(max(m.EstimateNs, 1)), m.Err)
			if m.Err != "" && mode != "inspect" {
				t.Errorf("%s: %s: %s", mod.name, mode, m.Err)
			}
			if m.Growth > m.Estimate {
				t.Errorf("%s: %s grew the process by %s, over the estimate of %s", mod.name, mode, formatBytes(m.Growth), formatBytes(m.Estimate))
			}
		}
	}
}
