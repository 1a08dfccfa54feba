// Package plugins_test builds every bundled plugin for wasip1 and runs each
// once under wazero with a minimal host, to prove that they compile, that
// the SDK's wasmimport/wasmexport declarations match the ABI (names and
// signatures), and that a record makes the round trip through real Wasm.
// The plugins' behaviour is tested natively in their own packages.
package plugins_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// One run of a plugin: its declarations, one input record and what it must
// emit ("output:value", in order).
type run struct {
	pkg     string
	outputs []string
	stores  []string
	config  string
	value   string
	want    []string
}

var runs = []run{
	{pkg: "passthrough", outputs: []string{"out"}, value: `{"a":1}`, want: []string{`out:{"a":1}`}},
	{pkg: "filter", outputs: []string{"out"}, config: `{"field":"user.country","op":"eq","value":"NL"}`,
		value: `{"user":{"country":"NL"}}`, want: []string{`out:{"user":{"country":"NL"}}`}},
	{pkg: "route", outputs: []string{"clicks", "other"},
		config: `{"by":"field","field":"type","routes":{"click":"clicks"},"default":"other"}`,
		value:  `{"type":"click"}`, want: []string{`clicks:{"type":"click"}`}},
	{pkg: "mask", outputs: []string{"out"}, config: `{"fields":["email"],"mode":"hash"}`,
		value: `{"email":"ann@example.com","n":1}`,
		want:  []string{`out:{"email":"` + sha256Hex("ann@example.com") + `","n":1}`}},
	{pkg: "wordcount", outputs: []string{"counts"}, stores: []string{"counts"},
		value: "the cat and the hat", want: []string{"counts:the=2", "counts:cat=1", "counts:and=1", "counts:hat=1"}},
	// The minimal host's stores are empty: the lookup misses.
	{pkg: "enrich", outputs: []string{"missing", "out"}, stores: []string{"customers"},
		config: `{"table":"customers","key_field":"customer_id","as":"customer","missing":"missing"}`,
		value:  `{"customer_id":"c1"}`, want: []string{`missing:k={"customer_id":"c1"}`}},
	{pkg: "split", outputs: []string{"words"},
		value: "the cat the", want: []string{"words:the", "words:cat", "words:the"}},
	// The time plugins emit nothing for one record; TestTimeInWasm runs
	// their callbacks.
	{pkg: "windowcount", outputs: []string{"counts"}, stores: []string{"windows"}, config: `{"size":"1m"}`, value: "x"},
	{pkg: "alert", outputs: []string{"alerts"}, stores: []string{"alert"}, config: `{"timeout":"1m"}`, value: "x"},
	{pkg: "clickjoin", outputs: []string{"joined"}, stores: []string{"clickjoin"}, config: `{"window":"1m"}`, value: "x"},
}

// timePlugins use sdk/timer; every other plugin must carry none of its
// exports or imports (what time costs a plugin that does not use it).
var timePlugins = map[string]bool{"windowcount": true, "alert": true, "clickjoin": true, "wordcount": true}

// signatures are the ABI's import and export signatures (abi/ABI.md
// sections 3 and 4): every parameter and result is an i32.
var signatures = map[string][2]int{ // name -> params, results
	abi.ImportEmit: {2, 1}, abi.ImportOutputIndex: {2, 1}, abi.ImportStoreIndex: {2, 1},
	abi.ImportConfig: {2, 1}, abi.ImportLog: {3, 1}, abi.ImportSetError: {2, 1},
	abi.ImportStateGet: {5, 1}, abi.ImportStatePut: {5, 1}, abi.ImportStateDelete: {3, 1},
	abi.ImportScanOpen: {5, 1}, abi.ImportScanNext: {3, 1}, abi.ImportScanClose: {1, 1},
}

var exportSignatures = map[string][2]int{
	abi.VersionMarker: {0, 0}, abi.ExportInput: {1, 1}, abi.ExportProcess: {1, 1},
	abi.ExportInit: {0, 1}, abi.ExportInitialize: {0, 0},
}

// The time imports and exports (ABI.md section 8) have i64 times, so their
// signatures are spelled out: params, then results.
var (
	i32, i64       = api.ValueTypeI32, api.ValueTypeI64
	timeSignatures = map[string][2][]api.ValueType{
		abi.ImportTimerSet:    {{i32, i64, i32, i32}, {i32}},
		abi.ImportTimerCancel: {{i32, i64, i32, i32}, {i32}},
		abi.ImportTimeNow:     {{i32}, {i64}},
		abi.ImportCommitMark:  {{i32, i32}, {i32}},
	}
	timeExports = map[string][2][]api.ValueType{
		abi.ExportOnTimer:  {{i32}, {i32}},
		abi.ExportOnCommit: {{i32}, {i32}},
	}
)

// runtime is one wazero runtime with WASI and the test host, shared by
// the tests of this file.
type runtime struct {
	ctx context.Context
	rt  wazero.Runtime
	h   *host
}

func newRuntime(t *testing.T) *runtime {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	h := &host{}
	if err := h.register(ctx, rt); err != nil {
		t.Fatal(err)
	}
	return &runtime{ctx: ctx, rt: rt, h: h}
}

// instance builds, compiles (checking the module's shape) and instantiates
// the plugin of r, and runs its init; it logs the sizes and times.
func (rt *runtime) instance(t *testing.T, pkg string, r run) api.Module {
	t.Helper()
	wasm, err := os.ReadFile(wasmbuild.Build(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	compiled, err := rt.rt.CompileModule(rt.ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	compileTime := time.Since(start)
	checkShape(t, compiled)

	rt.h.reset(r)
	start = time.Now()
	mod, err := rt.rt.InstantiateModule(rt.ctx, compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions(abi.ExportInitialize))
	if err != nil {
		t.Fatal(err)
	}
	instTime := time.Since(start)
	t.Cleanup(func() { mod.Close(rt.ctx) })
	if st := call(t, mod, abi.ExportInit); st != uint64(abi.StatusOK) {
		t.Fatalf("init status %d: %s", st, rt.h.errMsg)
	}
	t.Logf("%s: %d bytes; wazero compile %v, instantiate (with _initialize) %v, memory after init %.1f MiB",
		wasmbuild.Name(pkg), len(wasm), compileTime.Round(time.Millisecond), instTime.Round(100*time.Microsecond),
		float64(mod.Memory().Size())/(1<<20))
	return mod
}

// process writes rec into the plugin's input buffer, growing it through
// wasmstream_input as the host does, and returns process's status.
func (rt *runtime) process(t *testing.T, mod api.Module, rec abi.Record) uint64 {
	t.Helper()
	rt.h.emitted, rt.h.records, rt.h.errMsg, rt.h.logs = nil, nil, "", nil
	clear(rt.h.cursors)
	rt.h.stream, rt.h.callTS = max(rt.h.stream, rec.Timestamp), rec.Timestamp
	enc := rec.AppendEncode(nil)
	ptr := uint32(call(t, mod, abi.ExportInput, uint64(len(enc))))
	if ptr == 0 || !mod.Memory().Write(ptr, enc) {
		t.Fatalf("input buffer at %d unusable for %d bytes", ptr, len(enc))
	}
	return call(t, mod, abi.ExportProcess, uint64(len(enc)))
}

func TestPluginsBuildAndRunAsWasm(t *testing.T) {
	dirs, _ := os.ReadDir(".")
	var found []string
	for _, d := range dirs {
		// rust/, c/ and ts/ hold the same plugins in those languages;
		// they are built and compared with these by
		// host/internal/conformance.
		if d.IsDir() && !slices.Contains([]string{"internal", "testdata", "rust", "c", "ts"}, d.Name()) {
			found = append(found, d.Name())
		}
	}
	var covered []string
	for _, r := range runs {
		covered = append(covered, r.pkg)
	}
	slices.Sort(covered)
	if !slices.Equal(found, covered) {
		t.Fatalf("plugins %v, runs cover %v: add a run for every plugin", found, covered)
	}
	rt := newRuntime(t)
	for _, r := range runs {
		t.Run(r.pkg, func(t *testing.T) {
			mod := rt.instance(t, "./plugins/"+r.pkg, r)
			rec := abi.Record{Timestamp: 1700000000000, Offset: 5, Key: []byte("k"), Value: []byte(r.value)}
			if st := rt.process(t, mod, rec); st != uint64(abi.StatusOK) {
				t.Fatalf("process status %d: %s", st, rt.h.errMsg)
			}
			if !slices.Equal(rt.h.emitted, r.want) {
				t.Fatalf("emitted %q, want %q", rt.h.emitted, r.want)
			}
			exports := mod.ExportedFunctionDefinitions()
			_, onTimer := exports[abi.ExportOnTimer]
			_, onCommit := exports[abi.ExportOnCommit]
			if onTimer != timePlugins[r.pkg] || onCommit != timePlugins[r.pkg] {
				t.Fatalf("exports %s %v and %s %v; want both only in plugins that use sdk/timer",
					abi.ExportOnTimer, onTimer, abi.ExportOnCommit, onCommit)
			}
		})
	}
}

// The SDK's Wasm build on the paths the plugins above do not take: retried
// reads, a grown input buffer, errors and recovered panics through
// set_error, headers and partitions in the emitted layout.
func TestSDKPathsInWasm(t *testing.T) {
	rt := newRuntime(t)
	cfg := `{"pad":"` + strings.Repeat("x", 3000) + `xyz"}` // over the SDK's first config buffer
	mod := rt.instance(t, "./plugins/internal/sdkcheck", run{outputs: []string{"out"}, stores: []string{"s"}, config: cfg})
	rec := func(v string) abi.Record { return abi.Record{Timestamp: 42, Key: []byte("k"), Value: []byte(v)} }
	ok := func(cmd, want string) {
		t.Helper()
		if st := rt.process(t, mod, rec(cmd)); st != uint64(abi.StatusOK) {
			t.Fatalf("%.20s: status %d: %s", cmd, st, rt.h.errMsg)
		}
		if len(rt.h.records) != 1 || string(rt.h.records[0].Value) != want {
			t.Fatalf("%.20s: emitted %q, want %q", cmd, rt.h.emitted, want)
		}
	}
	failed := func(cmd, wantPrefix string) {
		t.Helper()
		if st := rt.process(t, mod, rec(cmd)); st != uint64(abi.StatusFailed) || !strings.HasPrefix(rt.h.errMsg, wantPrefix) {
			t.Fatalf("%s: status %d, error %q; want FAILED with %q", cmd, st, rt.h.errMsg, wantPrefix)
		}
	}
	ok("config", "config "+strconv.Itoa(len(cfg))+` z"}`)
	ok("state", "state ok")
	ok("scan", "scan s/a=700 s/b=700")
	ok("toolarge", "toolarge ok")
	ok(strings.Repeat("v", 200_000), "big 200000") // regrows the input buffer
	ok("state", "state ok")                        // and the instance goes on

	rt.process(t, mod, rec("headers"))
	if len(rt.h.records) != 1 {
		t.Fatalf("headers: %d records", len(rt.h.records))
	}
	e := rt.h.records[0]
	if e.Key == nil || len(e.Key) != 0 || e.Value != nil || e.Timestamp != 7 || e.Offset != abi.NoOffset ||
		e.Partition != abi.AnyPartition || len(e.Headers) != 3 || e.Headers[0].Value != nil ||
		e.Headers[1].Value == nil || len(e.Headers[1].Value) != 0 || string(e.Headers[2].Value) != "v" {
		t.Fatalf("headers: emitted %+v", e)
	}
	rt.process(t, mod, rec("partition"))
	if len(rt.h.records) != 1 || rt.h.records[0].Partition != 2 || rt.h.records[0].Timestamp != 42 {
		t.Fatalf("partition: emitted %+v; want partition 2 and the input's timestamp", rt.h.records)
	}

	failed("error", "rejected by the handler")
	failed("undeclared", `sdk: output_index "nope": ENONAME`)
	failed("panic", "panic: assignment to entry in nil map")
	if len(rt.h.logs) != 1 || !strings.HasPrefix(rt.h.logs[0], "3:panic: ") || !strings.Contains(rt.h.logs[0], "sdkcheck/main.go") {
		t.Fatalf("panic: logs %q; want one error line with the stack", rt.h.logs)
	}
	ok("state", "state ok") // the instance survived the panic
	if st := rt.process(t, mod, abi.Record{}); st != uint64(abi.StatusFailed) || !strings.Contains(rt.h.errMsg, "unknown command") {
		t.Fatalf("null value: %d %q", st, rt.h.errMsg)
	}
	// A malformed record is refused by the SDK, not the handler.
	if st := call(t, mod, abi.ExportProcess, 3); st != uint64(abi.StatusFailed) || !strings.Contains(rt.h.errMsg, "malformed") {
		t.Fatalf("malformed: %d %q", st, rt.h.errMsg)
	}
}

func call(t *testing.T, mod api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

// checkShape checks the module's imports and exports against the ABI.
func checkShape(t *testing.T, m wazero.CompiledModule) {
	t.Helper()
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case abi.WASIModule:
		case abi.ImportModule:
			if ts, ok := timeSignatures[name]; ok {
				if !slices.Equal(f.ParamTypes(), ts[0]) || !slices.Equal(f.ResultTypes(), ts[1]) {
					t.Errorf("import %s: params %v results %v, want %v and %v", name, f.ParamTypes(), f.ResultTypes(), ts[0], ts[1])
				}
				continue
			}
			sig, ok := signatures[name]
			if !ok {
				t.Errorf("import %s.%s is not in the ABI", mod, name)
			} else if !allI32(f.ParamTypes(), sig[0]) || !allI32(f.ResultTypes(), sig[1]) {
				t.Errorf("import %s: params %v results %v, want %d and %d i32", name, f.ParamTypes(), f.ResultTypes(), sig[0], sig[1])
			}
		default:
			t.Errorf("import from module %q", mod)
		}
	}
	exports := m.ExportedFunctions()
	for name, sig := range exportSignatures {
		f, ok := exports[name]
		if !ok {
			t.Errorf("export %s missing", name)
		} else if !allI32(f.ParamTypes(), sig[0]) || !allI32(f.ResultTypes(), sig[1]) {
			t.Errorf("export %s: params %v results %v, want %d and %d i32", name, f.ParamTypes(), f.ResultTypes(), sig[0], sig[1])
		}
	}
	for name, ts := range timeExports { // optional
		if f, ok := exports[name]; ok && (!slices.Equal(f.ParamTypes(), ts[0]) || !slices.Equal(f.ResultTypes(), ts[1])) {
			t.Errorf("export %s: params %v results %v, want %v and %v", name, f.ParamTypes(), f.ResultTypes(), ts[0], ts[1])
		}
	}
	if _, ok := m.ExportedMemories()[abi.ExportMemory]; !ok {
		t.Error("memory not exported")
	}
}

func allI32(types []api.ValueType, n int) bool {
	if len(types) != n {
		return false
	}
	for _, v := range types {
		if v != api.ValueTypeI32 {
			return false
		}
	}
	return true
}

// host is the smallest host that serves these runs: state without
// staging, no limits beyond bounds checks. The real one is in host/.
type host struct {
	outputs []string
	stores  []string
	config  []byte
	state   map[string]string
	cursors map[uint32][]string // open scans: the entries left, key then value
	emitted []string            // "output:value" ("output:key=value" with stores)
	records []abi.Record        // the same, decoded
	errMsg  string
	logs    []string

	// Time (ABI.md section 8), without staging or limits.
	timers map[timerID]bool
	marks  map[string]int64 // marked key -> timestamp of the marking call
	stream int64            // stream time
	wall   int64            // wall time
	callTS int64            // timestamp of the current call
}

type timerID struct {
	kind abi.TimerKind
	ts   int64
	key  string
}

func (h *host) reset(r run) {
	*h = host{outputs: r.outputs, stores: r.stores, config: []byte(r.config),
		state: map[string]string{}, cursors: map[uint32][]string{},
		timers: map[timerID]bool{}, marks: map[string]int64{}, stream: abi.NoTime, wall: 1_700_000_000_000}
}

var errFault = errors.New("out of bounds")

func read(m api.Module, ptr, n uint64) ([]byte, error) {
	b, ok := m.Memory().Read(uint32(ptr), uint32(n))
	if !ok {
		return nil, errFault
	}
	return bytes.Clone(b), nil
}

// writeIfFits is the ABI's "written only when it fits" rule; it returns
// the result to give the plugin: len(b), or -EFAULT.
func writeIfFits(m api.Module, ptr, capacity uint64, b []byte) int32 {
	if uint64(len(b)) <= capacity && !m.Memory().Write(uint32(ptr), b) {
		return abi.ErrnoFault.Result()
	}
	return int32(len(b))
}

func (h *host) register(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.ImportModule)
	fn := func(name string, f func(m api.Module, s []uint64) int32) {
		params := make([]api.ValueType, signatures[name][0])
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
			// An i32 arrives in a uint64 slot whose upper half is not
			// guaranteed to be zero (seen: log levels like 0x65000000003
			// from Go guests): decode every argument as a u32 first.
			for i := range params {
				s[i] = uint64(api.DecodeU32(s[i]))
			}
			s[0] = api.EncodeI32(f(m, s))
		}), params, []api.ValueType{api.ValueTypeI32}).Export(name)
	}
	index := func(names *[]string) func(m api.Module, s []uint64) int32 {
		return func(m api.Module, s []uint64) int32 {
			name, err := read(m, s[0], s[1])
			if err != nil {
				return abi.ErrnoFault.Result()
			}
			if i := slices.Index(*names, string(name)); i >= 0 {
				return int32(i)
			}
			return abi.ErrnoNoName.Result()
		}
	}
	fn(abi.ImportOutputIndex, index(&h.outputs))
	fn(abi.ImportStoreIndex, index(&h.stores))
	fn(abi.ImportEmit, func(m api.Module, s []uint64) int32 {
		raw, err := read(m, s[0], s[1])
		if err != nil {
			return abi.ErrnoFault.Result()
		}
		var rec abi.Record
		if err := rec.Decode(raw); err != nil || int(rec.Index) >= len(h.outputs) {
			return abi.ErrnoInval.Result()
		}
		v := string(rec.Value)
		if len(h.stores) > 0 { // wordcount: key=count
			v = string(rec.Key) + "=" + v
		}
		h.emitted = append(h.emitted, h.outputs[rec.Index]+":"+v)
		h.records = append(h.records, rec)
		return 0
	})
	fn(abi.ImportConfig, func(m api.Module, s []uint64) int32 { return writeIfFits(m, s[0], s[1], h.config) })
	fn(abi.ImportLog, func(m api.Module, s []uint64) int32 {
		msg, err := read(m, s[1], s[2])
		if err != nil {
			return abi.ErrnoFault.Result()
		}
		h.logs = append(h.logs, strconv.FormatUint(s[0], 10)+":"+string(msg))
		return 0
	})
	fn(abi.ImportSetError, func(m api.Module, s []uint64) int32 {
		msg, err := read(m, s[0], s[1])
		if err != nil {
			return abi.ErrnoFault.Result()
		}
		h.errMsg = string(msg)
		return 0
	})
	fn(abi.ImportStateGet, func(m api.Module, s []uint64) int32 {
		key, err := read(m, s[1], s[2])
		if err != nil {
			return abi.ErrnoFault.Result()
		}
		v, ok := h.state[string(key)]
		if !ok {
			return abi.ErrnoNotFound.Result()
		}
		return writeIfFits(m, s[3], s[4], []byte(v))
	})
	fn(abi.ImportStatePut, func(m api.Module, s []uint64) int32 {
		key, err1 := read(m, s[1], s[2])
		val, err2 := read(m, s[3], s[4])
		if err1 != nil || err2 != nil {
			return abi.ErrnoFault.Result()
		}
		h.state[string(key)] = string(val)
		return 0
	})
	fn(abi.ImportStateDelete, func(m api.Module, s []uint64) int32 {
		key, err := read(m, s[1], s[2])
		if err != nil {
			return abi.ErrnoFault.Result()
		}
		delete(h.state, string(key))
		return 0
	})
	fn(abi.ImportScanOpen, func(m api.Module, s []uint64) int32 {
		start, err1 := read(m, s[1], s[2])
		end, err2 := read(m, s[3], s[4])
		if err1 != nil || err2 != nil {
			return abi.ErrnoFault.Result()
		}
		var entries []string
		for _, k := range slices.Sorted(maps.Keys(h.state)) {
			if k >= string(start) && (len(end) == 0 || k < string(end)) {
				entries = append(entries, k, h.state[k])
			}
		}
		id := uint32(len(h.cursors))
		h.cursors[id] = entries
		return int32(id)
	})
	fn(abi.ImportScanNext, func(m api.Module, s []uint64) int32 {
		entries, ok := h.cursors[uint32(s[0])]
		if !ok {
			return abi.ErrnoNoCursor.Result()
		}
		if len(entries) == 0 {
			return 0
		}
		r := writeIfFits(m, s[1], s[2], abi.EncodeScanEntry(nil, []byte(entries[0]), []byte(entries[1])))
		if r > 0 && uint64(r) <= s[2] {
			h.cursors[uint32(s[0])] = entries[2:]
		}
		return r
	})
	fn(abi.ImportScanClose, func(m api.Module, s []uint64) int32 {
		if _, ok := h.cursors[uint32(s[0])]; !ok {
			return abi.ErrnoNoCursor.Result()
		}
		delete(h.cursors, uint32(s[0]))
		return 0
	})
	timerFn := func(name string, f func(kind abi.TimerKind, ts int64, key string) int32) {
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
			kind, ts := abi.TimerKind(api.DecodeU32(s[0])), int64(s[1])
			key, err := read(m, uint64(api.DecodeU32(s[2])), uint64(api.DecodeU32(s[3])))
			switch {
			case err != nil:
				s[0] = api.EncodeI32(abi.ErrnoFault.Result())
			case abi.CheckTimer(kind, ts, len(key)) != 0:
				s[0] = api.EncodeI32(abi.CheckTimer(kind, ts, len(key)).Result())
			default:
				s[0] = api.EncodeI32(f(kind, ts, string(key)))
			}
		}), timeSignatures[name][0], timeSignatures[name][1]).Export(name)
	}
	timerFn(abi.ImportTimerSet, func(kind abi.TimerKind, ts int64, key string) int32 {
		id := timerID{kind, ts, key}
		if h.timers[id] {
			return 0
		}
		h.timers[id] = true
		return 1
	})
	timerFn(abi.ImportTimerCancel, func(kind abi.TimerKind, ts int64, key string) int32 {
		id := timerID{kind, ts, key}
		if !h.timers[id] {
			return 0
		}
		delete(h.timers, id)
		return 1
	})
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		switch api.DecodeU32(s[0]) {
		case abi.ClockStream:
			s[0] = uint64(h.stream)
		case abi.ClockWall:
			s[0] = uint64(h.wall)
		default:
			s[0] = uint64(int64(abi.ErrnoInval.Result()))
		}
	}), timeSignatures[abi.ImportTimeNow][0], timeSignatures[abi.ImportTimeNow][1]).Export(abi.ImportTimeNow)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		key, err := read(m, uint64(api.DecodeU32(s[0])), uint64(api.DecodeU32(s[1])))
		if err != nil {
			s[0] = api.EncodeI32(abi.ErrnoFault.Result())
			return
		}
		_, had := h.marks[string(key)]
		h.marks[string(key)] = h.callTS
		s[0] = api.EncodeI32(1) // newly marked
		if had {
			s[0] = api.EncodeI32(0)
		}
	}), timeSignatures[abi.ImportCommitMark][0], timeSignatures[abi.ImportCommitMark][1]).Export(abi.ImportCommitMark)
	_, err := b.Instantiate(ctx)
	return err
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fire runs the callbacks of a check (ABI.md section 8.3) through the
// plugin's Wasm exports: the due timers in abi.TimerLess order (event time
// only, unless at a commit point), then at a commit point the marked keys
// in byte order. It returns what they emitted.
func (rt *runtime) fire(t *testing.T, mod api.Module, commitPoint bool) []string {
	t.Helper()
	rt.h.emitted, rt.h.records, rt.h.errMsg = nil, nil, ""
	var due []timerID
	for id := range rt.h.timers {
		if (id.kind == abi.TimerEventTime && id.ts <= rt.h.stream) ||
			(commitPoint && id.kind == abi.TimerProcessingTime && id.ts <= rt.h.wall) {
			due = append(due, id)
		}
	}
	slices.SortFunc(due, func(a, b timerID) int {
		if abi.TimerLess(a.kind, a.ts, []byte(a.key), b.kind, b.ts, []byte(b.key)) {
			return -1
		}
		return 1
	})
	deliver := func(export string, tr abi.Trigger) {
		enc := tr.AppendEncode(nil)
		ptr := uint32(call(t, mod, abi.ExportInput, uint64(len(enc))))
		if ptr == 0 || !mod.Memory().Write(ptr, enc) {
			t.Fatalf("input buffer at %d unusable for %d bytes", ptr, len(enc))
		}
		rt.h.callTS = tr.Timestamp
		if st := call(t, mod, export, uint64(len(enc))); st != uint64(abi.StatusOK) {
			t.Fatalf("%s %s %q: status %d: %s", export, tr.Kind, tr.Key, st, rt.h.errMsg)
		}
	}
	for _, id := range due {
		delete(rt.h.timers, id)
		deliver(abi.ExportOnTimer, abi.Trigger{Timestamp: id.ts, StreamTime: rt.h.stream, WallTime: rt.h.wall,
			Kind: id.kind, Key: []byte(id.key)})
	}
	if commitPoint {
		marks := rt.h.marks
		rt.h.marks = map[string]int64{}
		for _, k := range slices.Sorted(maps.Keys(marks)) {
			deliver(abi.ExportOnCommit, abi.Trigger{Timestamp: marks[k], StreamTime: rt.h.stream, WallTime: rt.h.wall,
				Kind: abi.TriggerCommit, Key: []byte(k)})
		}
	}
	return rt.h.emitted
}

// The time plugins in real Wasm: i64 times through timer_set and time_now,
// triggers decoded by the SDK from the input buffer, both callbacks, and
// emits that take their timestamp from the trigger.
func TestTimeInWasm(t *testing.T) {
	rt := newRuntime(t)
	ok := func(mod api.Module, key string, ts int64) {
		t.Helper()
		if st := rt.process(t, mod, abi.Record{Timestamp: ts, Key: []byte(key), Value: []byte("x")}); st != uint64(abi.StatusOK) {
			t.Fatalf("process: status %d: %s", st, rt.h.errMsg)
		}
	}
	const t0 = 1_700_000_040_000 // a minute boundary

	t.Run("windowcount final", func(t *testing.T) {
		mod := rt.instance(t, "./plugins/windowcount", run{outputs: []string{"counts"}, stores: []string{"windows"},
			config: `{"size":"1m","grace":"1s"}`})
		ok(mod, "a", t0)
		ok(mod, "a", t0+30_000)
		ok(mod, "b", t0+61_000) // stream time reaches the first window's end + grace
		if len(rt.h.timers) != 2 {
			t.Fatalf("timers %v", rt.h.timers)
		}
		got := rt.fire(t, mod, false)
		want := []string{`counts:a={"start":1700000040000,"end":1700000100000,"count":2}`}
		if !slices.Equal(got, want) || rt.h.records[0].Timestamp != t0+30_000 {
			t.Fatalf("emitted %q (timestamp %d), want %q", got, rt.h.records[0].Timestamp, want)
		}
	})
	t.Run("windowcount commit", func(t *testing.T) {
		mod := rt.instance(t, "./plugins/windowcount", run{outputs: []string{"counts"}, stores: []string{"windows"},
			config: `{"size":"1m","emit":"commit"}`})
		ok(mod, "a", t0+5)
		ok(mod, "a", t0+7)
		if len(rt.h.marks) != 1 {
			t.Fatalf("marks %v", rt.h.marks)
		}
		got := rt.fire(t, mod, true)
		if want := []string{`counts:a={"start":1700000040000,"end":1700000100000,"count":2}`}; !slices.Equal(got, want) {
			t.Fatalf("emitted %q, want %q", got, want)
		}
	})
	t.Run("wordcount commit", func(t *testing.T) {
		mod := rt.instance(t, "./plugins/wordcount", run{outputs: []string{"counts"}, stores: []string{"counts"},
			config: `{"emit":"commit"}`})
		rec := abi.Record{Timestamp: t0, Value: []byte("the cat the")}
		if st := rt.process(t, mod, rec); st != uint64(abi.StatusOK) {
			t.Fatalf("process: status %d: %s", st, rt.h.errMsg)
		}
		if len(rt.h.emitted) != 0 || len(rt.h.marks) != 2 {
			t.Fatalf("emitted %q, marks %v; want no emit and two marks", rt.h.emitted, rt.h.marks)
		}
		got := rt.fire(t, mod, true)
		if want := []string{"counts:cat=1", "counts:the=2"}; !slices.Equal(got, want) || rt.h.records[0].Timestamp != t0 {
			t.Fatalf("emitted %q (timestamp %d), want %q", got, rt.h.records[0].Timestamp, want)
		}
	})
	t.Run("alert", func(t *testing.T) {
		mod := rt.instance(t, "./plugins/alert", run{outputs: []string{"alerts"}, stores: []string{"alert"},
			config: `{"timeout":"1m"}`})
		ok(mod, "k", 1)
		if _, pending := rt.h.timers[timerID{abi.TimerProcessingTime, rt.h.wall + 60_000, "k"}]; !pending {
			t.Fatalf("timers %v", rt.h.timers)
		}
		if got := rt.fire(t, mod, true); len(got) != 0 {
			t.Fatalf("early: %q", got)
		}
		rt.h.wall += 60_000
		got := rt.fire(t, mod, true)
		want := []string{`alerts:k={"status":"silent","last_seen":1700000000000,"silent_ms":60000,"record_timestamp":1}`}
		if !slices.Equal(got, want) || rt.h.records[0].Timestamp != rt.h.wall {
			t.Fatalf("emitted %q, want %q", got, want)
		}
	})
}
