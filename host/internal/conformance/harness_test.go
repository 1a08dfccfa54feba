package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"
)

// binding is what a processor declares, as in the host's config.
type binding struct {
	outputs []string
	stores  []string
	config  string
	// marks serves commit_mark (markTime) instead of failing every time
	// call (noTime), for the modes that mark keys.
	marks bool
	// timed serves every time call (scriptTime, time_test.go).
	timed bool
}

// emitted is one record a plugin emitted: the output's index and the
// record's layout as the engine handed it to the Sink, re-encoded.
type emitted struct {
	output int
	raw    []byte
}

func (e emitted) record(t testing.TB) abi.Record {
	t.Helper()
	var r abi.Record
	if err := r.Decode(e.raw); err != nil {
		t.Fatalf("re-decoding an emitted record: %v", err)
	}
	return r
}

type sink struct{ out []emitted }

func (s *sink) Emit(output int, rec *abi.Record) error {
	s.out = append(s.out, emitted{output, rec.AppendEncode(nil)})
	return nil
}

// errInjected is the State failure behind the key failKey.
var errInjected = errors.New("injected store failure")

// failKey is the key whose reads the test State fails (cmd:eio).
const failKey = "eio"

// memState is the test's State: committed maps per store and a per-record
// overlay of staged writes (nil = deleted), committed when the record
// succeeds and dropped when it fails, as the runner does with Pebble.
type memState struct {
	committed []map[string][]byte
	pending   []map[string][]byte
	deleted   []map[string]bool
}

func newMemState(n int) *memState {
	s := &memState{}
	for range n {
		s.committed = append(s.committed, map[string][]byte{})
		s.pending = append(s.pending, map[string][]byte{})
		s.deleted = append(s.deleted, map[string]bool{})
	}
	return s
}

func (s *memState) Get(store int, key []byte) ([]byte, bool, error) {
	k := string(key)
	if k == failKey {
		return nil, false, errInjected
	}
	if s.deleted[store][k] {
		return nil, false, nil
	}
	if v, ok := s.pending[store][k]; ok {
		return v, true, nil
	}
	v, ok := s.committed[store][k]
	return v, ok, nil
}

func (s *memState) Put(store int, key, value []byte) error {
	delete(s.deleted[store], string(key))
	s.pending[store][string(key)] = bytes.Clone(value)
	return nil
}

func (s *memState) Delete(store int, key []byte) error {
	delete(s.pending[store], string(key))
	s.deleted[store][string(key)] = true
	return nil
}

// view is the store as the current record sees it.
func (s *memState) view(store int) map[string][]byte {
	m := map[string][]byte{}
	for k, v := range s.committed[store] {
		m[k] = v
	}
	for k := range s.deleted[store] {
		delete(m, k)
	}
	for k, v := range s.pending[store] {
		m[k] = v
	}
	return m
}

func (s *memState) Scan(store int, start, end []byte) (engine.Iterator, error) {
	m := s.view(store)
	var keys []string
	for k := range m {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	it := &memIter{}
	for _, k := range keys {
		it.entries = append(it.entries, [2][]byte{[]byte(k), m[k]})
	}
	return it, nil
}

func (s *memState) end(ok bool) {
	for i := range s.pending {
		if ok {
			s.committed[i] = s.view(i)
		}
		s.pending[i] = map[string][]byte{}
		s.deleted[i] = map[string]bool{}
	}
}

// dump is every committed entry, "store/key=<len>:<first bytes>" sorted.
func (s *memState) dump(stores []string) []string {
	var out []string
	for i, name := range stores {
		for k, v := range s.committed[i] {
			out = append(out, fmt.Sprintf("%s/%q=%d:%q", name, k, len(v), v[:min(len(v), 16)]))
		}
	}
	slices.Sort(out)
	return out
}

type memIter struct{ entries [][2][]byte }

func (it *memIter) Next() ([]byte, []byte, bool, error) {
	if len(it.entries) == 0 {
		return nil, nil, false, nil
	}
	e := it.entries[0]
	it.entries = it.entries[1:]
	return e[0], e[1], true, nil
}

func (it *memIter) Close() error { return nil }

// logCapture keeps the lines plugins log, "LEVEL msg" (with " (truncated)"
// when the host cut it).
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "truncated" {
			line += " (truncated)"
		}
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func (h *logCapture) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.lines
	h.lines = nil
	return l
}

// plugin is one module running through the engine with the test's Sink
// and State.
type plugin struct {
	b     binding
	inst  *engine.Instance
	sink  *sink
	state *memState
	logs  *logCapture
	// marks is the Time of a binding with marks, else nil.
	marks *markTime
	// clock is the Time of a timed binding, else nil.
	clock *scriptTime
	// initLogs are the lines logged while the instance started.
	initLogs []string
}

// The runtime and the compiled modules are shared by the package's tests:
// compiling a Go module takes about half a second, and the tests start
// dozens of instances. Tests do not run in parallel, so the one log
// capture is drained per instance and per record.
var shared struct {
	mu   sync.Mutex
	rt   *engine.Runtime
	logs *logCapture
	mods map[string]*engine.Module
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.rt != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		shared.rt.Close(ctx)
		cancel()
	}
	os.Exit(code)
}

// module compiles wasm once per name in the shared runtime.
func module(t testing.TB, name string, wasm []byte) (*engine.Module, *logCapture) {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.rt == nil {
		shared.logs = &logCapture{}
		rt, err := engine.NewRuntime(context.Background(), engine.Options{Logger: slog.New(shared.logs)})
		if err != nil {
			t.Fatal(err)
		}
		shared.rt, shared.mods = rt, map[string]*engine.Module{}
	}
	key := name + "\x00" + string(wasm)
	if m := shared.mods[key]; m != nil {
		return m, shared.logs
	}
	m, err := shared.rt.Compile(context.Background(), name, wasm)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	shared.mods[key] = m
	return m, shared.logs
}

// start instantiates wasm (compiled once per name and content) with b.
func start(t testing.TB, name string, wasm []byte, b binding) *plugin {
	t.Helper()
	m, logs := module(t, name, wasm)
	logs.take()
	p := &plugin{b: b, sink: &sink{}, state: newMemState(len(b.stores)), logs: logs}
	var tm engine.Time = noTime{}
	if b.marks {
		p.marks = &markTime{marked: map[string]int64{}, staged: map[string]int64{}}
		tm = p.marks
	}
	if b.timed {
		p.clock = newScriptTime()
		tm = p.clock
	}
	var err error
	p.inst, err = m.Instantiate(context.Background(), engine.Binding{Name: name, Outputs: b.outputs, Stores: b.stores,
		Config: []byte(b.config), Sink: p.sink, State: p.state, Time: tm})
	if err != nil {
		t.Fatalf("instantiate %s: %v", name, err)
	}
	t.Cleanup(func() { p.inst.Close(context.Background()) })
	p.initLogs = logs.take()
	return p
}

// noTime is the Time of the comparisons, for the modules that link a time
// import they do not call in the mode compared (the Go wordcount links
// commit_mark for its emit: commit). A call fails the record (EIO), which
// the transcripts show.
type noTime struct{}

var errNoTime = errors.New("conformance: no time in these comparisons")

func (noTime) Now() (int64, int64) { return abi.NoTime, 0 }
func (noTime) SetTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errNoTime
}
func (noTime) CancelTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errNoTime
}
func (noTime) Mark([]byte, int64) (bool, error) { return false, errNoTime }

// markTime is the Time of a binding with marks: commit_mark stages the key
// with the call's writes; the other time calls fail as with noTime.
type markTime struct {
	noTime
	marked map[string]int64 // the window's keys, with their last mark's timestamp
	staged map[string]int64 // the current call's
}

func (m *markTime) Mark(key []byte, ts int64) (bool, error) {
	_, a := m.marked[string(key)]
	_, b := m.staged[string(key)]
	m.staged[string(key)] = ts
	return !a && !b, nil
}

func (m *markTime) end(ok bool) {
	if ok {
		maps.Copy(m.marked, m.staged)
	}
	clear(m.staged)
}

// commit ends the window: one on_commit call per marked key, in key order,
// a step each ("commit <key>").
func (p *plugin) commit() []step {
	keys := slices.Sorted(maps.Keys(p.marks.marked))
	var steps []step
	for _, k := range keys {
		p.sink.out = nil
		trig := abi.Trigger{Timestamp: p.marks.marked[k], StreamTime: abi.NoTime, Kind: abi.TriggerCommit, Key: []byte(k)}
		err := p.inst.OnCommit(context.Background(), &trig)
		p.state.end(err == nil) // on_commit cannot mark (EPHASE): no marks to end
		s := step{name: "commit " + k, err: err, logs: p.logs.take()}
		if err == nil {
			s.emits = p.sink.out
		}
		steps = append(steps, s)
	}
	clear(p.marks.marked)
	return steps
}

// commitBatch is commit with the window's commit calls in one batch.
func (p *plugin) commitBatch() ([]step, int) {
	keys := slices.Sorted(maps.Keys(p.marks.marked))
	calls, names := make([]engine.Call, len(keys)), make([]string, len(keys))
	for k, key := range keys {
		// The clocks markTime.Now gives the single call.
		calls[k] = engine.Call{Trigger: &abi.Trigger{Timestamp: p.marks.marked[key], StreamTime: abi.NoTime,
			Kind: abi.TriggerCommit, Key: []byte(key)}}
		names[k] = "commit " + key
	}
	clear(p.marks.marked)
	return p.runCalls(calls, names, nil, nil)
}

// step is what one record (or callback) did.
type step struct {
	name  string
	emits []emitted
	err   error
	logs  []string
	// pos is the call's position in its batch (0 for a single call): a
	// failure at pos > 0 came in the middle of a batch.
	pos int
}

// endCall keeps (ok) or drops the call's staged state writes, marks and
// timer changes.
func (p *plugin) endCall(ok bool) {
	p.state.end(ok)
	if p.marks != nil {
		p.marks.end(ok)
	}
	if p.clock != nil {
		p.clock.end(ok)
	}
}

// process runs one record; its emits and state writes stand only if it
// succeeds.
func (p *plugin) process(name string, rec abi.Record) step {
	p.sink.out = nil
	err := p.inst.Process(context.Background(), &rec)
	p.endCall(err == nil)
	s := step{name: name, err: err, logs: p.logs.take()}
	if err == nil {
		s.emits = p.sink.out
	}
	return s
}

// processBatch runs records through engine.ProcessBatch, batch after batch
// until each has ended, as the runner does: a step per record, exactly as
// process makes them one at a time (the SDKs that speak ABI version 2 take
// them in batches; the others one at a time through the same call).
func (p *plugin) processBatch(names []string, recs []abi.Record) (steps []step, batches int) {
	calls := make([]engine.Call, len(recs))
	for k := range recs {
		calls[k] = engine.Call{Record: &recs[k]}
	}
	return p.runCalls(calls, names, nil, nil)
}

// runCalls runs calls (all records or all triggers) through
// engine.ProcessBatch, batch after batch until each has ended, a step per
// call named names[k]. begin runs as call k begins (the runner moves the
// stream time there); stop, after call k ended, cuts the batch after it
// and makes runCalls return (the runner does so where it must act before
// the next call, as when a timer came due): the caller hands the calls
// from len(steps) on again. It returns the steps and the number of
// ProcessBatch calls.
func (p *plugin) runCalls(calls []engine.Call, names []string, begin func(k int), stop func(k int) bool) (steps []step, batches int) {
	h := &stepHooks{p: p, names: names, begin: begin, stop: stop}
	for h.base < len(calls) && !h.stopped {
		n := p.inst.ProcessBatch(context.Background(), calls[h.base:], h, time.Time{})
		if n == 0 {
			panic("ProcessBatch ended no call")
		}
		// A call that began without ending would leave staged writes.
		p.endCall(false)
		h.base += n
		batches++
	}
	return h.steps, batches
}

// stepHooks make a step of every call of a batch.
type stepHooks struct {
	p       *plugin
	names   []string
	base    int
	steps   []step
	begin   func(k int)
	stop    func(k int) bool
	stopped bool // stop cut a batch
}

func (h *stepHooks) Begin(k int) {
	h.p.sink.out = nil
	if h.begin != nil {
		h.begin(h.base + k)
	}
}

func (h *stepHooks) End(k int, err error) bool {
	p := h.p
	p.endCall(err == nil)
	s := step{name: h.names[h.base+k], err: err, logs: p.logs.take(), pos: k}
	if err == nil {
		s.emits = p.sink.out
	}
	h.steps = append(h.steps, s)
	if h.stop != nil && h.stop(h.base+k) {
		h.stopped = true
	}
	return h.stopped
}

// transcript renders steps for a byte-for-byte comparison: every emit's
// output and layout in hex, every failure's kind and message (for ABI
// misuse, only the errno: the host's message names addresses and memory
// sizes, which differ between languages), every log line.
func transcript(outputs []string, steps []step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "== %s\n", s.name)
		for _, l := range s.logs {
			fmt.Fprintf(&b, "log %s\n", l)
		}
		for _, e := range s.emits {
			fmt.Fprintf(&b, "emit %s %x\n", outputs[e.output], e.raw)
		}
		if s.err != nil {
			fmt.Fprintf(&b, "fail %s\n", failure(s.err))
		}
	}
	return b.String()
}

// failure is a failed record's kind and message as the transcript has it.
func failure(err error) string {
	var re *engine.RecordError
	if !errors.As(err, &re) {
		return "not a record error: " + err.Error()
	}
	if re.Kind == engine.ABIMisuse {
		for _, e := range []abi.Errno{abi.ErrnoFault, abi.ErrnoNoOutput, abi.ErrnoInval} {
			if strings.Contains(re.Msg, e.Name()) {
				return re.Kind.String() + ": " + e.Name()
			}
		}
	}
	return re.Kind.String() + ": " + re.Msg
}

// firstDiff is the first line where a and b differ, cut for a message.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  want %.300s\n  got  %.300s", i+1, x, y)
		}
	}
	return "no difference"
}
