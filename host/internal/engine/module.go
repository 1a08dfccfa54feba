package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
)

// SupportedABIVersions are the ABI versions this host speaks, ascending.
var SupportedABIVersions = []int{abi.Version, abi.VersionBatch}

// Info describes a validated module (what `wasmstream plugin inspect` shows).
type Info struct {
	// ABIVersion is the version the host speaks with the module: the
	// highest version both support.
	ABIVersion int
	// ABIVersions are every version the module declares with a
	// wasmstream_abi_version_N export, ascending.
	ABIVersions []int
	// Size is the length of the module's binary in bytes.
	Size int
	// SHA256 is the hex SHA-256 of the module's binary.
	SHA256 string
	// Exports are the module's exports in binary order (the engine's own
	// instrumentation exports are not listed).
	Exports []Symbol
	// Imports are the module's imports in binary order.
	Imports []Symbol
	// MemoryMinPages is the minimum size of the exported memory in 64 KiB
	// pages; MemoryMaxPages its declared maximum when HasMemoryMax.
	MemoryMinPages uint32
	MemoryMaxPages uint32
	HasMemoryMax   bool
	// HasStart, HasInitialize and HasInit tell which initializers run at
	// instantiation, in this order: the start function, _initialize,
	// wasmstream_init.
	HasStart      bool
	HasInitialize bool
	HasInit       bool
	// HasOnTimer and HasOnCommit tell whether the module exports the time
	// callbacks wasmstream_on_timer and wasmstream_on_commit (OnTimer,
	// OnCommit).
	HasOnTimer  bool
	HasOnCommit bool
	// HasMigrate tells whether the module exports wasmstream_migrate, the
	// state migration from another version (Instance.Migrate).
	HasMigrate bool
	// Batch tells that the host speaks version 2 with the module: it
	// exports wasmstream_batch and takes many calls at once
	// (Instance.ProcessBatch; abi/ABI.md section 10).
	Batch bool
	// ImportsTimerSet, ImportsTimerCancel, ImportsTimeNow and
	// ImportsCommitMark tell which time functions the module imports
	// (abi/ABI.md section 8.2). A module importing any of them needs
	// Binding.Time.
	ImportsTimerSet    bool
	ImportsTimerCancel bool
	ImportsTimeNow     bool
	ImportsCommitMark  bool
	// InstrumentedFunctions and InstrumentedLoops count the interrupt
	// checks the engine inserted (one per function body and loop head).
	InstrumentedFunctions int
	InstrumentedLoops     int
	// Handles are the outputs and stores the module lists in its
	// wasmstream.handles sections (handles.go): Instantiate fails when its
	// Binding lacks one.
	Handles []Handle
	// CompileMemory and CompileTime are the compile budget's estimates of
	// what compiling the module takes (host memory, CPU time), and
	// InstanceMemory of what each instance holds besides its linear memory
	// and tables (ModuleLimits, compilecost.go).
	CompileMemory  int64
	CompileTime    time.Duration
	InstanceMemory int64
}

// UsesTime reports whether the module imports any time function.
func (i Info) UsesTime() bool { return i.timeImport() != "" }

// timeImport names one time function the module imports, or "".
func (i Info) timeImport() string {
	switch {
	case i.ImportsTimerSet:
		return abi.ImportTimerSet
	case i.ImportsTimerCancel:
		return abi.ImportTimerCancel
	case i.ImportsTimeNow:
		return abi.ImportTimeNow
	case i.ImportsCommitMark:
		return abi.ImportCommitMark
	}
	return ""
}

// Symbol is one import or export.
type Symbol struct {
	Module    string // import module; "" for exports
	Name      string
	Kind      string // "func", "memory", "table", "global" or "tag"
	Signature string // functions only, like "(i32, i32) -> i32"
}

// String formats the symbol like "wasmstream.emit: func (i32, i32) -> i32".
func (s Symbol) String() string {
	name := s.Name
	if s.Module != "" {
		name = s.Module + "." + s.Name
	}
	if s.Signature != "" {
		return name + ": " + s.Kind + " " + s.Signature
	}
	return name + ": " + s.Kind
}

// Module is a validated, compiled plugin. Instantiate it once per task.
type Module struct {
	rt        *Runtime
	name      string
	compiled  wazero.CompiledModule
	info      Info
	initFuncs []string // exports to call after instantiation, in order
	// command is a WASI command module (it exports _start and no
	// _initialize), whose language runtime the host never starts: a Go
	// plugin built without -buildmode=c-shared traps in its first export.
	command bool
	// snapshotGlobals is how many mutable globals an instance's snapshot
	// holds; -1: the module is not snapshotted (snapshot.go).
	snapshotGlobals int

	mu     sync.Mutex
	refs   int // live Instances
	closed bool
	snaps  []*snapshot // the instances' snapshots, each shared once
	// snapBytes is the memory snaps hold.
	snapBytes atomic.Int64
}

// Expected signatures of the ABI exports.
const (
	sigMarker     = "() -> ()"
	sigInput      = "(i32) -> i32"
	sigProcess    = "(i32) -> i32"
	sigInitialize = "() -> ()"
	sigInit       = "() -> i32"
	sigOnTimer    = "(i32) -> i32"
	sigOnCommit   = "(i32) -> i32"
	sigBatch      = "(i32) -> i32"
	sigMigrate    = "(i32) -> i32"
)

// Compile validates wasm against the ABI, instruments it and compiles it.
// name identifies the module in errors. Errors are *ModuleError.
func (r *Runtime) Compile(ctx context.Context, name string, wasm []byte) (*Module, error) {
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.compiles.Add(1) // under mu: Close waits for every compile it did not see refused
	}
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("engine: compile %q: %w", name, ErrClosed)
	}
	compiled, ins, info, err := compile(ctx, r.rt, name, wasm, r.limitBytes, r.opts.Module, r.opts.CompileTimeout, r.compiles.Done)
	if err != nil {
		return nil, err
	}
	m := &Module{rt: r, name: name, compiled: compiled, info: info, command: isCommand(info), snapshotGlobals: ins.snapshotGlobals}
	r.modules.Add(1)
	if ins.hasStart {
		m.initFuncs = append(m.initFuncs, exportStart)
	}
	if info.HasInitialize {
		m.initFuncs = append(m.initFuncs, abi.ExportInitialize)
	}
	if info.HasInit {
		m.initFuncs = append(m.initFuncs, abi.ExportInit)
	}
	return m, nil
}

// isCommand reports whether a module is a WASI command: it exports _start
// (which the host does not call) and not _initialize.
func isCommand(info Info) bool {
	start := false
	for _, e := range info.Exports {
		start = start || (e.Name == "_start" && e.Kind == "func")
	}
	return start && !info.HasInitialize
}

// commandHint follows the failure of a command module's initializer: the
// reason, and the fix.
const commandHint = "; the module is a WASI command (it exports _start, not _initialize), so its language runtime " +
	"never started: build a Go plugin with `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`, a C plugin with " +
	"`-mexec-model=reactor`, a Rust plugin as a cdylib"

// Inspect validates wasm exactly as Compile does (against the default memory
// limit, ModuleLimits and CompileTimeout) without a Runtime and without
// instantiating it. It returns when ctx ends, even mid-compilation.
func Inspect(ctx context.Context, wasm []byte) (Info, error) {
	return InspectWith(ctx, wasm, ModuleLimits{})
}

// InspectWith is Inspect with the module limits lim (zero fields: the
// defaults).
func InspectWith(ctx context.Context, wasm []byte, lim ModuleLimits) (Info, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	closeRT := func() { _ = rt.Close(context.Background()) }
	_, _, info, err := compile(ctx, rt, "", wasm, DefaultMemoryLimit, lim.withDefaults(), DefaultCompileTimeout, closeRT)
	return info, err
}

// Info describes the module.
func (m *Module) Info() Info { return m.info }

// Name is the name given to Compile.
func (m *Module) Name() string { return m.name }

// Close releases the compiled code once every Instance of the module is
// closed. Instantiate fails afterwards; live Instances keep working.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	now := m.refs == 0
	m.mu.Unlock()
	if now {
		return m.closeCompiled(ctx)
	}
	return nil
}

func (m *Module) acquire() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("engine: instantiate %q: module %w", m.name, ErrClosed)
	}
	m.refs++
	return nil
}

func (m *Module) release(ctx context.Context) {
	m.mu.Lock()
	m.refs--
	now := m.closed && m.refs == 0
	m.mu.Unlock()
	if now {
		_ = m.closeCompiled(ctx)
	}
}

func (m *Module) err(kind ModuleErrorKind, msg string, err error) error {
	return &ModuleError{Module: m.name, Kind: kind, Msg: msg, Err: err}
}

// compile instruments, compiles and validates wasm in rt. The shape limits
// and the compile budget are checked first (instrumentBudgeted); wazero's
// compilation then runs under timeout and returns early when ctx ends.
// finished is called once, when rt is no longer in use by this compile
// (for an abandoned compilation, only once wazero is done with it).
func compile(ctx context.Context, rt wazero.Runtime, name string, wasm []byte, limit uint64, lim ModuleLimits, timeout time.Duration, finished func()) (wazero.CompiledModule, *instrumented, Info, error) {
	abandoned := false
	defer func() {
		if !abandoned {
			finished()
		}
	}()
	fail := func(kind ModuleErrorKind, msg string, err error) (wazero.CompiledModule, *instrumented, Info, error) {
		return nil, nil, Info{}, &ModuleError{Module: name, Kind: kind, Msg: msg, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(CompileFailed, "canceled before compiling", err)
	}
	ins, err := instrumentBudgeted(wasm, lim)
	var ol *errOverLimit
	switch {
	case errors.Is(err, errNotWasm):
		head := wasm[:min(len(wasm), 8)]
		return fail(NotWasm, fmt.Sprintf("%v (%d bytes, starting %x; want \\0asm and version 1)", err, len(wasm), head), err)
	case errors.As(err, &ol):
		return fail(OverLimits, ol.msg, err)
	case err != nil:
		return fail(CompileFailed, err.Error(), err)
	}
	var compiled wazero.CompiledModule
	compiled, abandoned, err = compileBounded(ctx, rt, ins.wasm, timeout, finished)
	if errors.Is(err, errCompileTimeout) {
		return fail(OverLimits, fmt.Sprintf("compilation took longer than %v (CompileTimeout)", timeout), err)
	}
	if abandoned {
		return fail(CompileFailed, "canceled while compiling", err)
	}
	if err != nil {
		return fail(CompileFailed, firstLine(err.Error(), 400), err)
	}
	info, err := validate(name, compiled, ins, wasm, limit)
	if err != nil {
		_ = compiled.Close(ctx)
		return nil, nil, Info{}, err
	}
	return compiled, ins, info, nil
}

// errCompileTimeout is the cause of a compilation that ran past its timeout.
var errCompileTimeout = errors.New("compilation timed out")

// compileBounded runs wazero's CompileModule, which cannot be interrupted, on
// a goroutine of its own and returns when it is done, when ctx ends or after
// timeout. An abandoned compilation (timeout, or ctx ended) runs to its end
// in the background (its cost is bounded by ModuleLimits), its result is
// closed, and then finished runs: rt must stay open until then, because
// closing a wazero runtime under a running compilation panics. finished is
// not called for a compilation that was not abandoned.
func compileBounded(ctx context.Context, rt wazero.Runtime, wasm []byte, timeout time.Duration, finished func()) (c wazero.CompiledModule, abandoned bool, err error) {
	type result struct {
		c   wazero.CompiledModule
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := rt.CompileModule(context.Background(), wasm)
		done <- result{c, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	abandon := func() {
		go func() {
			if res := <-done; res.c != nil {
				_ = res.c.Close(context.Background())
			}
			finished()
		}()
	}
	select {
	case res := <-done:
		return res.c, false, res.err
	case <-ctx.Done():
		abandon()
		return nil, true, ctx.Err()
	case <-t.C:
		abandon()
		return nil, true, errCompileTimeout
	}
}

// validate checks a compiled module against the ABI and describes it.
func validate(name string, c wazero.CompiledModule, ins *instrumented, wasm []byte, limit uint64) (Info, error) {
	fail := func(kind ModuleErrorKind, format string, args ...any) (Info, error) {
		return Info{}, &ModuleError{Module: name, Kind: kind, Msg: fmt.Sprintf(format, args...)}
	}
	sum := sha256.Sum256(wasm)
	info := Info{
		Size:                  len(wasm),
		SHA256:                hex.EncodeToString(sum[:]),
		HasStart:              ins.hasStart,
		InstrumentedFunctions: ins.funcs,
		InstrumentedLoops:     ins.loops,
		CompileMemory:         ins.cost.mem,
		CompileTime:           time.Duration(ins.cost.ns),
		InstanceMemory:        ins.cost.inst,
	}
	hs, err := declaredHandles(wasm)
	if err != nil {
		return fail(CompileFailed, "%v (the section is written by the SDK: rebuild the plugin with it)", err)
	}
	info.Handles = hs
	funcs := c.ExportedFunctions()
	kinds := map[string]string{}
	for _, e := range ins.exports {
		s := Symbol{Name: e.Name, Kind: importKindName(e.Kind)}
		if d, ok := funcs[e.Name]; ok && e.Kind == 0 {
			s.Signature = signatureOf(d)
		}
		kinds[e.Name] = s.Kind
		info.Exports = append(info.Exports, s)
	}

	// ABI version markers.
	for n := range funcs {
		suffix, ok := strings.CutPrefix(n, abi.VersionMarkerPrefix)
		if !ok {
			continue
		}
		if v, err := strconv.Atoi(suffix); err == nil && v > 0 && strconv.Itoa(v) == suffix {
			info.ABIVersions = append(info.ABIVersions, v)
		}
	}
	slices.Sort(info.ABIVersions)
	if len(info.ABIVersions) == 0 {
		return fail(NoABIMarker, "no %sN export; a version %d plugin exports %s: func %s, which the SDK "+
			"provides: link the SDK's wasmstream.c (wasmstream-sdk/ in a project of wasmstream init, sdk/c/ in "+
			"the repository) into a C plugin, use wasmstream::processor! in a Rust one, import "+
			"github.com/wasmstream/wasmstream/sdk in a Go one, export * from \"./wasmstream-sdk/exports\" in a "+
			"TypeScript one",
			abi.VersionMarkerPrefix, abi.Version, abi.VersionMarker, sigMarker)
	}
	for _, v := range info.ABIVersions {
		if slices.Contains(SupportedABIVersions, v) {
			info.ABIVersion = v
		}
	}
	if info.ABIVersion == 0 {
		return fail(UnsupportedABIVersion, "the module offers ABI version(s) %s; this host supports %s",
			intList(info.ABIVersions), intList(SupportedABIVersions))
	}
	marker := abi.VersionMarkerPrefix + strconv.Itoa(info.ABIVersion)
	if sig := signatureOf(funcs[marker]); sig != sigMarker {
		return fail(WrongSignature, "%s is func %s, want func %s", marker, sig, sigMarker)
	}

	// Imports.
	defs := map[string]api.FunctionDefinition{}
	for _, d := range c.ImportedFunctions() {
		m, n, _ := d.Import()
		defs[m+"\x00"+n] = d
	}
	wasi := wasiSignatures()
	var bad []string
	for _, im := range ins.imports {
		s := Symbol{Module: im.Module, Name: im.Name, Kind: importKindName(im.Kind)}
		if d, ok := defs[im.Module+"\x00"+im.Name]; ok && im.Kind == 0 {
			s.Signature = signatureOf(d)
		}
		info.Imports = append(info.Imports, s)
		full := im.Module + "." + im.Name
		var want string
		var known bool
		switch {
		case im.Kind != 0:
			bad = append(bad, fmt.Sprintf("%s is a %s import; a plugin may import functions only (and must define its own memory)", full, s.Kind))
			continue
		case im.Module == abi.ImportModule:
			want, known = hostSignature(im.Name)
		case im.Module == abi.WASIModule:
			want, known = wasi[im.Name]
		default:
			bad = append(bad, fmt.Sprintf("%s: import module %q is not allowed (only %q and %q)", full, im.Module, abi.ImportModule, abi.WASIModule))
			continue
		}
		if !known {
			bad = append(bad, fmt.Sprintf("%s: the host provides no such function", full))
		} else if s.Signature != want {
			bad = append(bad, fmt.Sprintf("%s is func %s, want func %s", full, s.Signature, want))
		}
		if im.Module == abi.ImportModule {
			switch im.Name {
			case abi.ImportTimerSet:
				info.ImportsTimerSet = true
			case abi.ImportTimerCancel:
				info.ImportsTimerCancel = true
			case abi.ImportTimeNow:
				info.ImportsTimeNow = true
			case abi.ImportCommitMark:
				info.ImportsCommitMark = true
			}
		}
	}
	if len(bad) > 0 {
		return fail(ForbiddenImport, "%s", strings.Join(bad, "; "))
	}

	// Memory.
	mem, ok := c.ExportedMemories()[abi.ExportMemory]
	if !ok {
		if k, exported := kinds[abi.ExportMemory]; exported {
			return fail(WrongSignature, "%s is a %s export, want the plugin's linear memory", abi.ExportMemory, k)
		}
		return fail(MissingExport, "%s: the plugin must export its linear memory as %q", abi.ExportMemory, abi.ExportMemory)
	}
	info.MemoryMinPages = mem.Min()
	info.MemoryMaxPages, info.HasMemoryMax = mem.Max()
	if uint64(mem.Min())*PageSize > limit {
		return fail(MemoryTooLarge, "minimum memory is %d pages (%d KiB), over the limit of %d pages (%d KiB)",
			mem.Min(), uint64(mem.Min())*PageSize>>10, limit/PageSize, limit>>10)
	}

	// Function exports.
	for _, e := range []struct {
		name, sig string
		required  bool
		has       *bool
	}{
		{abi.ExportInput, sigInput, true, nil},
		{abi.ExportProcess, sigProcess, true, nil},
		{abi.ExportInitialize, sigInitialize, false, &info.HasInitialize},
		{abi.ExportInit, sigInit, false, &info.HasInit},
		{abi.ExportOnTimer, sigOnTimer, false, &info.HasOnTimer},
		{abi.ExportOnCommit, sigOnCommit, false, &info.HasOnCommit},
		{abi.ExportMigrate, sigMigrate, false, &info.HasMigrate},
	} {
		d, ok := funcs[e.name]
		if !ok {
			if k, exported := kinds[e.name]; exported {
				return fail(WrongSignature, "%s is a %s export, want func %s", e.name, k, e.sig)
			}
			if e.required {
				return fail(MissingExport, "%s, want func %s", e.name, e.sig)
			}
			continue
		}
		if sig := signatureOf(d); sig != e.sig {
			return fail(WrongSignature, "%s is func %s, want func %s", e.name, sig, e.sig)
		}
		if e.has != nil {
			*e.has = true
		}
	}

	// Version 2 adds wasmstream_batch (abi/ABI.md section 10); a module
	// that speaks version 1 only may export anything under that name.
	if info.ABIVersion >= abi.VersionBatch {
		d, ok := funcs[abi.ExportBatch]
		switch {
		case !ok && kinds[abi.ExportBatch] != "":
			return fail(WrongSignature, "%s is a %s export, want func %s", abi.ExportBatch, kinds[abi.ExportBatch], sigBatch)
		case !ok:
			return fail(MissingExport, "%s, want func %s (the module declares ABI version %d with %s)",
				abi.ExportBatch, sigBatch, abi.VersionBatch, abi.VersionMarkerBatch)
		case signatureOf(d) != sigBatch:
			return fail(WrongSignature, "%s is func %s, want func %s", abi.ExportBatch, signatureOf(d), sigBatch)
		}
		info.Batch = true
	}

	// Time imports whose callbacks are missing: what they ask for could
	// never be delivered (abi/ABI.md section 8.2, load-time rules).
	for _, r := range []struct {
		imported bool
		name     string
		export   string
		sig      string
		what     string
		// fix is what each SDK needs for the export (the Go SDK's
		// timer package always exports both).
		fix string
	}{
		{info.ImportsTimerSet, abi.ImportTimerSet, abi.ExportOnTimer, sigOnTimer, "its timers", fixOnTimer},
		{info.ImportsTimerCancel, abi.ImportTimerCancel, abi.ExportOnTimer, sigOnTimer, "its timers", fixOnTimer},
		{info.ImportsCommitMark, abi.ImportCommitMark, abi.ExportOnCommit, sigOnCommit, "its commit marks", fixOnCommit},
	} {
		if r.imported && funcs[r.export] == nil {
			return fail(MissingExport, "%s, want func %s: the module imports %s.%s, and %s could never be delivered without it (%s)",
				r.export, r.sig, abi.ImportModule, r.name, r.what, r.fix)
		}
	}
	return info, nil
}

// The fixes of a missing time callback, by SDK.
const (
	fixOnTimer = `the SDK exports it: TypeScript: export * from "./wasmstream-sdk/time-exports" and onTimer(f); ` +
		`Rust: processor!(..., on_timer = f); C: link wasmstream_time.c and define ws_on_timer`
	fixOnCommit = `the SDK exports it: TypeScript: export * from "./wasmstream-sdk/time-exports" and onCommit(f); ` +
		`Rust: processor!(..., on_commit = f); C: link wasmstream_time.c and define ws_on_commit`
)

// signatureOf formats a function type like "(i32, i32) -> i32"; "" for nil.
func signatureOf(d api.FunctionDefinition) string {
	if d == nil {
		return ""
	}
	return signature(d.ParamTypes(), d.ResultTypes())
}

func signature(params, results []api.ValueType) string {
	list := func(ts []api.ValueType) string {
		if len(ts) == 1 {
			return api.ValueTypeName(ts[0])
		}
		names := make([]string, len(ts))
		for k, t := range ts {
			names[k] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(names, ", ") + ")"
	}
	p := list(params)
	if len(params) == 1 {
		p = "(" + p + ")"
	}
	return p + " -> " + list(results)
}

func intList(vs []int) string {
	s := make([]string, len(vs))
	for k, v := range vs {
		s[k] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

var (
	wasiOnce sync.Once
	wasiSigs map[string]string
)

// wasiSignatures returns the functions of wazero's wasi_snapshot_preview1
// module and their signatures.
func wasiSignatures() map[string]string {
	wasiOnce.Do(func() {
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		defer rt.Close(ctx)
		wasiSigs = map[string]string{}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
			return
		}
		for n, d := range rt.Module(abi.WASIModule).ExportedFunctionDefinitions() {
			wasiSigs[n] = signatureOf(d)
		}
	})
	return wasiSigs
}
