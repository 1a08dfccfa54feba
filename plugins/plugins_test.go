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
}

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
		// rust/ and c/ hold the same plugins in those languages; they are
		// built and compared with these by host/internal/conformance.
		if d.IsDir() && d.Name() != "internal" && d.Name() != "testdata" && d.Name() != "rust" && d.Name() != "c" {
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
}

func (h *host) reset(r run) {
	*h = host{outputs: r.outputs, stores: r.stores, config: []byte(r.config),
		state: map[string]string{}, cursors: map[uint32][]string{}}
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
	_, err := b.Instantiate(ctx)
	return err
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
