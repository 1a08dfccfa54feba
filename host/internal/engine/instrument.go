package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file rewrites a plugin's Wasm binary so that the host can interrupt it
// at almost no cost ("epoch interruption", as Wasmtime calls it).
//
// Why not wazero's own mechanism: RuntimeConfig.WithCloseOnContextDone(true)
// makes every api.Function call start a goroutine and a channel (3 heap
// allocations and several hundred ns per call, whatever the context), makes
// every loop iteration leave native code for a Go check (~40 ns each), and
// still cannot stop loop-free recursion (fib(35) runs to the end). See
// BenchmarkFloor, BenchmarkGuestCode and TestWazeroCloseOnContextDone.
//
// Why a check alone is not enough: native code is not preemptible by the Go
// runtime. A guest spinning in a loop that never returns to Go blocks every
// stop-the-world (GC) of the whole process, and with it the watchdog that
// would set the flag. So the guest must pass through Go now and then.
//
// What the rewrite does:
//   - appends three mutable i32 globals: the interrupt flag (0), a
//     countdown (checkPeriod) and the stack budget (DefaultStackLimit, which
//     the host sets to Options.StackLimit at instantiation), exported as
//     exportInterrupt, exportCountdown and exportStack; to interrupt, the
//     watchdog sets the flag to 1 and the countdown to 1 (so the next check
//     calls $yield);
//   - appends one function, $yield: `if flag then unreachable; memory.grow 0;
//     countdown = checkPeriod`. memory.grow always leaves native code for Go
//     in wazero (even for 0 pages, which changes nothing), so every call is a
//     Go preemption point;
//   - inserts `countdown -= 1; if countdown == 0 then call $yield` (about 15
//     bytes; one load, one store, one branch) at the entry of every function and at
//     the head of every loop, so running code reaches a check within a
//     bounded number of instructions (straight-line code is finite; every
//     repetition goes through a loop head or a call), and reaches $yield at
//     least once per checkPeriod checks;
//   - inserts before every bulk instruction whose cost grows with an operand
//     (memory.fill, memory.copy, memory.init, table.fill, table.copy,
//     table.init, table.grow) a check weighted by that count, n: `countdown
//     -= 1 + n/1024; if countdown < 1 then call $yield`. Straight-line code
//     of 3,000 64 MiB memory.fills (tens of seconds, no loop, no call) is
//     then interrupted like a loop, and a spinning guest still reaches Go
//     often enough for the garbage collector;
//   - charges each function's frame (but those of functions whose calls,
//     all direct and without recursion, can use at most freeHeight:
//     stackHeights) against the stack budget: `stack -=
//     cost; if stack < 0 then unreachable` at entry, and `stack += cost` on
//     every normal exit: before each return, and after the body, which is
//     wrapped in a block of the function's result type so that a branch to
//     the function's own label lands there (frameCost, below). Exceptions
//     and tail calls, the other ways out, are not enabled. A trap leaves the
//     budget unbalanced, but a trap discards the instance;
//   - lowers the tables' maxima so that together they hold at most
//     ModuleLimits.MaxTableEntries, so a table.grow past that returns -1
//     (as any grow may) and table.fill and friends, bounds-checked before
//     they run, touch at most that many entries (capTables);
//   - moves the start function (if any) to an export (exportStart) so the
//     host runs it under the watchdog instead of inside InstantiateModule;
//   - exports every mutable global the module defines (exportGlobal plus
//     its index among them), so the host can snapshot an instance after
//     its init and restore a replacement from it (snapshot.go), unless the
//     module cannot be restored that way: it changes a table (table.set,
//     table.grow, table.fill, table.copy, table.init: a snapshot has no
//     way to read a table), imports a global, or defines more than
//     maxSnapshotGlobals mutable ones;
//   - drops DWARF custom sections (their code offsets would be stale);
//   - rejects code that names the added globals or function (an index past
//     the original ones), so a plugin cannot clear the flag, the countdown
//     or its stack budget.
//
// The same pass checks the module's shape against ModuleLimits (size,
// functions, parameters and locals per function, body size, nesting depth,
// globals, tables, table entries) before wazero compiles anything: wazero's
// compilation time and memory grow with these, and it cannot be interrupted.
//
// Appended items take the next free index in each index space, so every
// existing type, function, global, table and memory index is unchanged, and
// names, exports, tables and element segments stay valid. (A function with
// more than one result needs a new type for its wrapping block; those types
// come after the type of $yield.)

// checkPeriod is how many checks run between two calls of $yield: the
// longest stretch a plugin runs without a Go preemption point, and the
// latency of an interrupt, are about this many loop iterations or calls.
const checkPeriod = 1 << 14

// Reserved export names added by the instrumentation. A plugin may not export
// anything whose name starts with reservedExportPrefix.
const (
	reservedExportPrefix = "__wasmstream_"
	exportInterrupt      = reservedExportPrefix + "interrupt"
	exportCountdown      = reservedExportPrefix + "countdown"
	exportStart          = reservedExportPrefix + "start"
	exportStack          = reservedExportPrefix + "stack"
	// exportGlobal prefixes the export of the module's k-th mutable
	// global ("__wasmstream_g" + k).
	exportGlobal = reservedExportPrefix + "g"
)

// exportGlobalName is the export of the module's k-th mutable global.
func exportGlobalName(k int) string { return exportGlobal + strconv.Itoa(k) }

// maxSnapshotGlobals bounds the mutable globals the instrumentation
// exports for snapshots: a module with more is not snapshotted (a Go
// plugin has about 10; compiled C and Rust 1 to 3).
const maxSnapshotGlobals = 1024

// errNotWasm is returned by instrument for bytes without the Wasm header.
var errNotWasm = errors.New("not a WebAssembly module")

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionRank is the position of a non-custom section in the required order.
func sectionRank(id byte) int {
	switch id {
	case secType:
		return 1
	case secImport:
		return 2
	case secFunction:
		return 3
	case secTable:
		return 4
	case secMemory:
		return 5
	case secTag:
		return 6
	case secGlobal:
		return 7
	case secExport:
		return 8
	case secStart:
		return 9
	case secElement:
		return 10
	case secDataCount:
		return 11
	case secCode:
		return 12
	case secData:
		return 13
	}
	return 0
}

// wasmImport is one entry of the import section.
type wasmImport struct {
	Module, Name string
	Kind         byte // 0 func, 1 table, 2 memory, 3 global, 4 tag
}

// importKindName names an import or export kind.
func importKindName(k byte) string {
	switch k {
	case 0:
		return "func"
	case 1:
		return "table"
	case 2:
		return "memory"
	case 3:
		return "global"
	case 4:
		return "tag"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// wasmExport is one entry of the export section.
type wasmExport struct {
	Name  string
	Kind  byte // as wasmImport.Kind
	Index uint32
}

// instrumented is the result of instrument.
type instrumented struct {
	wasm     []byte       // the rewritten module
	imports  []wasmImport // every import, in order
	exports  []wasmExport // every export of the original module, in order
	hasStart bool         // the module had a start function, now exportStart
	// snapshotGlobals is how many mutable globals the module defines, each
	// exported as exportGlobal + its index among them; -1: the module
	// cannot be snapshotted (see the top of this file).
	snapshotGlobals int
	funcs           int  // functions with a body (instrumented)
	loops           int  // loop heads instrumented
	bulk            int  // bulk memory and table instructions instrumented
	free            int  // functions left out of the stack accounting
	cost            cost // the estimate of compiling it (compilecost.go)
}

type section struct {
	id      byte
	payload []byte
}

// funcType is one entry of the type section: the parameter count and the
// raw encoding of the result types (what a block type needs).
type funcType struct {
	params   uint32
	nresults uint32
	results  []byte
}

// instrument rewrites src with the default ModuleLimits.
func instrument(src []byte) (*instrumented, error) {
	return instrumentWith(src, ModuleLimits{}.withDefaults())
}

// instrumentWith rewrites src as described at the top of this file. It
// returns errNotWasm for bytes that are not a core Wasm module, an
// *errOverLimit for a module whose shape is over lim, and a descriptive
// error for a malformed or truncated one. lim must have its defaults set.
func instrumentWith(src []byte, lim ModuleLimits) (*instrumented, error) {
	if len(src) < 8 || !bytes.Equal(src[:4], []byte("\x00asm")) {
		return nil, errNotWasm
	}
	if !bytes.Equal(src[4:8], []byte{1, 0, 0, 0}) {
		if src[6] != 0 || src[7] != 0 { // layer != 0: a component
			return nil, fmt.Errorf("%w: a component (version %x), not a core module", errNotWasm, src[4:8])
		}
		return nil, fmt.Errorf("unsupported Wasm binary version %x", src[4:8])
	}
	if len(src) > lim.MaxModuleSize {
		return nil, overLimit("the module is %d bytes, over the limit of %d (MaxModuleSize)", len(src), lim.MaxModuleSize)
	}
	var secs []section
	r := reader{b: src, pos: 8}
	lastRank := 0
	for r.pos < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return nil, fmt.Errorf("section header at offset %d: %w", r.pos, r.err)
		}
		if uint64(size) > uint64(len(r.b)-r.pos) {
			return nil, fmt.Errorf("section %d at offset %d: size %d past the end of the module (truncated?)", id, r.pos, size)
		}
		payload := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		if id != secCustom {
			rank := sectionRank(id)
			if rank == 0 {
				return nil, fmt.Errorf("unknown section id %d", id)
			}
			if rank <= lastRank {
				return nil, fmt.Errorf("section %d out of order or duplicated", id)
			}
			lastRank = rank
		}
		secs = append(secs, section{id, payload})
	}

	// Pass 1: what the rewrite needs to know, and the shape limits.
	out := &instrumented{}
	var importedGlobals, definedGlobals, importedFuncs, importedTables uint32
	var mutableGlobals []uint32 // defined mutable globals (up to one past maxSnapshotGlobals)
	var types []funcType
	var funcTypes []uint32 // type index of each defined function
	startFunc := int64(-1)
	hasMemory := false
	for _, s := range secs {
		pr := reader{b: s.payload}
		switch s.id {
		case secType:
			var err error
			if types, err = parseTypes(s.payload); err != nil {
				return nil, fmt.Errorf("type section: %w", err)
			}
		case secImport:
			imps, err := parseImports(s.payload)
			if err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
			out.imports = imps
			for _, im := range imps {
				switch im.Kind {
				case 0:
					importedFuncs++
				case 1:
					importedTables++
				case 2:
					hasMemory = true
				case 3:
					importedGlobals++
				}
			}
		case secFunction:
			n := pr.u32()
			if pr.err == nil && uint64(n) > uint64(len(s.payload)) {
				return nil, fmt.Errorf("function section: %d entries in %d bytes", n, len(s.payload))
			}
			funcTypes = make([]uint32, 0, n)
			for k := uint32(0); k < n && pr.err == nil; k++ {
				funcTypes = append(funcTypes, pr.u32())
			}
		case secTable:
			if n := pr.u32(); pr.err == nil && uint64(n)+uint64(importedTables) > uint64(lim.MaxTables) {
				return nil, overLimit("%d tables, over the limit of %d (MaxTables)", uint64(n)+uint64(importedTables), lim.MaxTables)
			}
		case secGlobal:
			definedGlobals = pr.u32()
			if uint64(definedGlobals) > uint64(len(s.payload)) {
				return nil, fmt.Errorf("global section: %d entries in %d bytes", definedGlobals, len(s.payload))
			}
			mutableGlobals = make([]uint32, 0, min(definedGlobals, maxSnapshotGlobals+1))
			for k := uint32(0); k < definedGlobals && pr.err == nil; k++ {
				pr.valType()
				if mut := pr.byte(); mut == 1 && len(mutableGlobals) <= maxSnapshotGlobals {
					mutableGlobals = append(mutableGlobals, k)
				}
				for pr.err == nil {
					op := pr.byte()
					if op == 0x0B {
						break
					}
					pr.skipImmediates(op)
				}
			}
		case secStart:
			startFunc = int64(pr.u32())
		case secMemory:
			hasMemory = pr.u32() > 0
		}
		if pr.err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, pr.err)
		}
	}
	definedFuncs := uint32(len(funcTypes))
	if n := uint64(importedFuncs) + uint64(definedFuncs); n > uint64(lim.MaxFunctions) {
		return nil, overLimit("%d functions, over the limit of %d (MaxFunctions)", n, lim.MaxFunctions)
	}
	if n := uint64(importedGlobals) + uint64(definedGlobals); n > uint64(lim.MaxGlobals) {
		return nil, overLimit("%d globals, over the limit of %d (MaxGlobals)", n, lim.MaxGlobals)
	}
	if uint64(len(types))+2 > 1<<31 || definedGlobals > 1<<31 {
		return nil, errors.New("index space overflow")
	}
	ntypes := uint32(len(types))
	g := globalsAdded{flag: importedGlobals + definedGlobals, memory: hasMemory}
	g.countdown = g.flag + 1
	g.stack = g.flag + 2
	yield := importedFuncs + definedFuncs // index of the appended function
	code := codeRewrite{
		lim:       lim,
		types:     types,
		funcTypes: funcTypes,
		g:         g,
		yield:     yield,
		bodyLim:   bodyLimits{globals: g.flag, funcs: yield},
		imported:  importedFuncs,
		extra:     map[string]uint32{},
		firstNew:  ntypes + 1, // after the type of $yield
	}

	// Pass 2: the code and table sections, whose rewrite may add types.
	rewritten := map[byte][]byte{}
	for _, s := range secs {
		switch s.id {
		case secCode:
			p, funcs, err := code.section(s.payload)
			if err != nil {
				var ol *errOverLimit
				if errors.As(err, &ol) {
					return nil, err
				}
				return nil, fmt.Errorf("code section: %w", err)
			}
			if uint32(funcs) != definedFuncs {
				return nil, fmt.Errorf("code section has %d bodies, function section %d", funcs, definedFuncs)
			}
			rewritten[secCode] = appendYield(p, definedFuncs, g)
			out.funcs, out.loops, out.bulk, out.free = funcs, code.loops, code.bulk, code.free
		case secTable:
			p, err := capTables(s.payload, lim.MaxTableEntries)
			if err != nil {
				var ol *errOverLimit
				if errors.As(err, &ol) {
					return nil, err
				}
				return nil, fmt.Errorf("table section: %w", err)
			}
			rewritten[secTable] = p
		}
	}
	if definedFuncs != 0 && rewritten[secCode] == nil {
		return nil, fmt.Errorf("function section has %d entries but there is no code section", definedFuncs)
	}
	newTypes := append([]byte{0x60, 0, 0}, code.extraTypes...) // () -> () for $yield, then block types

	// Each appended item goes into its section, which is created (in
	// order) when the module has none.
	want := map[byte][]byte{
		secType:     appendItems([]byte{0}, 0, 1+uint32(len(code.extra)), newTypes),
		secFunction: appendItems([]byte{0}, 0, 1, appendU32(nil, ntypes)),
		secGlobal:   appendGlobals([]byte{0}, 0),
		secCode:     appendYield([]byte{0}, 0, g),
	}
	out.snapshotGlobals = len(mutableGlobals)
	if code.tableWrites || importedGlobals > 0 || len(mutableGlobals) > maxSnapshotGlobals {
		out.snapshotGlobals, mutableGlobals = -1, nil
	}
	snap := make([]uint32, len(mutableGlobals)) // their indices in the global index space
	for k, idx := range mutableGlobals {
		snap[k] = importedGlobals + idx
	}
	want[secExport], _, _ = extendExports([]byte{0}, g.flag, startFunc, snap)
	var newSecs []section
	add := func(s section) {
		// Insert the missing sections that must come before s.
		for _, id := range []byte{secType, secFunction, secGlobal, secExport, secCode} {
			if p, missing := want[id]; missing && (s.id == 0xFF || sectionRank(id) < sectionRank(s.id)) {
				newSecs = append(newSecs, section{id, p})
				delete(want, id)
			}
		}
		if s.id != 0xFF {
			newSecs = append(newSecs, s)
		}
	}
	for _, s := range secs {
		switch s.id {
		case secCustom:
			pr := reader{b: s.payload}
			if name := pr.name(); pr.err == nil && strings.HasPrefix(name, ".debug_") {
				continue // DWARF: code offsets would be stale
			}
			newSecs = append(newSecs, s)
			continue
		case secType:
			s.payload = appendItems(s.payload, ntypes, 1+uint32(len(code.extra)), newTypes)
		case secFunction:
			s.payload = appendItems(s.payload, definedFuncs, 1, appendU32(nil, ntypes))
		case secGlobal:
			s.payload = appendGlobals(s.payload, definedGlobals)
		case secExport:
			p, exps, err := extendExports(s.payload, g.flag, startFunc, snap)
			if err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
			s.payload, out.exports = p, exps
		case secStart:
			out.hasStart = true
			continue // now an export the host calls
		case secCode, secTable:
			s.payload = rewritten[s.id]
		}
		delete(want, s.id)
		add(s)
	}
	add(section{id: 0xFF}) // whatever is still missing goes at the end

	n := 8
	for _, s := range newSecs {
		n += 1 + 5 + len(s.payload)
	}
	w := make([]byte, 0, n)
	w = append(w, src[:8]...)
	for _, s := range newSecs {
		w = append(w, s.id)
		w = appendU32(w, uint32(len(s.payload)))
		w = append(w, s.payload...)
	}
	out.wasm = w
	return out, nil
}

// parseTypes reads the type section. Only function types exist in the
// features the engine enables (core 2.0); anything else is refused here.
func parseTypes(payload []byte) ([]funcType, error) {
	r := reader{b: payload}
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(payload)) {
		return nil, fmt.Errorf("%d types in %d bytes", n, len(payload))
	}
	types := make([]funcType, 0, n)
	for k := uint32(0); k < n && r.err == nil; k++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			return nil, fmt.Errorf("type %d: unsupported form 0x%02X (only function types)", k, form)
		}
		var t funcType
		t.params = r.u32()
		for j := uint32(0); j < t.params && r.err == nil; j++ {
			r.valType()
		}
		t.nresults = r.u32()
		from := r.pos
		for j := uint32(0); j < t.nresults && r.err == nil; j++ {
			r.valType()
		}
		if r.err == nil {
			t.results = payload[from:r.pos]
		}
		types = append(types, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(payload) {
		return nil, errors.New("trailing bytes")
	}
	return types, nil
}

// capTables rewrites the table section so that the tables' maxima add up
// to at most maxEntries, and refuses tables whose minima add up to more.
// Each table keeps its declared maximum when that fits; otherwise it gets its
// minimum plus an equal share of what the minima leave (a module has one
// table in practice, which gets it all). The tables can then never cost the
// host more than maxEntries references, and table.fill, table.copy and
// table.init (bounds-checked before they run) never touch more.
func capTables(payload []byte, maxEntries uint32) ([]byte, error) {
	type table struct {
		ref    []byte
		lo, hi uint64
		hasMax bool
	}
	r := reader{b: payload}
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(payload)) {
		return nil, fmt.Errorf("%d tables in %d bytes", n, len(payload))
	}
	var tables []table
	var sumMin uint64
	for k := uint32(0); k < n && r.err == nil; k++ {
		if r.pos < len(r.b) && r.b[r.pos] == 0x40 {
			return nil, fmt.Errorf("table %d: table initializers are not supported", k)
		}
		from := r.pos
		r.valType()
		t := table{ref: payload[from:r.pos]}
		flags := r.byte()
		if r.err != nil {
			break
		}
		if flags > 1 {
			return nil, fmt.Errorf("table %d: unsupported limits flags 0x%02X", k, flags)
		}
		t.lo = uint64(r.u32())
		if flags == 1 {
			t.hi, t.hasMax = uint64(r.u32()), true
		}
		sumMin += t.lo
		tables = append(tables, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(payload) {
		return nil, errors.New("trailing bytes")
	}
	if sumMin > uint64(maxEntries) {
		return nil, overLimit("tables of %d entries at least, over the limit of %d (MaxTableEntries)", sumMin, maxEntries)
	}
	share := (uint64(maxEntries) - sumMin) / max(uint64(len(tables)), 1)
	out := appendU32(nil, n)
	for _, t := range tables {
		hi := t.lo + share
		if t.hasMax && t.hi < hi {
			hi = t.hi
		}
		out = append(out, t.ref...)
		out = append(out, 1)
		out = appendU32(out, uint32(t.lo))
		out = appendU32(out, uint32(hi))
	}
	return out, nil
}

// globalsAdded are the indices of the appended globals, and whether the
// module has a memory for $yield to grow by 0 pages (a plugin without one is
// refused by validation anyway).
type globalsAdded struct {
	flag, countdown, stack uint32
	memory                 bool
}

// appendItems returns a vector section payload with count+added entries:
// the old ones, then items (the encoding of the added entries).
func appendItems(payload []byte, count, added uint32, items []byte) []byte {
	p := appendU32(nil, count+added)
	p = append(p, payload[countLen(payload):]...)
	return append(p, items...)
}

// appendGlobals adds the interrupt flag, (global (mut i32) (i32.const 0)),
// the countdown, (global (mut i32) (i32.const checkPeriod)), and the stack
// budget, (global (mut i32) (i32.const DefaultStackLimit)), which the host
// sets to Options.StackLimit at instantiation.
func appendGlobals(payload []byte, count uint32) []byte {
	p := appendU32(nil, count+3)
	p = append(p, payload[countLen(payload):]...)
	p = append(p, 0x7F, 0x01, 0x41, 0x00, 0x0B)
	p = append(p, 0x7F, 0x01, 0x41)
	p = appendS32(p, checkPeriod)
	p = append(p, 0x0B)
	p = append(p, 0x7F, 0x01, 0x41)
	p = appendS32(p, DefaultStackLimit)
	return append(p, 0x0B)
}

// appendYield adds the body of $yield to a code section payload:
//
//	global.get $flag  if  unreachable  end
//	i32.const 0  memory.grow 0  drop
//	i32.const checkPeriod  global.set $countdown
func appendYield(payload []byte, count uint32, g globalsAdded) []byte {
	body := []byte{0x00, 0x23} // no locals; global.get
	body = appendU32(body, g.flag)
	body = append(body, 0x04, 0x40, 0x00, 0x0B)
	if g.memory {
		body = append(body, 0x41, 0x00, 0x40, 0x00, 0x1A)
	}
	body = append(body, 0x41)
	body = appendS32(body, checkPeriod)
	body = append(body, 0x24)
	body = appendU32(body, g.countdown)
	body = append(body, 0x0B)
	item := appendU32(nil, uint32(len(body)))
	return appendItems(payload, count, 1, append(item, body...))
}

// extendExports adds the exports of the interrupt flag, the countdown and
// the stack budget (globals flag, flag+1, flag+2), of the start function
// and of the globals snap (exportGlobal + k for snap[k]) to an export
// section payload, rejecting reserved names.
func extendExports(payload []byte, flag uint32, startFunc int64, snap []uint32) ([]byte, []wasmExport, error) {
	pr := reader{b: payload}
	count := pr.u32()
	var exps []wasmExport
	for i := uint32(0); i < count && pr.err == nil; i++ {
		var e wasmExport
		e.Name = pr.name()
		e.Kind = pr.byte()
		e.Index = pr.u32()
		if pr.err == nil && strings.HasPrefix(e.Name, reservedExportPrefix) {
			return nil, nil, fmt.Errorf("export name %q uses the reserved prefix %q", e.Name, reservedExportPrefix)
		}
		exps = append(exps, e)
	}
	if pr.err != nil {
		return nil, nil, pr.err
	}
	if pr.pos != len(payload) {
		return nil, nil, errors.New("trailing bytes")
	}
	added := uint32(3 + len(snap))
	if startFunc >= 0 {
		added++
	}
	p := appendU32(nil, count+added)
	p = append(p, payload[countLen(payload):]...)
	for k, name := range []string{exportInterrupt, exportCountdown, exportStack} {
		p = appendName(p, name)
		p = append(p, 3) // global
		p = appendU32(p, flag+uint32(k))
	}
	if startFunc >= 0 {
		p = appendName(p, exportStart)
		p = append(p, 0) // func
		p = appendU32(p, uint32(startFunc))
	}
	for k, idx := range snap {
		p = appendName(p, exportGlobalName(k))
		p = append(p, 3) // global
		p = appendU32(p, idx)
	}
	return p, exps, nil
}

func countLen(payload []byte) int {
	pr := reader{b: payload}
	pr.u32()
	return pr.pos
}

func parseImports(payload []byte) ([]wasmImport, error) {
	r := reader{b: payload}
	count := r.u32()
	var imps []wasmImport
	for i := uint32(0); i < count && r.err == nil; i++ {
		var im wasmImport
		im.Module = r.name()
		im.Name = r.name()
		im.Kind = r.byte()
		switch im.Kind {
		case 0: // func: type index
			r.u32()
		case 1: // table: reftype, limits
			r.valType()
			r.limits()
		case 2: // memory: limits
			r.limits()
		case 3: // global: valtype, mut
			r.valType()
			r.byte()
		case 4: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			return nil, fmt.Errorf("import %d: unknown kind %d", i, im.Kind)
		}
		imps = append(imps, im)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(payload) {
		return nil, errors.New("trailing bytes")
	}
	return imps, nil
}

// bodyLimits are the first indices the original code may not name: the
// appended globals and function.
type bodyLimits struct{ globals, funcs uint32 }

// codeRewrite instruments the code section.
type codeRewrite struct {
	lim       ModuleLimits
	types     []funcType
	funcTypes []uint32
	g         globalsAdded
	yield     uint32
	imported  uint32 // imported functions (host functions, which never call back)
	bodyLim   bodyLimits
	// Block types of more than one result need a type of their own: extra
	// maps a result encoding to its new type index (from firstNew), and
	// extraTypes holds the encoded new types in index order.
	extra      map[string]uint32
	extraTypes []byte
	firstNew   uint32
	loops      int
	bulk       int
	free       int // functions left out of the stack accounting
	// tableWrites is set when a body has an instruction that changes a
	// table (the module cannot be snapshotted).
	tableWrites bool
	// The first pass (analyzing) fills callees (every body's direct
	// callees, as indices of defined functions; body f's are
	// callees[callStart[f]:callStart[f+1]]), indirect (the body makes an
	// indirect call) and costs (frameCost); stackHeights then decides
	// accounted for the second.
	analyzing bool
	callees   []uint32
	callStart []int
	indirect  []bool
	costs     []int32
	accounted []bool
	exit      []byte // scratch: one body's stack refund
	rest      []byte // scratch: one body's instructions
	returns   []int  // scratch: offsets in rest of the body's return instructions
}

// section rewrites the code section payload: see the top of this file.
func (c *codeRewrite) section(payload []byte) ([]byte, int, error) {
	// Two passes over the bodies: the first finds each function's direct
	// callees (to decide which need the stack accounting), the second
	// rewrites.
	n := len(c.funcTypes)
	c.callees = c.callees[:0]
	c.callStart = make([]int, n+1)
	c.indirect = make([]bool, n)
	c.costs = make([]int32, n)
	c.analyzing = true
	if _, _, err := c.walk(payload); err != nil {
		return nil, 0, err
	}
	c.callStart[n] = len(c.callees)
	c.accounted = c.stackHeights()
	c.analyzing = false
	c.loops, c.bulk, c.free = 0, 0, 0
	for _, a := range c.accounted {
		if !a {
			c.free++
		}
	}
	return c.walk(payload)
}

// walk runs body on every function body of the code section payload.
func (c *codeRewrite) walk(payload []byte) ([]byte, int, error) {
	r := reader{b: payload}
	count := r.u32()
	if r.err != nil {
		return nil, 0, r.err
	}
	if uint64(count) != uint64(len(c.funcTypes)) {
		return nil, 0, fmt.Errorf("%d bodies, function section %d", count, len(c.funcTypes))
	}
	var out []byte
	if !c.analyzing {
		out = make([]byte, 0, len(payload)+len(payload)/4+64)
		out = appendU32(out, count)
	}
	var body []byte
	for f := uint32(0); f < count; f++ {
		size := r.u32()
		if r.err != nil {
			return nil, 0, fmt.Errorf("function %d: %w", f, r.err)
		}
		if uint64(size) > uint64(len(r.b)-r.pos) {
			return nil, 0, fmt.Errorf("function %d: body size %d past the end of the section (truncated?)", f, size)
		}
		if uint64(size) > uint64(c.lim.MaxFunctionSize) {
			return nil, 0, overLimit("function body %d is %d bytes, over the limit of %d (MaxFunctionSize)", f, size, c.lim.MaxFunctionSize)
		}
		src := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		var err error
		body, err = c.body(body[:0], src, f)
		if err != nil {
			var ol *errOverLimit
			if errors.As(err, &ol) {
				return nil, 0, err
			}
			return nil, 0, fmt.Errorf("function body %d: %w", f, err)
		}
		if !c.analyzing {
			out = appendU32(out, uint32(len(body)))
			out = append(out, body...)
		}
	}
	if r.pos != len(payload) {
		return nil, 0, errors.New("trailing bytes after the last function body")
	}
	return out, int(count), nil
}

// stackHeights decides which functions need the stack accounting. The
// height of a function is the most stack a call of it can use: its own
// frame cost plus the greatest height of its direct callees. It is unbounded
// for a function that makes an indirect call or can reach a cycle of
// calls (recursion). A function of bounded height at most freeHeight is left
// out of the accounting: whenever it runs, it and everything it calls sit
// on top of the last accounted frame within freeHeight, so the stack stays
// within the budget plus freeHeight, and the many small functions that
// call only such functions (leaves first of all) pay nothing.
func (c *codeRewrite) stackHeights() []bool {
	const (
		unknown  = 0
		visiting = -1
		infinite = math.MaxInt64
	)
	n := len(c.funcTypes)
	heights := make([]int64, n)
	var height func(f uint32) int64
	height = func(f uint32) int64 {
		switch h := heights[f]; h {
		case visiting:
			return infinite // a cycle: recursion
		case unknown:
		default:
			return h
		}
		heights[f] = visiting
		h := int64(c.costs[f])
		if c.indirect[f] {
			h = infinite
		}
		for _, g := range c.callees[c.callStart[f]:c.callStart[f+1]] {
			if h == infinite {
				break
			}
			if gh := height(g); gh == infinite {
				h = infinite
			} else {
				h = max(h, int64(c.costs[f])+gh)
			}
		}
		heights[f] = h
		return h
	}
	accounted := make([]bool, n)
	for f := range n {
		accounted[f] = height(uint32(f)) > freeHeight
	}
	return accounted
}

// Stack accounting. Each function charges frameCost bytes against the
// instance's stack budget (the exported global exportStack) on entry and
// gives them back on every normal exit; a call that would take the budget
// below zero traps, and the failure is classified StackLimit. A trap
// discards the instance, so a budget left unbalanced by one is never reused.
//
// frameCost over-approximates what wazero's compiler puts on its stack for
// one frame: a fixed part, 16 bytes per parameter and local (8 measured per
// i64 local, 16 for v128), and 4 bytes per byte of body for the values the
// body can keep alive across a call (each new value takes an instruction of
// at least 2 bytes, and a spill slot of 8 bytes). The measurements are in
// RATIONALE.md ("The sandbox's bounds").
const (
	freeHeight    = 64 << 10 // the most stack a call left out of the accounting can use
	frameFixed    = 64
	framePerLocal = 16
	framePerByte  = 4
	maxFrameCost  = 1 << 30
)

func frameCost(locals uint64, bodySize int) int32 {
	c := frameFixed + framePerLocal*locals + framePerByte*uint64(bodySize)
	return int32(min(c, maxFrameCost))
}

// body appends the instrumented copy of function body f to dst (a function
// left out of the stack accounting has only the locals, the countdown check
// and the instructions). In the analyzing pass it only records f's calls.
//
//	locals + one i32 scratch local
//	countdown check
//	stack -= cost; if stack < 0 then unreachable
//	block (result ...)            ;; a branch to the function's label lands here
//	  original instructions, a check at each loop head, a weighted check
//	  before each bulk instruction, "stack += cost" before each return
//	end                           ;; the body's own end
//	stack += cost
//	end
func (c *codeRewrite) body(dst, src []byte, f uint32) ([]byte, error) {
	t := c.funcTypes[f]
	if uint64(t) >= uint64(len(c.types)) {
		return nil, fmt.Errorf("type index %d out of range", t)
	}
	ft := c.types[t]
	r := reader{b: src}
	groups := r.u32()
	locals := uint64(ft.params)
	for i := uint32(0); i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		r.valType()
		if locals > uint64(c.lim.MaxFunctionLocals) {
			return nil, overLimit("function body %d has %d parameters and locals or more, over the limit of %d (MaxFunctionLocals)", f, locals, c.lim.MaxFunctionLocals)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	localsEnd := r.pos
	scratch := uint32(locals) // index of the added scratch local
	cost := frameCost(locals+1, len(src))
	exit := append(c.exit[:0], 0x23) // global.get $stack
	exit = appendU32(exit, c.g.stack)
	exit = append(exit, 0x41) // i32.const cost
	exit = appendS32(exit, cost)
	exit = append(exit, 0x6A, 0x24) // i32.add; global.set $stack
	exit = appendU32(exit, c.g.stack)
	c.exit = exit

	rest := c.rest[:0]
	returns := c.returns[:0]
	if c.analyzing {
		c.callStart[f] = len(c.callees)
	}
	indirect := false
	depth, bulk := 0, 0
	copied := r.pos
	for r.pos < len(src) {
		at := r.pos
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06: // block, loop, if, try
			r.blockType()
			if depth++; depth > c.lim.MaxNestingDepth {
				return nil, overLimit("function body %d nests blocks %d deep, over the limit of %d (MaxNestingDepth)", f, depth, c.lim.MaxNestingDepth)
			}
			if op == 0x03 && r.err == nil {
				rest = append(rest, src[copied:r.pos]...)
				rest = c.appendCheck(rest, scratch)
				copied = r.pos
				c.loops++
			}
		case op == 0x1F: // try_table
			r.skipImmediates(op)
			if depth++; depth > c.lim.MaxNestingDepth {
				return nil, overLimit("function body %d nests blocks %d deep, over the limit of %d (MaxNestingDepth)", f, depth, c.lim.MaxNestingDepth)
			}
		case op == 0x0B: // end
			depth--
		case op == 0x0F: // return
			rest = append(rest, src[copied:at]...)
			returns = append(returns, len(rest))
			copied = at
		case op == 0x11 || op == 0x13 || op == 0x14 || op == 0x15: // call_indirect, return_call_indirect, call_ref, return_call_ref
			indirect = true
			r.skipImmediates(op)
		case op == 0x23 || op == 0x24: // global.get, global.set
			idx := r.u32()
			if r.err == nil && idx >= c.bodyLim.globals {
				return nil, fmt.Errorf("global index %d out of range at offset %d", idx, r.pos)
			}
		case op == 0x10 || op == 0x12 || op == 0xD2: // call, return_call, ref.func
			idx := r.u32()
			if r.err == nil && idx >= c.bodyLim.funcs {
				return nil, fmt.Errorf("function index %d out of range at offset %d", idx, r.pos)
			}
			if c.analyzing && op != 0xD2 && idx >= c.imported && r.err == nil {
				c.callees = append(c.callees, idx-c.imported)
			}
		case op == 0xFC:
			sub := r.peekU32()
			switch sub {
			case 8, 10, 11, 12, 14, 15, 17: // memory.init/copy/fill, table.init/copy/grow/fill
				rest = append(rest, src[copied:at]...)
				rest = c.appendBulkCheck(rest, scratch)
				copied = at
				bulk++
			}
			if sub == 12 || sub == 14 || sub == 15 || sub == 17 {
				c.tableWrites = true
			}
			r.skipImmediates(op)
		case op == 0x26: // table.set
			c.tableWrites = true
			r.skipImmediates(op)
		default:
			r.skipImmediates(op)
		}
		if r.err != nil {
			return nil, fmt.Errorf("instruction at offset %d: %w", r.pos, r.err)
		}
	}
	rest = append(rest, src[copied:]...)
	c.rest, c.returns = rest, returns
	c.bulk += bulk
	if c.analyzing {
		c.indirect[f], c.costs[f] = indirect, cost
		return dst, nil
	}
	accounted := c.accounted[f]

	// Locals, with the scratch local.
	dst = appendU32(dst, groups+1)
	dst = append(dst, src[countLen(src):localsEnd]...)
	dst = append(dst, 1, 0x7F) // one i32
	dst = c.appendCheck(dst, scratch)
	if !accounted {
		return append(dst, rest...), nil
	}
	// global.get $stack; i32.const cost; i32.sub; local.tee $scratch;
	// global.set $stack; local.get $scratch; i32.const 0; i32.lt_s;
	// if unreachable end
	dst = append(dst, 0x23)
	dst = appendU32(dst, c.g.stack)
	dst = append(dst, 0x41)
	dst = appendS32(dst, cost)
	dst = append(dst, 0x6B, 0x22)
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x24)
	dst = appendU32(dst, c.g.stack)
	dst = append(dst, 0x20)
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x41, 0x00, 0x48, 0x04, 0x40, 0x00, 0x0B)
	dst = append(dst, 0x02) // block with the function's results
	dst = c.appendBlockType(dst, ft)
	from := 0
	for _, at := range returns {
		dst = append(dst, rest[from:at]...)
		dst = append(dst, exit...)
		from = at
	}
	dst = append(dst, rest[from:]...)
	dst = append(dst, exit...)
	return append(dst, 0x0B), nil
}

// appendBlockType appends the block type of a block with ft's results and
// no parameters.
func (c *codeRewrite) appendBlockType(dst []byte, ft funcType) []byte {
	switch ft.nresults {
	case 0:
		return append(dst, 0x40)
	case 1:
		return append(dst, ft.results...)
	}
	idx, ok := c.extra[string(ft.results)]
	if !ok {
		idx = c.firstNew + uint32(len(c.extra))
		c.extra[string(ft.results)] = idx
		c.extraTypes = append(c.extraTypes, 0x60, 0) // no params
		c.extraTypes = appendU32(c.extraTypes, ft.nresults)
		c.extraTypes = append(c.extraTypes, ft.results...)
	}
	return appendS32(dst, int32(idx))
}

// appendCheck appends the countdown check of a function entry or loop head:
//
//	global.get $countdown  i32.const 1  i32.sub  local.tee $scratch
//	global.set $countdown  local.get $scratch  i32.eqz  if  call $yield  end
//
// (the scratch local saves reading back the global just stored).
func (c *codeRewrite) appendCheck(dst []byte, scratch uint32) []byte {
	dst = append(dst, 0x23)
	dst = appendU32(dst, c.g.countdown)
	dst = append(dst, 0x41, 0x01, 0x6B, 0x22)
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x24)
	dst = appendU32(dst, c.g.countdown)
	dst = append(dst, 0x20)
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x45, 0x04, 0x40, 0x10)
	dst = appendU32(dst, c.yield)
	return append(dst, 0x0B)
}

// appendBulkCheck appends the check placed before a bulk instruction, whose
// last operand (the count n, an i32) is on top of the stack:
//
//	local.tee $scratch
//	countdown -= 1 + n>>bulkShift
//	if countdown < 1 then call $yield
//
// so a bulk instruction costs the countdown in proportion to its work, and
// a run of huge ones reaches $yield (an interrupt point and a Go preemption
// point) as often as a loop would.
func (c *codeRewrite) appendBulkCheck(dst []byte, scratch uint32) []byte {
	dst = append(dst, 0x22) // local.tee
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x23) // global.get $countdown
	dst = appendU32(dst, c.g.countdown)
	dst = append(dst, 0x20) // local.get $scratch
	dst = appendU32(dst, scratch)
	dst = append(dst, 0x41, bulkShift, 0x76, 0x6B) // i32.const bulkShift; i32.shr_u; i32.sub
	dst = append(dst, 0x41, 0x01, 0x6B, 0x24)      // i32.const 1; i32.sub; global.set
	dst = appendU32(dst, c.g.countdown)
	dst = append(dst, 0x23) // global.get $countdown
	dst = appendU32(dst, c.g.countdown)
	dst = append(dst, 0x41, 0x01, 0x48, 0x04, 0x40, 0x10) // i32.const 1; i32.lt_s; if; call $yield
	dst = appendU32(dst, c.yield)
	return append(dst, 0x0B)
}

// bulkShift: a bulk instruction over n bytes (or table entries) counts as
// 1 + n>>bulkShift checks, one per KiB.
const bulkShift = 10

// reader decodes the Wasm binary encoding. The first error sticks; reads
// after it return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end (truncated module?)")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.b)
}

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail(errEOF)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) skip(n int) {
	if r.err != nil || len(r.b)-r.pos < n {
		r.fail(errEOF)
		return
	}
	r.pos += n
}

// leb reads an unsigned or signed LEB128 of at most maxBytes bytes and
// returns its low 64 bits unsigned (enough for indices and to skip).
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	var shift uint
	for i := 0; i < maxBytes; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7F) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 too long"))
	return 0
}

func (r *reader) u32() uint32 {
	v := r.leb(5)
	if v > 0xFFFFFFFF {
		r.fail(errors.New("u32 out of range"))
		return 0
	}
	return uint32(v)
}

// peekU32 reads a u32 without consuming it (0 on error, which the next
// real read reports).
func (r *reader) peekU32() uint32 {
	save := *r
	v := r.u32()
	*r = save
	return v
}

func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail(errEOF)
		return ""
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s
}

// valType skips a value type: one byte, or (ref null? ht) with a heap type.
func (r *reader) valType() {
	c := r.byte()
	if c == 0x63 || c == 0x64 {
		r.leb(5) // heap type, s33
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index.
func (r *reader) blockType() {
	if r.err == nil && r.pos < len(r.b) && (r.b[r.pos] == 0x63 || r.b[r.pos] == 0x64) {
		r.valType()
		return
	}
	r.leb(5)
}

func (r *reader) limits() {
	flags := r.byte()
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: memory index follows
		r.u32()
	}
	r.leb(10)
}

// skipImmediates skips the immediates of the instruction whose opcode byte op
// was just read. It covers the core spec 2.0 plus exception handling, tail
// calls, typed function references and threads; anything else is an error.
func (r *reader) skipImmediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == 0x0A, op == 0x0B, op == 0x0F,
		op == 0x19, op == 0x1A, op == 0x1B, op == 0xD1, op == 0xD4,
		op >= 0x45 && op <= 0xC4:
		// no immediates
	case op == 0x02, op == 0x04, op == 0x06: // block, if, try
		r.blockType()
	case op == 0x07, op == 0x08, op == 0x09, op == 0x0C, op == 0x0D,
		op == 0x14, op == 0x15, op == 0x18,
		op >= 0x20 && op <= 0x22, op == 0x25, op == 0x26,
		op == 0x3F, op == 0x40, op == 0xD5, op == 0xD6:
		r.u32()
	case op == 0x0E: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1C: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valType()
		}
	case op == 0x1F: // try_table
		r.blockType()
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch r.byte() {
			case 0, 1: // catch, catch_ref: tag, label
				r.u32()
				r.u32()
			case 2, 3: // catch_all, catch_all_ref: label
				r.u32()
			default:
				r.fail(errors.New("unknown catch clause"))
			}
		}
	case op >= 0x28 && op <= 0x3E:
		r.memarg()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.skip(4)
	case op == 0x44:
		r.skip(8)
	case op == 0xD0: // ref.null heaptype
		r.leb(5)
	case op == 0xFC:
		switch sub := r.u32(); {
		case sub <= 7: // trunc_sat
		case sub == 8, sub == 10, sub == 12, sub == 14: // two indices
			r.u32()
			r.u32()
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			r.u32()
		default:
			r.fail(fmt.Errorf("unknown opcode 0xFC %d", sub))
		}
	case op == 0xFD:
		switch sub := r.u32(); {
		case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
			r.memarg()
		case sub == 12, sub == 13: // v128.const, i8x16.shuffle
			r.skip(16)
		case sub >= 21 && sub <= 34: // extract/replace lane
			r.skip(1)
		case sub >= 84 && sub <= 91: // load/store lane
			r.memarg()
			r.skip(1)
		case sub <= 0x113: // every other SIMD (and relaxed SIMD) op
		default:
			r.fail(fmt.Errorf("unknown opcode 0xFD %d", sub))
		}
	case op == 0xFE:
		switch sub := r.u32(); {
		case sub == 3: // atomic.fence
			r.skip(1)
		case sub <= 2, sub >= 0x10 && sub <= 0x4E:
			r.memarg()
		default:
			r.fail(fmt.Errorf("unknown opcode 0xFE %d", sub))
		}
	default:
		r.fail(fmt.Errorf("unknown opcode 0x%02X", op))
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
