package engine

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
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
// the compile budget (a 3 GB cap), which leaves room for what Go and
// wazero reserve besides what they use.
const childCap = 3 << 30

// compileSpec is what a measuring child does, passed in its environment:
// for each of Modes in order, Runtime.Compile ("compile") or Inspect
// ("inspect") of File, measured; after a compile, Instances
// instantiations, measured together.
type compileSpec struct {
	File      string
	Modes     []string
	Limits    ModuleLimits
	Instances int
}

// costPhase is what the child measured of one operation. Growth is the
// rise of the child's resident memory from just before the operation to
// its peak during it (VmHWM, reset first).
type costPhase struct {
	Growth int64
	Alloc  uint64 // bytes allocated on the Go heap during the operation
	Wall   time.Duration
	CPU    time.Duration
}

// compileMeasure is what a measuring child reports of one mode: the
// estimate, the compilation (or inspection) and the instantiations (per
// instance).
type compileMeasure struct {
	Mode                 string
	Err                  string
	Kind                 string
	Estimate, EstimateNs int64 // cost.mem, cost.ns
	InstEstimate         int64 // cost.inst
	Compile, Instance    costPhase
	Instances            int // instantiated
}

const compileSpecEnv = "WASMSTREAM_COMPILE_SPEC"

// measure runs spec's operations on wasm in a child under childCap and
// returns what it measured, one per mode; it fails t if the child fails
// (an out-of-memory crash under the cap included).
func measure(t testing.TB, wasm []byte, spec compileSpec) []compileMeasure {
	t.Helper()
	spec.File = filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(spec.File, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	res := testutil.Child(t, "compile", childCap, 2*time.Minute, compileSpecEnv+"="+string(b))
	var ms []compileMeasure
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &ms) != nil || len(ms) != len(spec.Modes) {
		t.Fatalf("%v child: %v; stdout %q", spec.Modes, res, res.Stdout)
	}
	return ms
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
	var est cost
	if t, err := countTotals(wasm); err == nil {
		est = estimate(t)
	}
	var out []compileMeasure
	var keep []any
	for _, mode := range spec.Modes {
		m := compileMeasure{Mode: mode, Estimate: est.mem, EstimateNs: est.ns, InstEstimate: est.inst}
		var r *Runtime
		if mode == "compile" {
			if r, err = NewRuntime(ctx, Options{Module: spec.Limits, CompileTimeout: time.Hour}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		var mod *Module
		var info Info
		var err error
		m.Compile = measurePhase(func() {
			switch mode {
			case "compile":
				mod, err = r.Compile(ctx, "m", wasm)
			case "inspect":
				info, err = InspectWith(ctx, wasm, spec.Limits)
			default:
				err = fmt.Errorf("unknown mode %q", mode)
			}
		})
		keep = append(keep, info)
		if err == nil && mod != nil && spec.Instances > 0 {
			// One instance first, unmeasured, so that the code that
			// instantiates is paged in (under go test -fuzz it is
			// instrumented for coverage, and its pages are many).
			var warm *Instance
			if warm, err = mod.Instantiate(ctx, Binding{Name: "m", Sink: &countSink{}}); err == nil {
				_ = warm.Close(ctx)
			}
		}
		if err == nil && mod != nil && spec.Instances > 0 {
			var insts []*Instance
			m.Instance = measurePhase(func() {
				for range spec.Instances {
					var i *Instance
					if i, err = mod.Instantiate(ctx, Binding{Name: "m", Sink: &countSink{}}); err != nil {
						return
					}
					insts = append(insts, i)
				}
			})
			m.Instances = len(insts)
			n := max(m.Instances, 1)
			m.Instance.Growth /= int64(n)
			m.Instance.Alloc /= uint64(n)
			for _, i := range insts {
				_ = i.Close(ctx)
			}
		}
		if err != nil {
			m.Err = err.Error()
			m.Kind = ModuleErrorKindOf(err).String()
		}
		if r != nil {
			_ = r.Close(ctx) // what the next mode measures starts from the same heap
		}
		out = append(out, m)
	}
	runtime.KeepAlive(keep)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

// measurePhase measures op in this process (see costPhase). The heap's free
// pages are returned to the system first, so that every page op uses
// counts, reused or not.
func measurePhase(op func()) costPhase {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0, rss0, cpu0, start := ms.TotalAlloc, procStatus("VmRSS"), cpuTime(), time.Now()
	op()
	p := costPhase{Wall: time.Since(start), CPU: cpuTime() - cpu0, Growth: procStatus("VmHWM") - rss0}
	runtime.ReadMemStats(&ms)
	p.Alloc = ms.TotalAlloc - alloc0
	return p
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

// TestCompileBombRefused: a compile bomb (99,990 functions of
// 49,990 i64 locals and an empty body, 800 KB, inside every shape limit;
// 6.1 GB and 18-26 s before the compile budget, killed by a 6 GiB cap) is
// refused by Compile and Inspect before wazero sees it, in a child under a
// 3 GB cap, with the budget, the module's figure and the fix in the error;
// and so is a module whose instrumentation alone would pass the budget.
func TestCompileBombRefused(t *testing.T) {
	bomb := wasmgen.Module(wasmgen.Shape{Funcs: 99987, Locals: 49990, Plugin: true})
	for _, m := range measure(t, bomb, compileSpec{Modes: []string{"compile", "inspect"}}) {
		t.Logf("%s: grew %s, %v: %s", m.Mode, formatBytes(m.Compile.Growth), m.Compile.Wall.Round(time.Millisecond), m.Err)
		for _, want := range []string{"over the compile budget of 512 MiB (CompileMemory)", "for 4998450122 parameters and locals in all functions",
			"or raise CompileMemory"} {
			if m.Kind != OverLimits.String() || !strings.Contains(m.Err, want) {
				t.Errorf("%s: %s: %q; want over limits saying %q", m.Mode, m.Kind, m.Err, want)
			}
		}
		if m.Compile.Growth > 64<<20 {
			t.Errorf("%s: the refusal grew the process by %s", m.Mode, formatBytes(m.Compile.Growth))
		}
	}
	// 3.9 MB of loops, which the instrumentation would inflate to 56 MB
	// (a check in each): refused before it is instrumented.
	loops := wasmgen.Module(wasmgen.Shape{Funcs: 100, Ops: 13000, OpKind: wasmgen.OpLoop, Plugin: true})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc := ms.TotalAlloc
	_, err := instrumentBudgeted(loops, ModuleLimits{}.withDefaults())
	runtime.ReadMemStats(&ms)
	var ol *errOverLimit
	if !errors.As(err, &ol) || !strings.Contains(err.Error(), "over the compile budget of") {
		t.Errorf("got %v, want the loops refused by the budget", err)
	}
	if a := ms.TotalAlloc - alloc; a > 8<<20 {
		t.Errorf("refusing the loops allocated %s: instrumented first?", formatBytes(int64(a)))
	}
}

// estimateShapes each weigh on one dimension of the estimate, or on a
// product of two, at a size where what they cost is well above the
// measurement's noise (tens to hundreds of MiB, up to seconds).
var estimateShapes = []wasmgen.Shape{
	{Funcs: 500, Locals: 2000},
	{Funcs: 20000},
	{Funcs: 1, Ops: 20000, OpKind: wasmgen.OpStore},
	{Funcs: 1, Ops: 60000, OpKind: wasmgen.OpCall},
	{Funcs: 100, Ops: 10000, OpKind: wasmgen.OpEqz},
	{Funcs: 1, Ops: 1500, OpKind: wasmgen.OpFill},
	{Funcs: 1, Ops: 1500, OpKind: wasmgen.OpLoop},
	{Funcs: 1, Ops: 4000, OpKind: wasmgen.OpBrIf},
	{Funcs: 1, Ops: 1000, OpKind: wasmgen.OpIf, Locals: 1000, Live: true},
	{Funcs: 1, Ops: 3000, OpKind: wasmgen.OpCall, Globals: 300},
	{Funcs: 10, Nesting: 2000},
	{Funcs: 20, Loops: 500},
	{Funcs: 1, Nesting: 100, BrTable: 50000},
	{Types: 50000},
	{Types: 1000, TypeParams: 1000},
	{DataSegments: 200000, DataBytes: 1},
	{Funcs: 1, ElemSegments: 1, ElemEntries: 150000},
	{Funcs: 1, ElemSegments: 30000, ElemEntries: 1},
	{Funcs: 1, Exports: 100000},
	{Imports: 30000},
	{Globals: 99000},
	{Funcs: 300, Locals: 300, Names: 300},
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
	if testutil.Race {
		t.Skip("measures the process's memory and CPU time against the estimate: the race detector's instrumentation changes both (make test runs it without -race too)")
	}
	lim := ModuleLimits{CompileMemory: 1 << 40, CompileTime: time.Hour, InstanceMemory: 1 << 40}
	type module struct {
		name        string
		wasm        []byte
		instantiate bool // instantiable without a binding's imports
	}
	var modules []module
	for _, name := range []string{"passthrough", "hostile", "bulkline"} {
		modules = append(modules, module{name, wasmFile(t, name), false})
	}
	modules = append(modules, module{"Go SDK passthrough", goSDKWasm(t), false})
	for _, s := range estimateShapes {
		s.Plugin = true
		modules = append(modules, module{s.String(), wasmgen.Module(s), true})
	}
	for _, mod := range modules {
		tot, err := countTotals(mod.wasm)
		if err != nil {
			t.Fatalf("%s: %v", mod.name, err)
		}
		c := estimate(tot)
		t.Logf("%s: %d bytes; estimate %s (%s), %s (%s); per instance %s (%s)", mod.name, len(mod.wasm),
			formatBytes(c.mem), describeTerms(c.memTerms, formatBytes), formatNanos(c.ns), describeTerms(c.nsTerms, formatNanos),
			formatBytes(c.inst), describeTerms(c.instTerms, formatBytes))
		spec := compileSpec{Modes: []string{"compile", "inspect"}, Limits: lim}
		if mod.instantiate {
			spec.Instances = 8
		}
		for _, m := range measure(t, mod.wasm, spec) {
			checkMeasure(t, mod.name, m, 0, 0)
		}
	}
}

// checkMeasure logs m and fails t if the module failed to compile (a
// valid plugin: inspect may only refuse it by its budget), if it grew the
// process by more than the estimate (each instance by more than its
// estimate and instSlack), or, with cpuBound > 0, if it took more CPU than
// that.
func checkMeasure(t testing.TB, name string, m compileMeasure, cpuBound time.Duration, instSlack int64) {
	t.Helper()
	mode := m.Mode
	t.Logf("    %-7s grew %9s of %9s (%.2f), cpu %6v of %6v (%.2f) %s", mode, formatBytes(m.Compile.Growth), formatBytes(m.Estimate),
		float64(m.Compile.Growth)/float64(max(m.Estimate, 1)), m.Compile.CPU.Round(time.Millisecond), formatNanos(m.EstimateNs),
		float64(m.Compile.CPU)/float64(max(m.EstimateNs, 1)), m.Err)
	if m.Instances > 0 {
		t.Logf("    %d instances grew %9s each of %9s (%.2f)", m.Instances, formatBytes(m.Instance.Growth), formatBytes(m.InstEstimate),
			float64(m.Instance.Growth)/float64(max(m.InstEstimate, 1)))
	}
	if m.Err != "" && !(mode == "inspect" && strings.Contains(m.Err, "budget of")) {
		t.Errorf("%s: %s: %s", name, mode, m.Err)
	}
	if m.Compile.Growth > m.Estimate {
		t.Errorf("%s: %s grew the process by %s, over the estimate of %s", name, mode, formatBytes(m.Compile.Growth), formatBytes(m.Estimate))
	}
	if m.Instance.Growth > m.InstEstimate+instSlack {
		t.Errorf("%s: each instance grew the process by %s, over the estimate of %s", name, formatBytes(m.Instance.Growth), formatBytes(m.InstEstimate))
	}
	if cpuBound > 0 && m.Compile.CPU > cpuBound {
		t.Errorf("%s: %s took %v of CPU, over %v", name, mode, m.Compile.CPU, cpuBound)
	}
}

// FuzzCompileBudget explores the product of the shape limits with modules
// that are inside every one of them (wasmgen shapes clamped to
// ModuleLimits' defaults, at most 64 MiB): functions times locals,
// branches times live locals, calls times globals, loops, bulk
// instructions, blocks, br_table targets, types times parameters, data and
// element segments, exports, imports, globals and names. Each case is refused by the compile budget
// (in-process: the refusal happens before wazero sees the module, with a
// message naming the budget), or compiled, inspected and instantiated in a
// child under a 3 GB address-space cap, where the process must grow by less
// than the estimate (so less than the budget) and compiling must use less
// than twice the time budget of CPU. Seeds: the bomb (99,990
// functions of 49,990 locals in 800 KB), the worst cases the fuzzer found,
// and testdata/fuzz/FuzzCompileBudget.
func FuzzCompileBudget(f *testing.F) {
	if testutil.Race {
		f.Skip("measures the process's memory and CPU time against the estimate: the race detector's instrumentation changes both (make test runs it without -race too)")
	}
	type seed struct {
		funcs, locals, ops uint32
		kind               wasmgen.OpKind
		nesting, loops     uint16
		brTable, types     uint32
		typeParams         uint16
		data, dataBytes    uint32
		elems, entries     uint32
		exports, imports   uint32
		globals            uint32
		names              uint16
		live               bool
	}
	for _, s := range []seed{
		{funcs: 99987, locals: 49990},                           // the 800 KB bomb
		{funcs: 10, locals: 10, ops: 100, kind: wasmgen.OpCall}, // an ordinary module
		{funcs: 1, locals: 1000, ops: 2500, kind: wasmgen.OpIf, live: true},
		{funcs: 1, ops: 3000, kind: wasmgen.OpLoop},
		{funcs: 1, ops: 5000, kind: wasmgen.OpFill},
		{funcs: 1, nesting: 100, brTable: 1 << 20},
		{funcs: 100, nesting: 4000},
		{funcs: 100, loops: 1000},
		{funcs: 1000, ops: 1000, kind: wasmgen.OpStore},
		{types: 30000, typeParams: 985},
		{funcs: 1, exports: 1 << 20},
		{funcs: 1, elems: 1, entries: 2 << 20},
		{data: 1 << 20, dataBytes: 1},
		{funcs: 1000, locals: 1000, names: 1000},
		{funcs: 50000, imports: 49000, globals: 99000},
		{funcs: 1, ops: 5000, kind: wasmgen.OpCall, globals: 1000},
		{funcs: 1, ops: 1500, kind: wasmgen.OpCall, globals: 1000},
	} {
		f.Add(s.funcs, s.locals, s.ops, uint8(s.kind), s.nesting, s.loops, s.brTable, s.types, s.typeParams,
			s.data, s.dataBytes, s.elems, s.entries, s.exports, s.imports, s.globals, s.names, s.live)
	}
	lim := ModuleLimits{}.withDefaults()
	size := lim.MaxModuleSize - 1<<20 // see legalShape
	cpuBound := 2 * lim.CompileTime
	var instSlack int64
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		// Fuzzing (not the seeds of go test): the fuzzing engine stops a
		// case after 10 s, and the child runs the test binary, whose
		// code is instrumented for coverage and several times slower,
		// so the cases are held to an eighth of the memory budgets and
		// of the module size and a sixteenth of the time budget, and
		// their CPU time is not checked; an instance may grow the child
		// by 1 MiB more than its estimate (measured: up to 460 KiB for
		// modules of 20 KiB per instance without -fuzz: the instrumented
		// code's pages and counters). The estimate must stay above the
		// memory they measure all the same; the seeds check the default
		// budget itself.
		lim.CompileMemory /= 8
		lim.InstanceMemory /= 8
		lim.CompileTime /= 16
		size /= 8
		cpuBound = 0
		instSlack = 1 << 20
	}
	f.Fuzz(func(t *testing.T, funcs, locals, ops uint32, kind uint8, nesting, loops uint16, brTable, types uint32, typeParams uint16,
		data, dataBytes, elems, entries, exports, imports, globals uint32, names uint16, live bool) {
		s := legalShape(wasmgen.Shape{
			Funcs: int(funcs), Locals: int(locals), Ops: int(ops), OpKind: wasmgen.OpKind(kind % 10), Nesting: int(nesting), Loops: int(loops),
			BrTable: int(brTable), Types: int(types), TypeParams: int(typeParams), DataSegments: int(data), DataBytes: int(dataBytes),
			ElemSegments: int(elems), ElemEntries: int(entries), Exports: int(exports), Imports: int(imports), Globals: int(globals),
			Names: int(names), Live: live, Plugin: true,
		}, lim, size)
		wasm := wasmgen.Module(s)
		ins, err := instrumentBudgeted(wasm, lim)
		if err != nil {
			// Refused: by the budget only (the shape is legal), before
			// wazero, and Inspect says so too.
			_, ierr := InspectWith(context.Background(), wasm, lim)
			if ModuleErrorKindOf(ierr) != OverLimits || !strings.Contains(ierr.Error(), "budget of") || !strings.Contains(ierr.Error(), "or raise ") {
				t.Fatalf("%v (%d bytes): refused with %v; want OverLimits naming the budget", s, len(wasm), ierr)
			}
			t.Logf("%v (%d bytes): refused: %v", s, len(wasm), err)
			return
		}
		c := ins.cost
		ins = nil
		if c.mem > lim.CompileMemory || c.ns > int64(lim.CompileTime) || c.inst > lim.InstanceMemory {
			t.Fatalf("%v: accepted with an estimate over the budget: %+v", s, c)
		}
		t.Logf("%v (%d bytes): estimate %s, %s, %s per instance", s, len(wasm), formatBytes(c.mem), formatNanos(c.ns), formatBytes(c.inst))
		for _, m := range measure(t, wasm, compileSpec{Modes: []string{"compile", "inspect"}, Limits: lim, Instances: 4}) {
			checkMeasure(t, s.String(), m, cpuBound, instSlack)
		}
	})
}

// legalShape clamps s inside lim's shape limits (which must have the
// defaults) and the Web's per-type limits, and to at most about size bytes
// of binary: the code gets half of it, the other sections a twelfth each.
func legalShape(s wasmgen.Shape, lim ModuleLimits, size int) wasmgen.Shape {
	share := size / 12
	s.Imports = min(s.Imports, lim.MaxFunctions-3)
	s.Funcs = min(s.Funcs, lim.MaxFunctions-3-s.Imports)
	s.Locals = min(s.Locals, lim.MaxFunctionLocals)
	s.Nesting = min(s.Nesting, lim.MaxNestingDepth-2)
	s.Loops = min(s.Loops, lim.MaxNestingDepth-2-s.Nesting)
	s.Ops = min(s.Ops, lim.MaxFunctionSize)
	s.BrTable = min(s.BrTable, lim.MaxFunctionSize)
	for wasmgen.BodySize(s) > lim.MaxFunctionSize {
		if s.Ops > s.BrTable {
			s.Ops /= 2
		} else {
			s.BrTable /= 2
		}
	}
	s.Funcs = min(s.Funcs, size/2/wasmgen.BodySize(s))
	s.Globals = min(s.Globals, lim.MaxGlobals-1)
	bits := 0
	for 1<<bits < s.Types {
		bits++
	}
	s.TypeParams = min(s.TypeParams, maxTypeParams-bits)
	s.Types = min(s.Types, share/(s.TypeParams+bits+4))
	s.Exports = min(s.Exports, share/9)
	s.ElemEntries = min(s.ElemEntries, share/3-1)
	s.ElemSegments = min(s.ElemSegments, share/(3+3*s.ElemEntries))
	s.DataBytes = min(s.DataBytes, share-6)
	s.DataSegments = min(s.DataSegments, share/(6+s.DataBytes))
	s.Names = min(s.Names, lim.MaxFunctionLocals)
	s.Names = min(s.Names, share/(s.Funcs+s.Imports+3)/8)
	return s
}
