package conformance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// guest is one language's conformance processor.
type guest struct {
	lang  string
	build func(t testing.TB) string // the .wasm path
}

var guests = []guest{
	{"go", func(t testing.TB) string { return wasmbuild.Build(t, "./host/internal/conformance/guest/go") }},
	{"rust", func(t testing.TB) string { return polybuild.Rust(t, "host/internal/conformance/guest/rust") }},
	{"c", func(t testing.TB) string {
		return polybuild.C(t, "host/internal/conformance/guest/c/conformance.c", "sdk/c/wasmstream_time.c")
	}},
	{"ts", func(t testing.TB) string { return polybuild.TS(t, "host/internal/conformance/guest/ts/conformance.ts") }},
}

// wasm builds the guest and reads its module.
func (g guest) wasm(t testing.TB) []byte {
	t.Helper()
	wasm, err := os.ReadFile(g.build(t))
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// conformanceBinding is what the script declares (README.md): the config
// is over 4 KiB so that every SDK has to read it a second time.
var conformanceBinding = binding{
	outputs: []string{"out", "side"},
	stores:  []string{"aux", "kv"},
	config:  `{"pad":"` + strings.Repeat("p", 5000) + `","end":true}`,
}

// commands are the script's commands in the order the suite sends them.
// state runs three times: the counter carries over records, and the third
// run is on the fresh instance that replaced the one cmd:fault broke. In
// batches (a batch is cut after a failed record) each failure but eio's
// comes in the middle of a batch: trap, fail, fault and nooutput follow a
// record that succeeded.
var commands = []string{"names", "config", "log", "state", "state", "scan", "headers", "trap", "rawemit",
	"fail", "eio", "names", "fault", "state", "nooutput", "names"}

// run sends the shared vectors and then every command to the guest, one
// record at a time (or, batched, in batches: ABI version 2 for the SDKs
// that speak it), and returns what each record did, and the stores at the
// end.
func run(t *testing.T, g guest, batched bool) ([]step, []string) {
	t.Helper()
	p := start(t, "conformance-"+g.lang, g.wasm(t), conformanceBinding)
	steps := []step{{name: "init", logs: p.initLogs}}
	vectors, _, err := abitest.Load(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var recs []abi.Record
	for _, v := range vectors {
		names, recs = append(names, "vector "+v.Name), append(recs, v.Record)
	}
	for i, c := range commands {
		names = append(names, "cmd:"+c)
		recs = append(recs, abi.Record{Timestamp: int64(1000 + i), Offset: int64(i), Key: []byte("cmd:" + c)})
	}
	if batched {
		done, batches := p.processBatch(names, recs)
		steps = append(steps, done...)
		if p.inst.Info().Batch && batches > len(recs)/2 {
			t.Errorf("%d batches for %d records: the SDK speaks version 2 but took them (nearly) one at a time", batches, len(recs))
		}
		if p.inst.Info().Batch {
			for _, s := range done {
				if s.err != nil && s.name != "cmd:eio" && s.pos == 0 {
					t.Errorf("%s failed first in its batch: want it in the middle of one", s.name)
				}
			}
		}
		t.Logf("%d records in %d batches", len(recs), batches)
	} else {
		for k := range recs {
			steps = append(steps, p.process(names[k], recs[k]))
		}
	}
	return steps, p.state.dump(conformanceBinding.stores)
}

// TestConformance runs the script in every language, checks the Go SDK's
// run against the ABI's semantics step by step, and requires every other
// language to do exactly the same: the same emitted bytes, failures, log
// lines and final state.
func TestConformance(t *testing.T) {
	var want string
	var wantState []string
	for _, g := range guests {
		for _, batched := range []bool{false, true} {
			name := g.lang
			if batched {
				name += "/batched"
			}
			t.Run(name, func(t *testing.T) {
				steps, state := run(t, g, batched)
				checkSemantics(t, steps, state)
				got := transcript(conformanceBinding.outputs, steps)
				if want == "" {
					want, wantState = got, state
					return
				}
				if got != want {
					t.Errorf("%s differs from go: %s", name, firstDiff(want, got))
				}
				if strings.Join(state, "\n") != strings.Join(wantState, "\n") {
					t.Errorf("%s: final state differs from go:\n%s", name, firstDiff(strings.Join(wantState, "\n"), strings.Join(state, "\n")))
				}
			})
		}
	}
}

// checkSemantics checks one language's run against what the ABI says,
// independently of the other languages.
func checkSemantics(t *testing.T, steps []step, state []string) {
	t.Helper()
	by := map[string][]step{}
	for _, s := range steps {
		by[s.name] = append(by[s.name], s)
	}
	// init: emit and state refused; the config read whole.
	wantInit := []string{"INFO init config " + itoa(len(conformanceBinding.config)), "INFO init emit EPHASE get EPHASE",
		"INFO init time set EPHASE cancel EPHASE stream EPHASE wall EPHASE mark EPHASE"}
	if got := by["init"][0].logs; strings.Join(got, "|") != strings.Join(wantInit, "|") {
		t.Errorf("init logs %q, want %q", got, wantInit)
	}

	// Vectors: the input back on out, swapped on side, and unchanged on side.
	vectors, _, _ := abitest.Load(abitest.Path())
	for _, v := range vectors {
		s := by["vector "+v.Name][0]
		if s.err != nil || len(s.emits) != 3 {
			t.Errorf("vector %s: err %v, %d emits", v.Name, s.err, len(s.emits))
			continue
		}
		want := v.Record
		want.Offset, want.Partition, want.Index = abi.NoOffset, abi.AnyPartition, 0
		if got := s.emits[0].raw; !bytes.Equal(got, want.AppendEncode(nil)) || s.emits[0].output != 0 {
			t.Errorf("vector %s: out got %x, want %x", v.Name, got, want.AppendEncode(nil))
		}
		sw := abi.Record{Timestamp: v.Record.Timestamp, Offset: abi.NoOffset, Partition: v.Record.Partition & 3,
			Index: 1, Key: v.Record.Value, Value: v.Record.Key}
		if got := s.emits[1].raw; !bytes.Equal(got, sw.AppendEncode(nil)) {
			t.Errorf("vector %s: swapped got %x, want %x", v.Name, got, sw.AppendEncode(nil))
		}
		want.Index = 1
		if got := s.emits[2].raw; !bytes.Equal(got, want.AppendEncode(nil)) {
			t.Errorf("vector %s: forwarded got %x, want %x", v.Name, got, want.AppendEncode(nil))
		}
	}

	notes := map[string]string{}
	for _, s := range steps {
		for _, e := range s.emits {
			if e.output == 1 && strings.HasPrefix(s.name, "cmd:") {
				r := e.record(t)
				notes[string(r.Key)] = string(r.Value)
			}
		}
	}
	wantNotes := map[string]string{
		"names": "1 0 1 ENONAME ENONAME", "log-level-4": "EINVAL", "log": "ok",
		"get-missing": "missing", "put-empty": "ok", "get-empty": "found:", "put-v1": "ok", "get-staged": "found:v1",
		"delete-twice": "ok", "get-deleted": "missing", "put-aux": "ok", "get-other-store": "missing",
		"get-aux": "found:aux", "put-long-key": "ETOOLARGE", "get-long-key": "ETOOLARGE",
		"put-huge-value": "ETOOLARGE", "put-max-value": "ok", "counter": "3",
		"scan-close": "ok", "cursor-17": "ELIMIT", "next-bad": "ENOCURSOR", "close-bad": "ENOCURSOR",
		"get-bad-store": "ENOSTORE", "scan-bad-store": "ENOSTORE",
		"emit-huge": "ETOOLARGE", "emit-malformed": "EINVAL",
	}
	for k, v := range wantNotes {
		if notes[k] != v {
			t.Errorf("note %s = %q, want %q", k, notes[k], v)
		}
	}

	cfg := by["cmd:config"][0]
	if len(cfg.emits) != 1 || string(cfg.emits[0].record(t).Value) != conformanceBinding.config {
		t.Errorf("cmd:config: emits %d", len(cfg.emits))
	}
	lg := by["cmd:log"][0].logs
	wantLog := []string{"DEBUG debug line", "INFO info line", "WARN warn line", "ERROR error line",
		"INFO " + strings.Repeat("L", abi.MaxLogSize) + " (truncated)"}
	if strings.Join(lg, "|") != strings.Join(wantLog, "|") {
		t.Errorf("cmd:log logs %.200q", lg)
	}
	st := by["cmd:state"][0]
	var big []byte
	for _, e := range st.emits {
		if r := e.record(t); string(r.Key) == "get-big" {
			big = r.Value
		}
	}
	if len(big) != 200000 || big[199999] != byte(199999*7%251) {
		t.Errorf("cmd:state: get-big came back with %d bytes", len(big))
	}

	// scan: prefix s/ in order with values whole, [s/b, s/d) on side, [s/c, ∞) with lengths.
	var scanned []string
	for _, e := range by["cmd:scan"][0].emits {
		r := e.record(t)
		if e.output == 0 || strings.HasPrefix(string(r.Key), "s/") {
			v := string(r.Value)
			if len(v) > 20 {
				v = itoa(len(v)) + "B"
			}
			scanned = append(scanned, itoa(e.output)+":"+string(r.Key)+"="+v)
		}
	}
	wantScan := "0:s/a=aaaaaaaaaa 0:s/b=700B 0:s/c=70000B 0:s/d= 1:s/b=700B 1:s/c=70000B 0:s/c=70000 0:s/d=0 0:t/x=1"
	if got := strings.Join(scanned, " "); got != wantScan {
		t.Errorf("cmd:scan emitted\n  %s\nwant\n  %s", got, wantScan)
	}

	hd := by["cmd:headers"][0]
	if len(hd.emits) != 4 {
		t.Fatalf("cmd:headers: %d emits", len(hd.emits))
	}
	h0 := hd.emits[0].record(t)
	if h0.Key == nil || len(h0.Key) != 0 || h0.Value != nil || h0.Timestamp != 123 || len(h0.Headers) != 5 ||
		h0.Headers[1].Value != nil || h0.Headers[2].Value == nil || len(h0.Headers[2].Value) != 0 ||
		h0.Headers[3].Key != "" || string(h0.Headers[4].Value) != "2" {
		t.Errorf("cmd:headers: first emit %+v", h0)
	}
	h1, h2, h3 := hd.emits[1].record(t), hd.emits[2].record(t), hd.emits[3].record(t)
	if h1.Key != nil || h1.Value == nil || len(h1.Value) != 0 || h1.Timestamp != 1000+6 {
		t.Errorf("cmd:headers: second emit %+v (want null key, empty value, the input's timestamp)", h1)
	}
	if h2.Partition != 5 || h3.Partition != 0 || h3.Key != nil || h3.Value != nil || hd.emits[2].output != 1 {
		t.Errorf("cmd:headers: explicit partitions %+v %+v", h2, h3)
	}

	wantFail := map[string]string{
		"cmd:fail":     "plugin failed: conformance: rejected on purpose",
		"cmd:eio":      "host failed: state get: injected store failure",
		"cmd:fault":    "ABI misuse: EFAULT",
		"cmd:nooutput": "ABI misuse: ENOOUTPUT",
		"cmd:trap":     "trap: wasmstream_process: wasm error: out of bounds memory access",
	}
	for name, want := range wantFail {
		s := by[name][0]
		if s.err == nil || failure(s.err) != want || len(s.emits) != 0 {
			t.Errorf("%s: failure %v, %d emits; want %q and none", name, s.err, len(s.emits), want)
		}
	}
	// After cmd:trap and cmd:fault, the next call ran on a fresh instance
	// restored from the snapshot of the first one's init (engine
	// snapshot.go): init did not run again.
	if l := by["cmd:rawemit"][0].logs; len(l) > 0 && strings.HasPrefix(l[0], "INFO init") {
		t.Errorf("cmd:rawemit: logs %q; init ran again (the replacement is restored from its snapshot)", l)
	}
	if l := by["cmd:state"][2].logs; len(l) > 0 && strings.HasPrefix(l[0], "INFO init") {
		t.Errorf("third cmd:state: logs %q; init ran again (the replacement is restored from its snapshot)", l)
	}
	for _, e := range state {
		if strings.Contains(e, "fail-k") || strings.Contains(e, `"max"`) || strings.Contains(e, `"huge"`) {
			t.Errorf("final state holds %s", e)
		}
	}
	if !strings.Contains(strings.Join(state, "\n"), `kv/"counter"=1:"3"`) {
		t.Errorf("final state %q: want counter 3", state)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestConformanceUndeclared starts every language's processor with a
// config that lacks one of its outputs and one of its stores: each
// resolves its declared handles when it starts, so the start fails, with
// the same message naming both (abi/ABI.md section 9).
func TestConformanceUndeclared(t *testing.T) {
	const want = `sdk: not declared by the processor (add to its outputs or stores in the pipeline config): output "side", store "kv"`
	b := binding{outputs: []string{"out"}, stores: []string{"aux"}, config: "{}"}
	for _, g := range guests {
		t.Run(g.lang, func(t *testing.T) {
			m, _ := module(t, "conformance-"+g.lang, g.wasm(t))
			_, err := m.Instantiate(context.Background(), engine.Binding{Name: "undeclared-" + g.lang, Outputs: b.outputs,
				Stores: b.stores, Config: []byte(b.config), Sink: &sink{}, State: newMemState(1), Time: noTime{}})
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("start: %v\nwant the message %s", err, want)
			}
		})
	}
}

// TestRustPanicInBatch: a Rust processor's panic aborts (panic = "abort"),
// so its call traps, in a batch too: the panicking record fails alone (the
// records before it in the batch keep their emits, the ones after it run
// on a fresh instance), exactly as one record at a time. (Go recovers a
// panic and fails the record without a trap; C has none: this is Rust's.)
func TestRustPanicInBatch(t *testing.T) {
	var rust guest
	for _, g := range guests {
		if g.lang == "rust" {
			rust = g
		}
	}
	vectors, _, err := abitest.Load(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"vector", "cmd:state", "cmd:panic", "vector", "cmd:state"}
	recs := []abi.Record{vectors[2].Record, {Key: []byte("cmd:state")}, {Key: []byte("cmd:panic")}, vectors[3].Record,
		{Key: []byte("cmd:state")}}
	var want string
	for _, batched := range []bool{false, true} {
		p := start(t, "conformance-rust", rust.wasm(t), conformanceBinding)
		var steps []step
		if batched {
			steps, _ = p.processBatch(names, recs)
		} else {
			for k := range recs {
				steps = append(steps, p.process(names[k], recs[k]))
			}
		}
		var re *engine.RecordError
		if s := steps[2]; !errors.As(s.err, &re) || re.Kind != engine.Trap || !strings.Contains(re.Msg, "unreachable") ||
			!strings.Contains(re.Msg, "conformance: panic on purpose") {
			t.Fatalf("batched %v: the panic: %v; want a trap with the panic's text", batched, s.err)
		}
		if batched && steps[2].pos != 2 {
			t.Errorf("the panic at position %d of its batch, want 2", steps[2].pos)
		}
		for _, k := range []int{0, 1, 3, 4} {
			if steps[k].err != nil || len(steps[k].emits) == 0 {
				t.Errorf("batched %v: %s (%d): %v, %d emits", batched, names[k], k, steps[k].err, len(steps[k].emits))
			}
		}
		if l := steps[3].logs; len(l) > 0 && strings.HasPrefix(l[0], "INFO init") {
			t.Errorf("batched %v: the record after the panic: logs %q; init ran again (the replacement is restored from its snapshot)", batched, l)
		}
		got := transcript(conformanceBinding.outputs, steps) + strings.Join(p.state.dump(conformanceBinding.stores), "\n")
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("in a batch differs from one at a time: %s", firstDiff(want, got))
		}
	}
}

// TestRustDeclaredHandles: a Rust processor's output! and store! handles
// are checked by the host before the plugin starts, with no list in
// processor! and however lazily the plugin resolves them (the word count
// resolves its store and output only on its first record): a config that
// lacks one fails the start, which is what `validate` runs, naming it.
func TestRustDeclaredHandles(t *testing.T) {
	m, _ := module(t, "wordcount-rust", pluginWasm(t, "rust", "wordcount"))
	want := []engine.Handle{{Kind: "store", Name: "counts"}, {Kind: "output", Name: "counts"}}
	if got := m.Info().Handles; !slices.Equal(got, want) {
		t.Fatalf("declared handles %v, want %v", got, want)
	}
	_, err := m.Instantiate(context.Background(), engine.Binding{Name: "wordcount", Outputs: []string{"counts"},
		Config: []byte("{}"), Sink: &sink{}, Time: noTime{}})
	var me *engine.ModuleError
	if !errors.As(err, &me) || !slices.Equal(me.Undeclared, []engine.Undeclared{{Kind: "store", Name: "counts"}}) {
		t.Fatalf("start without the store: %v, want it refused naming store \"counts\"", err)
	}
}
