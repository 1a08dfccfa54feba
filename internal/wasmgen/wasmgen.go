// Package wasmgen builds WebAssembly modules of a chosen shape for tests
// that attack the cost of compiling: each dimension the engine's shape
// limits bound on its own (functions, locals, body size, nesting, ...) and
// those they do not (types and their parameters, br_table targets, data
// and element segments, exports, imports, names) is a field of Shape, so a
// test or a fuzz target can build the product of several at their limits.
//
// Every module it builds is valid by the core spec 2.0 (so wazero compiles
// it rather than refusing it early); with Shape.Plugin it is also a
// wasmstream plugin of ABI version 1 that does nothing, so it passes the
// engine's validation and instantiates.
package wasmgen

import (
	"fmt"
	"math/bits"
	"strings"
)

// Shape is the shape of a generated module. Zero fields add nothing.
type Shape struct {
	// Funcs defined functions of type Params i64 parameters -> (), each
	// with Locals i64 locals and a body of the instructions below.
	Funcs  int
	Params int
	Locals int
	// Nesting blocks nested in each body; inside the innermost, BrTable
	// targets of one br_table (cycling over the enclosing labels), and Ops
	// straight-line instructions of kind OpKind.
	Nesting int
	BrTable int
	Ops     int
	OpKind  OpKind
	// Live makes the Locals live across the Ops: each is set from a
	// global (an opaque value, which a compiler cannot rematerialize)
	// before them and added up into that global after them.
	Live bool
	// Loops nested loops around the innermost block's instructions (each a
	// loop head, which the engine instruments), each run once.
	Loops int
	// Types more function types, each of TypeParams i64 parameters and
	// TypeResults i64 results, all distinct (see funcType).
	Types       int
	TypeParams  int
	TypeResults int
	// DataSegments passive data segments of DataBytes bytes each.
	DataSegments int
	DataBytes    int
	// ElemSegments passive funcref element segments of ElemEntries
	// function indices each.
	ElemSegments int
	ElemEntries  int
	// Exports more exports of function 0 (named "e0", "e1", ...).
	Exports int
	// Imports function imports of () -> (), "wasi_snapshot_preview1"
	// "sched_yield" repeated (legal for a plugin, and never linked at
	// compile time).
	Imports int
	// Globals mutable i64 globals.
	Globals int
	// Names is a "name" custom section naming every function and Names
	// locals of each.
	Names int
	// Plugin adds a memory of one page and the ABI's exports (memory,
	// wasmstream_abi_version_1, wasmstream_input, wasmstream_process).
	Plugin bool
}

// OpKind is what Shape.Ops repeats.
type OpKind int

// Kinds of Ops.
const (
	// OpConst is i64.const 0; local.set (cycling over the locals; drop
	// without locals): dead stores, which an optimizing compiler removes.
	OpConst OpKind = iota
	// OpCall is call of the first generated function: a side effect
	// that every compiler keeps, with its spills.
	OpCall
	// OpStore is i32.const 0; i64.const 0; i64.store (of the plugin's
	// memory; without Plugin, OpConst): machine code for every one.
	OpStore
	// OpEqz is one i32.eqz per op on a value pushed first and dropped
	// last: one byte per instruction, the densest code.
	OpEqz
	// OpFill is i32.const 0; i32.const 0; i32.const 0; memory.fill (of
	// the plugin's memory; without Plugin, OpConst): a bulk instruction,
	// which the engine precedes with a weighted interrupt check.
	OpFill
	// OpLoop is an empty loop: a loop head, which the engine instruments,
	// after another.
	OpLoop
	// OpBlock is an empty block after another.
	OpBlock
	// OpIf is i32.const 0; if; end after another.
	OpIf
	// OpBrIf is i32.const 0; br_if 0 after another.
	OpBrIf
)

// String is a short form of the shape's non-zero fields, for test names.
func (s Shape) String() string {
	var b strings.Builder
	add := func(name string, v int) {
		if v != 0 {
			fmt.Fprintf(&b, "%s%d ", name, v)
		}
	}
	add("funcs", s.Funcs)
	add("params", s.Params)
	add("locals", s.Locals)
	add("nest", s.Nesting)
	add("brtable", s.BrTable)
	add("ops", s.Ops)
	add("opkind", int(s.OpKind))
	add("loops", s.Loops)
	add("types", s.Types)
	add("tparams", s.TypeParams)
	add("tresults", s.TypeResults)
	add("data", s.DataSegments)
	add("databytes", s.DataBytes)
	add("elems", s.ElemSegments)
	add("entries", s.ElemEntries)
	add("exports", s.Exports)
	add("imports", s.Imports)
	add("globals", s.Globals)
	add("names", s.Names)
	if s.Live {
		b.WriteString("live ")
	}
	if s.Plugin {
		b.WriteString("plugin")
	}
	return strings.TrimSpace(b.String())
}

// Value types and opcodes used here.
const (
	i32 = 0x7F
	i64 = 0x7E
	f32 = 0x7D
)

// Module encodes the module of shape s. The sections come in this order:
// type, import, function, memory, global, export, element, data count,
// code, data, custom "name". Function indices: the imports, then the
// plugin's three functions (when Plugin), then the Funcs.
func Module(s Shape) []byte {
	imports := max(s.Imports, 0)
	nplugin := 0
	if s.Plugin {
		nplugin = 3
	}

	// Types: 0 is () -> (), 1 (i32) -> i32, 2 () -> i32 (the imports),
	// 3 the generated functions' (Params i64) -> (), then the Types.
	types := [][]byte{
		{0x60, 0, 0},
		{0x60, 1, i32, 1, i32},
		{0x60, 0, 1, i32},
		funcType(s.Params, 0, 0, 0),
	}
	nbits := bits.Len(uint(max(s.Types, 1) - 1))
	for k := range max(s.Types, 0) {
		types = append(types, funcType(s.TypeParams, s.TypeResults, k, nbits))
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = section(m, 1, vec(types))

	if imports > 0 {
		imp := appendName(nil, "wasi_snapshot_preview1")
		imp = appendName(imp, "sched_yield")
		imp = append(imp, 0, 2) // func () -> i32
		m = section(m, 2, vec(repeat(imp, imports)))
	}

	var funcs [][]byte
	for range nplugin {
		funcs = append(funcs, nil)
	}
	if s.Plugin {
		funcs[0] = []byte{0} // marker: () -> ()
		funcs[1] = []byte{1} // input: (i32) -> i32
		funcs[2] = []byte{1} // process: (i32) -> i32
	}
	funcs = append(funcs, repeat([]byte{3}, max(s.Funcs, 0))...)
	if len(funcs) > 0 {
		m = section(m, 3, vec(funcs))
	}
	if s.Plugin {
		m = section(m, 5, vec([][]byte{{0, 1}})) // one memory, min 1 page
	}
	if n := globals(s); n > 0 {
		m = section(m, 6, vec(repeat([]byte{i64, 1, 0x42, 0, 0x0B}, n)))
	}

	var exports [][]byte
	if s.Plugin {
		exports = append(exports, append(appendName(nil, "memory"), 2, 0))
		for k, name := range []string{"wasmstream_abi_version_1", "wasmstream_input", "wasmstream_process"} {
			exports = append(exports, appendU32(append(appendName(nil, name), 0), uint32(imports+k)))
		}
	}
	if s.Exports > 0 && len(funcs)+imports > 0 {
		for k := range s.Exports {
			exports = append(exports, append(appendName(nil, fmt.Sprintf("e%d", k)), 0, 0))
		}
	}
	if len(exports) > 0 {
		m = section(m, 7, vec(exports))
	}

	if s.ElemSegments > 0 && len(funcs)+imports > 0 {
		// Passive, funcref, function indices: flags 1, elemkind 0.
		seg := []byte{1, 0}
		seg = appendU32(seg, uint32(s.ElemEntries))
		for k := range s.ElemEntries {
			seg = appendU32(seg, uint32(k%(len(funcs)+imports)))
		}
		m = section(m, 9, vec(repeat(seg, s.ElemSegments)))
	}
	if s.DataSegments > 0 {
		m = section(m, 12, appendU32(nil, uint32(s.DataSegments)))
	}

	if len(funcs) > 0 {
		var bodies [][]byte
		if s.Plugin {
			bodies = append(bodies,
				body(nil, []byte{0x0B}),
				body(nil, []byte{0x41, 0x00, 0x0B}), // input: address 0
				body(nil, []byte{0x41, 0x00, 0x0B}), // process: OK
			)
		}
		if s.Funcs > 0 {
			bodies = append(bodies, repeat(genBody(s, imports+nplugin), s.Funcs)...)
		}
		m = section(m, 10, vec(bodies))
	}

	if s.DataSegments > 0 {
		seg := []byte{1} // passive
		seg = appendU32(seg, uint32(s.DataBytes))
		seg = append(seg, make([]byte, s.DataBytes)...)
		m = section(m, 11, vec(repeat(seg, s.DataSegments)))
	}

	if s.Names > 0 && len(funcs)+imports > 0 {
		n := len(funcs) + imports
		var fnames, lnames []byte
		fnames = appendU32(fnames, uint32(n))
		lnames = appendU32(lnames, uint32(n))
		for f := range n {
			fnames = appendU32(fnames, uint32(f))
			fnames = appendName(fnames, fmt.Sprintf("f%d", f))
			lnames = appendU32(lnames, uint32(f))
			lnames = appendU32(lnames, uint32(s.Names))
			for l := range s.Names {
				lnames = appendU32(lnames, uint32(l))
				lnames = appendName(lnames, fmt.Sprintf("l%d", l))
			}
		}
		p := appendName(nil, "name")
		p = append(p, 1)
		p = appendU32(p, uint32(len(fnames)))
		p = append(p, fnames...)
		p = append(p, 2)
		p = appendU32(p, uint32(len(lnames)))
		p = append(p, lnames...)
		m = section(m, 0, p)
	}
	return m
}

// BodySize is the size in bytes of the body of each of s.Funcs (its
// code entry, with the size prefix).
func BodySize(s Shape) int {
	return len(genBody(s, max(s.Imports, 0)+3))
}

// funcType encodes a function type of params i64 parameters and results
// i64 results. With bits > 0 it is the k-th of a family of distinct
// types: its first bits parameters spell k in binary (f32 for a one bit),
// added when params is fewer.
func funcType(params, results, k, bits int) []byte {
	ps := make([]byte, max(params, bits, 0))
	for j := range ps {
		ps[j] = i64
		if j < bits && k>>j&1 == 1 {
			ps[j] = f32
		}
	}
	t := []byte{0x60}
	t = appendU32(t, uint32(len(ps)))
	t = append(t, ps...)
	t = appendU32(t, uint32(max(results, 0)))
	for range max(results, 0) {
		t = append(t, i64)
	}
	return t
}

// globals is the number of globals: Shape.Globals, and the one Live needs.
func globals(s Shape) int {
	n := max(s.Globals, 0)
	if s.Live && s.Locals > 0 {
		n++
	}
	return n
}

// appendOps appends the Ops of a body; self is the index of the first
// generated function.
func appendOps(code []byte, s Shape, self int) []byte {
	locals := max(s.Params, 0) + max(s.Locals, 0)
	kind := s.OpKind
	if (kind == OpStore || kind == OpFill) && !s.Plugin || kind == OpCall && s.Params > 0 {
		kind = OpConst
	}
	if kind == OpEqz && s.Ops > 0 {
		code = append(code, 0x41, 0x00) // i32.const 0
	}
	for k := range max(s.Ops, 0) {
		switch kind {
		case OpCall:
			code = append(code, 0x10) // call
			code = appendU32(code, uint32(self))
		case OpStore:
			code = append(code, 0x41, 0x00, 0x42, 0x00, 0x37, 0x03, 0x00) // i32.const 0; i64.const 0; i64.store align=8
		case OpEqz:
			code = append(code, 0x45) // i32.eqz
		case OpLoop:
			code = append(code, 0x03, 0x40, 0x0B)
		case OpBlock:
			code = append(code, 0x02, 0x40, 0x0B)
		case OpIf:
			code = append(code, 0x41, 0x00, 0x04, 0x40, 0x0B)
		case OpBrIf:
			code = append(code, 0x41, 0x00, 0x0D, 0x00)
		case OpFill:
			code = append(code, 0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x0B, 0x00) // memory.fill
		default:
			code = append(code, 0x42, 0x00) // i64.const 0
			if locals > 0 {
				code = append(code, 0x21) // local.set
				code = appendU32(code, uint32(k%locals))
			} else {
				code = append(code, 0x1A) // drop
			}
		}
	}
	if kind == OpEqz && s.Ops > 0 {
		code = append(code, 0x1A) // drop
	}
	return code
}

// genBody is the body of every generated function; self is the index of
// the first generated function.
func genBody(s Shape, self int) []byte {
	var code []byte
	for range max(s.Nesting, 0) {
		code = append(code, 0x02, 0x40) // block
	}
	for range max(s.Loops, 0) {
		code = append(code, 0x03, 0x40) // loop
	}
	live := s.Live && s.Locals > 0
	g := uint32(globals(s) - 1) // Live's global
	for k := range max(s.Locals, 0) {
		if !live {
			break
		}
		code = append(code, 0x23) // global.get
		code = appendU32(code, g)
		code = append(code, 0x21) // local.set
		code = appendU32(code, uint32(max(s.Params, 0)+k))
	}
	code = appendOps(code, s, self)
	if live {
		code = append(code, 0x42, 0x00) // i64.const 0
		for k := range s.Locals {
			code = append(code, 0x20) // local.get
			code = appendU32(code, uint32(max(s.Params, 0)+k))
			code = append(code, 0x7C) // i64.add
		}
		code = append(code, 0x24) // global.set
		code = appendU32(code, g)
	}
	if s.BrTable > 0 {
		labels := max(s.Nesting, 0) + max(s.Loops, 0) + 1 // the function's own label too
		code = append(code, 0x41, 0x00, 0x0E)             // i32.const 0; br_table
		code = appendU32(code, uint32(s.BrTable))
		for k := range s.BrTable {
			code = appendU32(code, uint32(k%labels))
		}
		code = appendU32(code, 0)
	}
	for range max(s.Loops, 0) + max(s.Nesting, 0) {
		code = append(code, 0x0B)
	}
	code = append(code, 0x0B)
	var locs []byte
	if s.Locals > 0 {
		locs = appendU32(locs, 1)
		locs = appendU32(locs, uint32(s.Locals))
		locs = append(locs, i64)
	}
	return body(locs, code)
}

// body encodes a code entry: its size, the locals (nil for none) and the
// instructions.
func body(locals, code []byte) []byte {
	if locals == nil {
		locals = []byte{0}
	}
	b := appendU32(nil, uint32(len(locals)+len(code)))
	b = append(b, locals...)
	return append(b, code...)
}

func repeat(item []byte, n int) [][]byte {
	items := make([][]byte, n)
	for k := range items {
		items[k] = item
	}
	return items
}

func vec(items [][]byte) []byte {
	n := 5
	for _, it := range items {
		n += len(it)
	}
	v := make([]byte, 0, n)
	v = appendU32(v, uint32(len(items)))
	for _, it := range items {
		v = append(v, it...)
	}
	return v
}

func section(m []byte, id byte, payload []byte) []byte {
	m = append(m, id)
	m = appendU32(m, uint32(len(payload)))
	return append(m, payload...)
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

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
