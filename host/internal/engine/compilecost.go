package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file estimates, before anything is done with a module, the memory
// and the CPU time compiling it will take and the memory each instance of it
// will hold, and refuses a module whose estimate is over a budget
// (ModuleLimits.CompileMemory, CompileTime, InstanceMemory).
//
// Why: wazero's compilation can be neither interrupted nor bounded in
// memory, and its cost is a product of the module's dimensions, which the
// per-dimension shape limits (limits.go) cannot bound: an 800 KB module of
// 99,990 functions, each with 49,990 locals, is inside every one of them,
// yet wazero's decoder alone expands its locals to 8 bytes each (40 GB) and
// the interpreter that Inspect uses adds 56 more. So one walk over the
// binary counts its totals (locals, code bytes, branches, calls, blocks and
// loops, br_table targets, the largest function, types and their values,
// data and element segments, exports, imports, globals, names), adds the
// instrumentation's additions as upper bounds (instrument.go: its checks at
// every function entry, loop head, bulk instruction and return), and weighs
// the totals by per-unit costs measured on wazero 1.12 with both of the
// engine's backends (the compiler for Compile, the interpreter for Inspect:
// each coefficient is the larger of the two). The instrumentation only runs
// once the estimate is within budget: it inflates a 3-byte loop to 43 bytes,
// so a module of 64 MiB of loops would become 900 MB.
//
// What the estimate covers: the module's binary and its instrumented copy,
// which are alive during the compilation, the instrumentation's buffers,
// wazero's decoded module, the compiled code, and what the compilers hold
// for the largest function (their per-function scratch is reused, so only
// the largest counts); and, per instance, what wazero allocates for it
// besides its linear memory and tables (which abi/ABI.md section 7 counts
// already): globals, function references, element and data segment
// instances. RATIONALE.md ("The compile budget") has the measurements and
// the reasons for an estimate rather than a child process;
// TestCompileEstimate and FuzzCompileBudget check that the estimate stays
// above the measured growth of the process's resident memory.

// unitCost is what one unit of a module's dimension costs: host memory
// while compiling (bytes), compile time (CPU nanoseconds on the reference
// machine), and host memory per instance (bytes). RATIONALE.md ("The
// compile budget") has the measurements behind each; every figure is the
// larger of the two backends' (the compiler's for Compile, the
// interpreter's for Inspect), rounded up.
type unitCost struct{ mem, ns, inst int64 }

var (
	costFixed      = unitCost{mem: 4 << 20, ns: 1e6, inst: 256 << 10} // per module (per instance: wazero's module, the WASI context, buffers)
	costModuleByte = unitCost{mem: 2, ns: 20}                         // per byte of the binary: wazero's copies of bodies, segments and names
	costInsByte    = unitCost{mem: 4, ns: 20}                         // per byte of the instrumented binary: it, and the instrumentation's garbage (its buffers grow by a quarter at a time)
	costFunction   = unitCost{mem: 1536, ns: 16000, inst: 64}         // per function, imported or defined
	costLocal      = unitCost{mem: 80, ns: 80}                        // per parameter and local of a defined function
	costCodeByte   = unitCost{mem: 72, ns: 1000}                      // per byte of function bodies: compiled code, the interpreter's operations
	costType       = unitCost{mem: 1024, ns: 6000, inst: 16}          // per function type
	costTypeValue  = unitCost{mem: 160, ns: 100}                      // per parameter and result of a type (wazero's key strings make garbage: see costTypeValue2)
	costTypeValue2 = unitCost{ns: 2}                                  // per square of a type's parameters and results: wazero builds each type's key string by appending
	costBrTarget   = unitCost{mem: 64, ns: 12000}                     // per br_table target
	costBlock      = unitCost{mem: 256, ns: 2000}                     // per block, if, try
	costBlockDepth = unitCost{ns: 12}                                 // per enclosing block of each block (the compiler's passes over nested control flow)
	costLoop       = unitCost{mem: 512, ns: 4000}                     // per loop (with the interrupt check the engine adds in its head)
	costLoopDepth  = unitCost{ns: 250}                                // per enclosing loop of each loop (the compiler's loop analysis)
	costDataSeg    = unitCost{mem: 96, ns: 500, inst: 48}             // per data segment
	costElemSeg    = unitCost{mem: 256, ns: 1000, inst: 96}           // per element segment
	costElemEntry  = unitCost{mem: 96, ns: 500, inst: 80}             // per element segment entry
	costExport     = unitCost{mem: 768, ns: 10000}                    // per export
	costImport     = unitCost{mem: 1024, ns: 5000, inst: 64}          // per import
	costGlobal     = unitCost{mem: 320, ns: 2000, inst: 128}          // per global
	costNameByte   = unitCost{mem: 24, ns: 200}                       // per byte of the "name" section

	costBranch2    = unitCost{ns: 40}   // per square of a body's branches (see body)
	costPhi        = unitCost{ns: 3000} // per branch times local of a body (see body)
	costCallGlobal = unitCost{ns: 400}  // per call times mutable global of a body (see body)

	// The largest function: the compilers' per-function scratch is reused
	// from one function to the next, so only the largest counts, weighed
	// per byte of its body, br_table target, local, branch and branch times
	// local (see body).
	scratchPerByte       = unitCost{mem: 1024, ns: 2000}
	scratchPerTarget     = unitCost{mem: 2560}
	scratchPerLocal      = unitCost{mem: 64}
	scratchPerBranch     = unitCost{mem: 8192}
	scratchPerPhi        = unitCost{mem: 128}
	scratchPerCallGlobal = unitCost{mem: 256}
)

// Per-type limits, the Web's (the WebAssembly JS API's implementation
// limits, which every browser enforces, so no toolchain emits more): wazero
// builds a string key of every type by appending one value type at a time,
// quadratic in the type's length (500 types of 10,000 parameters took 17 s
// and allocated 76 GB).
const (
	maxTypeParams  = 1000
	maxTypeResults = 1000
)

// The most the instrumentation (instrument.go) adds, in bytes: to a body
// (the scratch local, the entry check, the stack accounting, the wrapping
// block and its refund, a longer size prefix), at a loop head, before a
// bulk instruction and before a return; and to the module (its types,
// globals, exports and $yield). Each is its encoding with 5-byte indices.
const (
	insPerBody   = 120
	insPerLoop   = 40
	insPerBulk   = 52
	insPerReturn = 20
	insPerModule = 256
)

// moduleTotals are the counts the estimate reads: of the module as wazero
// will compile it, the instrumentation's additions included.
type moduleTotals struct {
	size        int64 // bytes of the binary
	insSize     int64 // bytes of the instrumented binary, at most
	funcs       int64 // functions, imported and defined
	locals      int64 // parameters and locals of all defined functions
	code        int64 // bytes of all bodies
	blocks      int64 // block, if, try, try_table
	blockDepth  int64 // the depth of every block and loop, added up
	loops       int64
	loopDepth   int64 // the loop depth of every loop, added up
	brTargets   int64 // br_table targets, defaults included
	branches2   int64 // the square of every body's branches, added up (see body)
	phis        int64 // every body's branches times its locals, added up
	callGlobals int64 // every body's calls times the mutable globals, added up
	scratch     body  // the function of the largest scratch weight
	shape       body  // the largest body, locals and nesting of any function (each its own maximum), for the shape limits
	types       int64
	typeValues  int64 // parameters and results of all types
	typeValues2 int64 // their squares, per type
	dataSegs    int64
	elemSegs    int64
	elemEntries int64
	exports     int64
	imports     int64
	globals     int64
	mutGlobals  int64 // of which mutable (imported ones count as mutable)
	nameBytes   int64 // bytes of the "name" custom section
}

// body is one function body's figures, instrumented. Its branches are the
// points where control flow merges in wazero's compiler (if, br_if,
// br_table, twice for a loop, twice for a bulk instruction, which the
// compiler lowers to branches of its own), the instrumentation's checks
// included (an if each). The compiler's work is quadratic in them
// (measured: 6,000 ifs in a row took 0.6 s, 12,000 took 3.5 s), and it may
// give each branch a block parameter per local (what phis measures): 3,000
// ifs over 1,000 live locals took 330 MB and 5.5 s. Its calls are those
// after which the compiler reloads every mutable global of the module
// (call, call_indirect, return_call and return_call_indirect, call_ref,
// throw, and the instrumentation's calls of $yield): 5,103 calls in a
// module of 1,000 mutable globals took 860 MB and 1.4 s.
type body struct {
	index                            int // among the defined functions
	bytes, targets, locals, branches int64
	calls, callGlobals               int64 // calls, and calls times the module's mutable globals
	maxDepth                         int64 // deepest nesting, for the shape limit
}

func (b body) weight() int64 {
	w := satMul(b.bytes, scratchPerByte.mem)
	w = satAdd(w, satMul(b.targets, scratchPerTarget.mem))
	w = satAdd(w, satMul(b.locals, scratchPerLocal.mem))
	w = satAdd(w, satMul(b.branches, scratchPerBranch.mem))
	w = satAdd(w, satMul(b.callGlobals, scratchPerCallGlobal.mem))
	return satAdd(w, satMul(satMul(b.branches, b.locals), scratchPerPhi.mem))
}

// cost is the estimate of a module: the peak memory of compiling it (bytes),
// the CPU time of compiling it on the reference machine (nanoseconds) and
// the memory each instance holds outside its linear memory and tables
// (bytes), and the terms each adds up from, largest first (for the error
// message).
type cost struct {
	mem, ns, inst                int64
	memTerms, nsTerms, instTerms []costTerm
}

type costTerm struct {
	n    int64
	what string
}

// estimate weighs t.
func estimate(t moduleTotals) cost {
	var c cost
	add := func(n int64, u unitCost, what string) {
		if n <= 0 {
			return
		}
		for _, x := range []struct {
			per   int64
			sum   *int64
			terms *[]costTerm
		}{{u.mem, &c.mem, &c.memTerms}, {u.ns, &c.ns, &c.nsTerms}, {u.inst, &c.inst, &c.instTerms}} {
			b := satMul(n, x.per)
			if b <= 0 {
				continue
			}
			*x.sum = satAdd(*x.sum, b)
			if k := len(*x.terms) - 1; k >= 0 && (*x.terms)[k].what == what {
				(*x.terms)[k].n = satAdd((*x.terms)[k].n, b) // the largest body's parts
			} else {
				*x.terms = append(*x.terms, costTerm{b, what})
			}
		}
	}
	add(1, costFixed, "the module")
	add(t.size, costModuleByte, fmt.Sprintf("%d bytes of binary", t.size))
	add(t.insSize, costInsByte, fmt.Sprintf("%d bytes of instrumented binary", t.insSize))
	add(t.funcs, costFunction, fmt.Sprintf("%d functions", t.funcs))
	add(t.locals, costLocal, fmt.Sprintf("%d parameters and locals in all functions", t.locals))
	add(t.code, costCodeByte, fmt.Sprintf("%d bytes of function bodies", t.code))
	sc := t.scratch
	what := fmt.Sprintf("the compiler's work on its largest function body (body %d: %d bytes, %d br_table targets, %d locals, %d branches, %d calls)",
		sc.index, sc.bytes, sc.targets, sc.locals, sc.branches, sc.calls)
	add(sc.bytes, scratchPerByte, what)
	add(sc.targets, scratchPerTarget, what)
	add(sc.locals, scratchPerLocal, what)
	add(sc.branches, scratchPerBranch, what)
	add(satMul(sc.branches, sc.locals), scratchPerPhi, what)
	add(sc.callGlobals, scratchPerCallGlobal, what)
	add(t.branches2, costBranch2, fmt.Sprintf("branches in bodies (%d, their squares added up)", t.branches2))
	add(t.phis, costPhi, fmt.Sprintf("branches times locals in bodies (%d, added up)", t.phis))
	add(t.callGlobals, costCallGlobal, fmt.Sprintf("calls times %d mutable globals in bodies (%d, added up)", t.mutGlobals, t.callGlobals))
	add(t.types, costType, fmt.Sprintf("%d types", t.types))
	add(t.typeValues, costTypeValue, fmt.Sprintf("%d parameters and results in types", t.typeValues))
	add(t.typeValues2, costTypeValue2, fmt.Sprintf("types of up to %d parameters and results (%d squared, added up)", maxTypeParams+maxTypeResults, t.typeValues2))
	add(t.brTargets, costBrTarget, fmt.Sprintf("%d br_table targets", t.brTargets))
	add(t.blocks, costBlock, fmt.Sprintf("%d blocks", t.blocks))
	add(t.blockDepth, costBlockDepth, fmt.Sprintf("blocks nested %d deep in all (each block's depth, added up)", t.blockDepth))
	add(t.loops, costLoop, fmt.Sprintf("%d loops", t.loops))
	add(t.loopDepth, costLoopDepth, fmt.Sprintf("loops nested %d deep in all (each loop's depth, added up)", t.loopDepth))
	add(t.dataSegs, costDataSeg, fmt.Sprintf("%d data segments", t.dataSegs))
	add(t.elemSegs, costElemSeg, fmt.Sprintf("%d element segments", t.elemSegs))
	add(t.elemEntries, costElemEntry, fmt.Sprintf("%d element entries", t.elemEntries))
	add(t.exports, costExport, fmt.Sprintf("%d exports", t.exports))
	add(t.imports, costImport, fmt.Sprintf("%d imports", t.imports))
	add(t.globals, costGlobal, fmt.Sprintf("%d globals", t.globals))
	add(t.nameBytes, costNameByte, fmt.Sprintf("%d bytes of names", t.nameBytes))
	for _, ts := range [][]costTerm{c.memTerms, c.nsTerms, c.instTerms} {
		sortTerms(ts)
	}
	return c
}

func sortTerms(ts []costTerm) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].n > ts[j-1].n; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

const maxCost = 1 << 62

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxCost/b {
		return maxCost
	}
	return a * b
}

func satAdd(a, b int64) int64 { return min(a+b, maxCost) }

// instrumentBudgeted is instrumentWith under lim's budgets: the module's
// totals are counted first, and a module whose estimate is over a budget is
// refused before it is instrumented. A module over a shape limit is
// refused with that limit's reason (instrumentWith finds it in its first
// pass, before it builds anything). The returned instrumented carries the
// estimate.
func instrumentBudgeted(wasm []byte, lim ModuleLimits) (*instrumented, error) {
	t, err := countTotals(wasm)
	var ol *errOverLimit
	switch {
	case err == nil:
		c := estimate(t)
		if err = checkCost(c, lim); err == nil {
			ins, err := instrumentWith(wasm, lim)
			if err != nil {
				return nil, err
			}
			ins.cost = c
			return ins, nil
		}
	case !errors.As(err, &ol):
		// Unreadable: instrumentWith says what is wrong (it reads
		// every module the walk reads: FuzzModuleShape).
		if _, ierr := instrumentWith(wasm, lim); ierr != nil {
			return nil, ierr
		}
		return nil, err
	}
	if t.overShape(lim) {
		// Over a shape limit too, whose reason comes first.
		if _, ierr := instrumentWith(wasm, lim); ierr != nil {
			return nil, ierr
		}
	}
	return nil, err
}

// overShape reports whether the totals show a module over a shape limit
// that instrumentWith checks before it builds anything (the totals'
// functions and globals include the instrumentation's).
func (t moduleTotals) overShape(lim ModuleLimits) bool {
	return t.funcs-1 > int64(lim.MaxFunctions) || t.globals-3 > int64(lim.MaxGlobals) || t.shape.locals > int64(lim.MaxFunctionLocals) ||
		t.shape.bytes > int64(lim.MaxFunctionSize) || t.shape.maxDepth > int64(lim.MaxNestingDepth) || t.size > int64(lim.MaxModuleSize)
}

// checkCost refuses a module whose estimate is over lim's budgets. The
// message names the budget, the module's figure and its largest terms,
// and how to fix it.
func checkCost(c cost, lim ModuleLimits) error {
	setting := func(name, field string) string {
		if name == "" {
			return field
		}
		return name
	}
	fix := func(name string) string {
		return "make the module smaller in these dimensions, or raise " + name + " if the module is trusted and the host has the resources"
	}
	switch {
	case c.mem > lim.CompileMemory:
		name := setting(lim.Settings.CompileMemory, "CompileMemory")
		return overLimit("compiling the module would take about %s of host memory, over the compile budget of %s (%s): %s; %s",
			formatBytes(c.mem), formatBytes(lim.CompileMemory), name, describeTerms(c.memTerms, formatBytes), fix(name))
	case c.ns > int64(lim.CompileTime):
		name := setting(lim.Settings.CompileTime, "CompileTime")
		return overLimit("compiling the module would take about %v of CPU, over the compile budget of %v (%s): %s; %s",
			formatNanos(c.ns), lim.CompileTime, name, describeTerms(c.nsTerms, formatNanos), fix(name))
	case c.inst > lim.InstanceMemory:
		name := setting(lim.Settings.InstanceMemory, "InstanceMemory")
		return overLimit("each instance of the module would hold about %s of host memory besides its linear memory and tables, over the budget of %s per instance (%s): %s; %s",
			formatBytes(c.inst), formatBytes(lim.InstanceMemory), name, describeTerms(c.instTerms, formatBytes), fix(name))
	}
	return nil
}

// describeTerms names the largest terms: those that make up most of the
// sum, at most three.
func describeTerms(ts []costTerm, format func(int64) string) string {
	var parts []string
	for k, t := range ts {
		if k == 3 || (k > 0 && t.n < ts[0].n/8) {
			break
		}
		parts = append(parts, fmt.Sprintf("%s for %s", format(t.n), t.what))
	}
	return "mostly " + strings.Join(parts, ", ")
}

// formatNanos writes ns rounded to what matters: 12s, 1.5s, 300ms.
func formatNanos(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// formatBytes writes n like 1.5 GiB, 512 MiB or 900 KiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// errTotals is a binary the totals walk cannot read (instrumentWith then
// says what is wrong with it).
var errTotals = errors.New("counting the module's totals")

// countTotals walks a binary and counts what the estimate reads, with the
// instrumentation's additions. Sections the instrumentation only copies
// (element, data, custom) are read leniently: where one cannot be read, its
// count is bounded by its size (every entry takes at least one byte), so the
// estimate stays an upper bound and wazero refuses the module later.
func countTotals(wasm []byte) (moduleTotals, error) {
	t := moduleTotals{size: int64(len(wasm)), insSize: int64(len(wasm)) + insPerModule}
	if len(wasm) < 8 {
		return t, errTotals
	}
	r := reader{b: wasm, pos: 8}
	var funcTypes []uint32
	var typeParams []int64
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.pos) {
			return t, fmt.Errorf("%w: section header at %d", errTotals, r.pos)
		}
		p := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		pr := reader{b: p}
		switch id {
		case secType:
			n := pr.u32()
			for k := uint32(0); k < n && pr.err == nil; k++ {
				pr.byte() // 0x60
				np := pr.u32()
				for j := uint32(0); j < np && pr.err == nil; j++ {
					pr.valType()
				}
				nr := pr.u32()
				for j := uint32(0); j < nr && pr.err == nil; j++ {
					pr.valType()
				}
				if pr.err == nil && (np > maxTypeParams || nr > maxTypeResults) {
					return t, overLimit("type %d has %d parameters and %d results, over the limit of %d parameters and %d results (the Web's limits, fixed)",
						k, np, nr, maxTypeParams, maxTypeResults)
				}
				n := int64(np) + int64(nr)
				t.types++
				t.typeValues += n
				t.typeValues2 += n * n
				typeParams = append(typeParams, int64(np))
			}
			if pr.err != nil {
				return t, fmt.Errorf("%w: types: %v", errTotals, pr.err)
			}
		case secImport:
			imps, err := parseImports(p)
			if err != nil {
				return t, fmt.Errorf("%w: imports: %v", errTotals, err)
			}
			t.imports = int64(len(imps))
			for _, im := range imps {
				switch im.Kind {
				case 0:
					t.funcs++
				case 3:
					t.globals++
					t.mutGlobals++
				}
			}
		case secFunction:
			n := pr.u32()
			funcTypes = make([]uint32, 0, min(n, uint32(len(p))))
			for k := uint32(0); k < n && pr.err == nil; k++ {
				funcTypes = append(funcTypes, pr.u32())
			}
			t.funcs += int64(len(funcTypes))
		case secGlobal:
			n := pr.u32()
			var mut int64
			for k := uint32(0); k < n && pr.err == nil; k++ {
				pr.valType()
				if pr.byte() == 1 {
					mut++
				}
				pr.constExpr()
			}
			if pr.err != nil {
				mut = int64(n) // unreadable: all of them
			}
			t.globals += int64(n)
			t.mutGlobals += mut
		case secExport:
			t.exports = int64(pr.u32())
		case secElement:
			t.elemSegs, t.elemEntries = countElements(p)
		case secData:
			t.dataSegs = int64(pr.u32())
			if t.dataSegs > int64(len(p)) {
				t.dataSegs = int64(len(p))
			}
		case secCode:
			if err := t.countCode(p, funcTypes, typeParams); err != nil {
				return t, err
			}
		case secCustom:
			if name := pr.name(); pr.err == nil && name == "name" {
				t.nameBytes += int64(len(p))
			}
		}
	}
	t.funcs++      // $yield
	t.globals += 3 // the interrupt flag, the countdown, the stack budget
	return t, nil
}

// countCode counts the code section: locals, bytes, blocks, loops,
// br_table targets and branches of every body, the instrumentation's
// additions included, and the largest body's weight.
func (t *moduleTotals) countCode(p []byte, funcTypes []uint32, typeParams []int64) error {
	r := reader{b: p}
	n := r.u32()
	for f := uint32(0); f < n && r.err == nil; f++ {
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.pos) {
			return fmt.Errorf("%w: body %d", errTotals, f)
		}
		code := reader{b: r.b[r.pos : r.pos+int(size)]}
		r.pos += int(size)
		var locals int64
		if int(f) < len(funcTypes) && int(funcTypes[f]) < len(typeParams) {
			locals = typeParams[funcTypes[f]]
		}
		groups := code.u32()
		for g := uint32(0); g < groups && code.err == nil; g++ {
			locals += int64(code.u32())
			code.valType()
		}
		this := body{index: int(f), locals: locals + 1, branches: 2, calls: 1} // the scratch local; the entry check (an if and a call) and the stack check
		added := int64(insPerBody)
		// The kind of every open block (loop or not), to count depths.
		var open []bool
		var loopDepth int64
		for code.pos < len(code.b) && code.err == nil {
			op := code.byte()
			switch op {
			case 0x02, 0x03, 0x04, 0x06, 0x1F:
				loop := op == 0x03
				open = append(open, loop)
				t.blockDepth += int64(len(open))
				this.maxDepth = max(this.maxDepth, int64(len(open)))
				if loop {
					loopDepth++
					t.loops++
					t.loopDepth += loopDepth
					this.branches += 3 // the loop, and its check's if
					this.calls++       // and its call
					added += insPerLoop
					t.blocks++ // the check's if
				} else {
					t.blocks++
				}
				if op == 0x04 {
					this.branches++
				}
			case 0x0B:
				if n := len(open); n > 0 {
					if open[n-1] {
						loopDepth--
					}
					open = open[:n-1]
				}
			case 0x0D: // br_if
				this.branches++
			case 0x0E: // br_table
				n := int64(code.peekU32()) + 1
				t.brTargets += n
				this.targets += n
				this.branches++
			case 0x0F: // return
				added += insPerReturn
			case 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x08: // call, call_indirect, return_call(_indirect), call_ref, return_call_ref, throw
				this.calls++
			case 0xFC:
				switch code.peekU32() {
				case 8, 10, 11, 12, 14, 15, 17:
					this.branches += 3 // the instruction, and its check's if
					this.calls++       // and its call
					added += insPerBulk
					t.blocks++ // the check's if
				}
			}
			switch op {
			case 0x03: // loop (body handles it in instrument.go)
				code.blockType()
			case 0x10, 0x12, 0x23, 0x24, 0xD2: // call, return_call, global.get/set, ref.func: likewise
				code.u32()
			default:
				code.skipImmediates(op)
			}
		}
		if code.err != nil {
			return fmt.Errorf("%w: body %d: %v", errTotals, f, code.err)
		}
		this.bytes = int64(size) + added
		t.blocks += 3 // the entry check's if, the stack check's if and the wrapping block
		t.locals += this.locals
		t.code += this.bytes
		t.insSize += added
		t.branches2 = satAdd(t.branches2, satMul(this.branches, this.branches))
		t.phis = satAdd(t.phis, satMul(this.branches, this.locals))
		this.callGlobals = satMul(this.calls, t.mutGlobals+3) // the instrumentation's three globals are mutable
		t.callGlobals = satAdd(t.callGlobals, this.callGlobals)
		if this.weight() > t.scratch.weight() {
			t.scratch = this
		}
		t.shape.bytes = max(t.shape.bytes, int64(size))
		t.shape.locals = max(t.shape.locals, locals)
		t.shape.maxDepth = max(t.shape.maxDepth, this.maxDepth)
	}
	if r.err != nil {
		return fmt.Errorf("%w: code: %v", errTotals, r.err)
	}
	return nil
}

// countElements counts the segments and entries of an element section.
// An entry takes at least one byte, so an unreadable section counts as
// many entries as it has bytes.
func countElements(p []byte) (segs, entries int64) {
	r := reader{b: p}
	n := r.u32()
	for k := uint32(0); k < n && r.err == nil; k++ {
		flags := r.u32()
		if flags&1 == 0 && flags&2 == 0 { // active, table 0: offset
			r.constExpr()
		} else if flags&3 == 2 { // active with a table index: index, offset
			r.u32()
			r.constExpr()
		}
		if flags&3 != 0 { // elemkind or reftype
			r.valType()
		}
		cnt := r.u32()
		for j := uint32(0); j < cnt && r.err == nil; j++ {
			if flags&4 != 0 {
				r.constExpr()
			} else {
				r.u32()
			}
		}
		segs++
		entries += int64(cnt)
	}
	if r.err != nil {
		return max(segs, int64(n)), max(entries, int64(len(p)))
	}
	return segs, entries
}

// constExpr skips a constant expression, up to and including its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0B {
			return
		}
		r.skipImmediates(op)
	}
}
