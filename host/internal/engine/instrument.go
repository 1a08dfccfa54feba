package engine

import (
	"bytes"
	"errors"
	"fmt"
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
//   - appends two mutable i32 globals: the interrupt flag (0) and a
//     countdown (checkPeriod), exported as exportInterrupt and
//     exportCountdown; to interrupt, the watchdog sets the flag to 1 and the
//     countdown to 1 (so the next check calls $yield);
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
//   - moves the start function (if any) to an export (exportStart) so the
//     host runs it under the watchdog instead of inside InstantiateModule;
//   - drops DWARF custom sections (their code offsets would be stale);
//   - rejects code that names the added globals or function (an index past
//     the original ones), so a plugin cannot clear the flag or the countdown.
//
// Appended items take the next free index in each index space, so every
// existing type, function, global, table and memory index is unchanged, and
// names, exports, tables and element segments stay valid.

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
)

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
	funcs    int          // functions with a body (instrumented)
	loops    int          // loop heads instrumented
}

type section struct {
	id      byte
	payload []byte
}

// instrument rewrites src as described at the top of this file. It returns
// errNotWasm for bytes that are not a core Wasm module and a descriptive
// error for a malformed or truncated one.
func instrument(src []byte) (*instrumented, error) {
	if len(src) < 8 || !bytes.Equal(src[:4], []byte("\x00asm")) {
		return nil, errNotWasm
	}
	if !bytes.Equal(src[4:8], []byte{1, 0, 0, 0}) {
		if src[6] != 0 || src[7] != 0 { // layer != 0: a component
			return nil, fmt.Errorf("%w: a component (version %x), not a core module", errNotWasm, src[4:8])
		}
		return nil, fmt.Errorf("unsupported Wasm binary version %x", src[4:8])
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

	out := &instrumented{}
	var importedGlobals, definedGlobals, importedFuncs, definedFuncs, types uint32
	startFunc := int64(-1)
	hasMemory := false
	for _, s := range secs {
		pr := reader{b: s.payload}
		switch s.id {
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
				case 2:
					hasMemory = true
				case 3:
					importedGlobals++
				}
			}
		case secType:
			types = pr.u32()
		case secFunction:
			definedFuncs = pr.u32()
		case secGlobal:
			definedGlobals = pr.u32()
		case secStart:
			startFunc = int64(pr.u32())
		case secMemory:
			hasMemory = pr.u32() > 0
		}
		if pr.err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, pr.err)
		}
	}
	g := globalsAdded{flag: importedGlobals + definedGlobals, memory: hasMemory}
	g.countdown = g.flag + 1
	yield := importedFuncs + definedFuncs         // index of the appended function
	check := appendU32([]byte{0x23}, g.countdown) // global.get $countdown
	check = append(check, 0x41, 0x01, 0x6B, 0x24) // i32.const 1; i32.sub; global.set
	check = appendU32(check, g.countdown)
	check = append(check, 0x23) // global.get $countdown
	check = appendU32(check, g.countdown)
	check = append(check, 0x45, 0x04, 0x40, 0x10) // i32.eqz; if; call $yield
	check = appendU32(check, yield)
	check = append(check, 0x0B) // end
	limits := bodyLimits{globals: g.flag, funcs: yield}

	// Each appended item goes into its section, which is created (in
	// order) when the module has none.
	want := map[byte][]byte{
		secType:     {1, 0x60, 0, 0},
		secFunction: appendU32([]byte{1}, types),
		secGlobal:   appendGlobals([]byte{0}, 0),
		secCode:     appendYield([]byte{0}, 0, g),
	}
	want[secExport], _, _ = extendExports([]byte{0}, g.flag, startFunc)
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
			s.payload = appendCount(s.payload, types, 0x60, 0, 0) // () -> ()
		case secFunction:
			s.payload = appendCount(s.payload, definedFuncs, appendU32(nil, types)...)
		case secGlobal:
			s.payload = appendGlobals(s.payload, definedGlobals)
		case secExport:
			p, exps, err := extendExports(s.payload, g.flag, startFunc)
			if err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
			s.payload, out.exports = p, exps
		case secStart:
			out.hasStart = true
			continue // now an export the host calls
		case secCode:
			p, funcs, loops, err := instrumentCode(s.payload, check, limits)
			if err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			if uint32(funcs) != definedFuncs {
				return nil, fmt.Errorf("code section has %d bodies, function section %d", funcs, definedFuncs)
			}
			s.payload = appendYield(p, definedFuncs, g)
			out.funcs, out.loops = funcs, loops
		}
		delete(want, s.id)
		add(s)
	}
	if definedFuncs != 0 && want[secCode] != nil {
		return nil, fmt.Errorf("function section has %d entries but there is no code section", definedFuncs)
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

// globalsAdded are the indices of the appended globals, and whether the
// module has a memory for $yield to grow by 0 pages (a plugin without one is
// refused by validation anyway).
type globalsAdded struct {
	flag, countdown uint32
	memory          bool
}

// appendCount returns a vector section payload with count+1 entries: the
// old ones and item.
func appendCount(payload []byte, count uint32, item ...byte) []byte {
	p := appendU32(nil, count+1)
	p = append(p, payload[countLen(payload):]...)
	return append(p, item...)
}

// appendGlobals adds the interrupt flag, (global (mut i32) (i32.const 0)),
// and the countdown, (global (mut i32) (i32.const checkPeriod)).
func appendGlobals(payload []byte, count uint32) []byte {
	p := appendU32(nil, count+2)
	p = append(p, payload[countLen(payload):]...)
	p = append(p, 0x7F, 0x01, 0x41, 0x00, 0x0B)
	p = append(p, 0x7F, 0x01, 0x41)
	p = appendS32(p, checkPeriod)
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
	return appendCount(payload, count, append(item, body...)...)
}

// extendExports adds the exports of the interrupt flag and the countdown
// (global flag and flag+1) and of the start function to an export section
// payload, rejecting reserved names.
func extendExports(payload []byte, flag uint32, startFunc int64) ([]byte, []wasmExport, error) {
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
	added := uint32(2)
	if startFunc >= 0 {
		added++
	}
	p := appendU32(nil, count+added)
	p = append(p, payload[countLen(payload):]...)
	p = appendName(p, exportInterrupt)
	p = append(p, 3) // global
	p = appendU32(p, flag)
	p = appendName(p, exportCountdown)
	p = append(p, 3) // global
	p = appendU32(p, flag+1)
	if startFunc >= 0 {
		p = appendName(p, exportStart)
		p = append(p, 0) // func
		p = appendU32(p, uint32(startFunc))
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

// instrumentCode rewrites the code section payload: a check at each function
// entry and loop head.
func instrumentCode(payload, check []byte, lim bodyLimits) ([]byte, int, int, error) {
	r := reader{b: payload}
	count := r.u32()
	if r.err != nil {
		return nil, 0, 0, r.err
	}
	out := make([]byte, 0, len(payload)+len(payload)/8+64)
	out = appendU32(out, count)
	var body []byte
	loops := 0
	for f := uint32(0); f < count; f++ {
		size := r.u32()
		if r.err != nil {
			return nil, 0, 0, fmt.Errorf("function %d: %w", f, r.err)
		}
		if uint64(size) > uint64(len(r.b)-r.pos) {
			return nil, 0, 0, fmt.Errorf("function %d: body size %d past the end of the section (truncated?)", f, size)
		}
		src := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		var n int
		var err error
		body, n, err = instrumentBody(body[:0], src, check, lim)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("function body %d: %w", f, err)
		}
		loops += n
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.pos != len(payload) {
		return nil, 0, 0, errors.New("trailing bytes after the last function body")
	}
	return out, int(count), loops, nil
}

// instrumentBody appends the instrumented copy of one function body to dst.
func instrumentBody(dst, src, check []byte, lim bodyLimits) ([]byte, int, error) {
	r := reader{b: src}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("locals: %w", r.err)
	}
	dst = append(dst, src[:r.pos]...)
	dst = append(dst, check...)
	loops := 0
	copied := r.pos
	for r.pos < len(src) {
		op := r.byte()
		switch {
		case op == 0x03: // loop blocktype
			r.blockType()
			if r.err != nil {
				break
			}
			dst = append(dst, src[copied:r.pos]...)
			dst = append(dst, check...)
			copied = r.pos
			loops++
		case op == 0x23 || op == 0x24: // global.get, global.set
			idx := r.u32()
			if r.err == nil && idx >= lim.globals {
				return nil, 0, fmt.Errorf("global index %d out of range at offset %d", idx, r.pos)
			}
		case op == 0x10 || op == 0x12 || op == 0xD2: // call, return_call, ref.func
			idx := r.u32()
			if r.err == nil && idx >= lim.funcs {
				return nil, 0, fmt.Errorf("function index %d out of range at offset %d", idx, r.pos)
			}
		default:
			r.skipImmediates(op)
		}
		if r.err != nil {
			return nil, 0, fmt.Errorf("instruction at offset %d: %w", r.pos, r.err)
		}
	}
	dst = append(dst, src[copied:]...)
	return dst, loops, nil
}

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
