package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// Tests of batches (abi/ABI.md section 10; batch.go) on testdata/batch,
// whose records are programs (see batch.wat), against a driver that does
// what the runner does: stage each call's state writes and emits, keep
// them if the call succeeds, hand the calls that did not run again.

// bop is one command of a batch.wat program.
type bop struct{ code, a uint32 }

const (
	bopPut      = 1
	bopEmit     = 2
	bopGet      = 3
	bopFail     = 4
	bopTrap     = 5
	bopSpin     = 6
	bopStatus   = 7
	bopDone     = 8
	bopEarly    = 9
	bopBadOut   = 10
	bopEmitTo   = 11
	bopReckless = 12
	bopBadEntry = 13
	bopBusy     = 14
)

func batchProgram(ops ...bop) []byte {
	var b []byte
	for _, o := range ops {
		b = binary.LittleEndian.AppendUint32(b, o.code)
		b = binary.LittleEndian.AppendUint32(b, o.a)
	}
	return b
}

func progRec(key string, ops ...bop) Call {
	r := rec(key, "")
	r.Value = batchProgram(ops...)
	return Call{Record: r}
}

// stagedState is a State whose writes are staged per call and kept or
// dropped when the call ends, as the runner's state does.
type stagedState struct {
	committed map[string][]byte
	call      map[string][]byte // nil value: deleted
}

func newStagedState() *stagedState {
	return &stagedState{committed: map[string][]byte{}, call: map[string][]byte{}}
}

func (s *stagedState) Get(_ int, key []byte) ([]byte, bool, error) {
	if v, ok := s.call[string(key)]; ok {
		return v, v != nil, nil
	}
	v, ok := s.committed[string(key)]
	return v, ok, nil
}

func (s *stagedState) Put(_ int, key, value []byte) error {
	s.call[string(key)] = bytes.Clone(value)
	return nil
}

func (s *stagedState) Delete(_ int, key []byte) error {
	s.call[string(key)] = nil
	return nil
}

func (s *stagedState) Scan(int, []byte, []byte) (Iterator, error) {
	return nil, errors.New("no scans here")
}

func (s *stagedState) end(ok bool) {
	if ok {
		for k, v := range s.call {
			if v == nil {
				delete(s.committed, k)
			} else {
				s.committed[k] = v
			}
		}
	}
	clear(s.call)
}

// driver runs calls like the runner: per call, Begin and End in order,
// staged emits kept only for a call that succeeded; the calls a batch did
// not end are handed again.
type driver struct {
	t       *testing.T
	st      *stagedState
	staged  []string // the call in progress's emits
	out     []string // emits of succeeded calls, "call:key=value"
	results []string // per call: "ok" or "kind: message"
	events  []string // "begin k", "end k"
	cur     int      // index into all calls of the call in progress
	base    int      // index of the batch's first call
	began   bool
	stopAt  map[int]bool // End asks to stop after these calls (absolute)
}

func (d *driver) Emit(output int, r *abi.Record) error {
	d.staged = append(d.staged, fmt.Sprintf("%d:%s=%x", output, r.Key, r.Value))
	return nil
}

func (d *driver) Begin(k int) {
	if d.began {
		d.t.Fatalf("Begin(%d) while call %d is open", d.base+k, d.cur)
	}
	d.cur, d.began = d.base+k, true
	d.events = append(d.events, fmt.Sprint("begin ", d.base+k))
}

func (d *driver) End(k int, err error) bool {
	if !d.began || d.cur != d.base+k {
		d.t.Fatalf("End(%d) without its Begin (open: %v %d)", d.base+k, d.began, d.cur)
	}
	d.began = false
	d.events = append(d.events, fmt.Sprint("end ", d.base+k))
	d.st.end(err == nil)
	if err == nil {
		d.results = append(d.results, "ok")
		for _, e := range d.staged {
			d.out = append(d.out, fmt.Sprintf("%d/%s", d.base+k, e))
		}
	} else {
		d.results = append(d.results, KindOf(err).String()+": "+err.(*RecordError).Msg)
	}
	d.staged = d.staged[:0]
	return d.stopAt[d.base+k]
}

// run hands all calls to i until each has ended, batch after batch (or
// one at a time with single), and returns the number of ProcessBatch
// calls it took.
func (d *driver) run(i *Instance, calls []Call, single bool) int {
	d.t.Helper()
	n := 0
	for d.base = 0; d.base < len(calls); n++ {
		var ended int
		if single {
			d.Begin(0)
			d.End(0, i.callOne(context.Background(), &calls[d.base]))
			ended = 1
		} else {
			ended = i.ProcessBatch(context.Background(), calls[d.base:], d, time.Time{})
		}
		if ended == 0 {
			d.t.Fatalf("ProcessBatch ended no call at %d", d.base)
		}
		if d.began {
			d.t.Fatalf("call %d began but did not end", d.cur)
		}
		// A call that began without ending must not have left anything.
		d.st.end(false)
		d.staged = d.staged[:0]
		d.base += ended
		if n > 10*len(calls) {
			d.t.Fatal("no progress")
		}
	}
	return n
}

func newDriver(t *testing.T) *driver {
	return &driver{t: t, st: newStagedState(), stopAt: map[int]bool{}}
}

func batchInstance(t *testing.T, o Options, d *driver) *Instance {
	r, _ := newRuntime(t, o)
	m := compileFile(t, r, "batch")
	if !m.Info().Batch || m.Info().ABIVersion != abi.VersionBatch {
		t.Fatalf("batch.wasm: Batch %v, ABI version %d", m.Info().Batch, m.Info().ABIVersion)
	}
	i, _ := instantiate(t, m, Binding{Outputs: []string{"out"}, Stores: []string{"s"}, Sink: d, State: d.st})
	return i
}

// compare runs calls through batches and one at a time on fresh
// instances and requires the same results, emits and state.
func compare(t *testing.T, calls []Call, stopAt ...int) *driver {
	t.Helper()
	batched, single := newDriver(t), newDriver(t)
	for _, k := range stopAt {
		batched.stopAt[k] = true
		single.stopAt[k] = true
	}
	batched.run(batchInstance(t, Options{}, batched), calls, false)
	single.run(batchInstance(t, Options{}, single), calls, true)
	if !slices.Equal(batched.results, single.results) {
		t.Errorf("results:\nbatched %q\n single %q", batched.results, single.results)
	}
	if !slices.Equal(batched.out, single.out) {
		t.Errorf("emits:\nbatched %q\n single %q", batched.out, single.out)
	}
	if !maps.EqualFunc(batched.st.committed, single.st.committed, bytes.Equal) {
		t.Errorf("state:\nbatched %q\n single %q", batched.st.committed, single.st.committed)
	}
	return batched
}

func TestBatchLikeSingleCalls(t *testing.T) {
	calls := []Call{
		progRec("a", bop{bopPut, 1}, bop{bopEmit, 10}),
		progRec("a", bop{bopGet, 0}, bop{bopPut, 2}, bop{bopGet, 0}),        // reads the previous call's write
		progRec("b", bop{bopEmitTo, 0}, bop{bopEmit, 11}, bop{bopEmit, 12}), // the emit import's emits come first
		progRec("c", bop{bopPut, 3}, bop{bopEmit, 13}, bop{bopFail, 0}),     // fails: its put and emit are dropped
		progRec("c", bop{bopGet, 0}),
		progRec("d"),
		progRec("a", bop{bopPut, 4}, bop{bopTrap, 0}), // traps: a fresh instance goes on
		progRec("a", bop{bopGet, 0}, bop{bopEmit, 14}),
		progRec("e", bop{bopEmit, 15}, bop{bopStatus, 9}), // unknown status: ABI misuse
		progRec("e", bop{bopEmit, 16}, bop{bopEmitTo, 5}), // undeclared output: ABI misuse
		progRec("f", bop{bopGet, 0}, bop{bopEmit, 17}),
	}
	d := compare(t, calls)
	want := []string{"ok", "ok", "ok", "plugin failed: failed", "ok", "ok", "trap", "ok", "ABI misuse", "ABI misuse", "ok"}
	for k, w := range want {
		if !strings.HasPrefix(d.results[k], w) {
			t.Errorf("call %d: %q, want %s", k, d.results[k], w)
		}
	}
	if !strings.Contains(d.results[8], "wasmstream_process returned unknown status 9") {
		t.Errorf("call 8: %q, want the message a single call gets", d.results[8])
	}
}

// TestBatchCalls checks that a batch is one guest call for many records
// and that End's stop cuts it: the calls after the stop run again, once.
func TestBatchCalls(t *testing.T) {
	var calls []Call
	for k := range 20 {
		calls = append(calls, progRec(fmt.Sprint("k", k%3), bop{bopGet, 0}, bop{bopPut, uint32(k)}, bop{bopEmit, uint32(k)}))
	}
	d := newDriver(t)
	i := batchInstance(t, Options{}, d)
	if n := d.run(i, calls, false); n != 1 {
		t.Errorf("%d batch calls for %d records, want 1", n, len(calls))
	}
	// Stops after calls 4 and 12: three batches, the same outcome.
	d2 := compare(t, calls, 4, 12)
	if len(d2.out) != 40 {
		t.Errorf("%d emits, want 40", len(d2.out))
	}
	for k := range calls {
		if c := slices.Index(d2.events, fmt.Sprint("begin ", k)); c < 0 || slices.Index(d2.events[c+1:], fmt.Sprint("begin ", k)) >= 0 {
			t.Errorf("call %d did not begin exactly once: %q", k, d2.events)
		}
	}
}

// TestBatchRecklessPlugin: a plugin that goes on after a failure and
// ignores the stop word. The calls it runs past the cut leave nothing
// (their host calls get EPHASE) and run again in the next batch, once.
func TestBatchRecklessPlugin(t *testing.T) {
	calls := []Call{
		progRec("a", bop{bopReckless, 0}, bop{bopPut, 1}, bop{bopEmit, 1}),
		progRec("b", bop{bopPut, 2}, bop{bopFail, 0}),
		progRec("c", bop{bopPut, 3}, bop{bopEmit, 3}),
		progRec("d", bop{bopGet, 0}, bop{bopEmit, 4}),
		progRec("e", bop{bopPut, 5}, bop{bopEmit, 5}),
	}
	compare(t, calls, 3)
}

// TestBatchProtocolAbuse: what a plugin can do wrong to the batch itself
// fails the call in progress as an ABI misuse, keeps the calls it
// finished, and never loops.
func TestBatchProtocolAbuse(t *testing.T) {
	for _, c := range []struct {
		name string
		bad  []bop
		want string
	}{
		// The bad call reads first, so the host has seen the calls before
		// it end when it breaks the protocol.
		{"done backwards", []bop{{bopGet, 0}, {bopDone, 0}}, "done count went from 2 to 0"},
		{"done past count", []bop{{bopGet, 0}, {bopDone, 99}}, "done count went from 2 to 99"},
		{"return unfinished", []bop{{bopEarly, 0}}, "returned without finishing a call"},
		{"return in a call", []bop{{bopGet, 0}, {bopEarly, 0}}, "returned before finishing call"},
		{"emits outside memory", []bop{{bopEmit, 1}, {bopBadOut, 0x7ffffff0}}, "staged emits [2147483632, 2147483732) are outside plugin memory"},
		{"malformed emit entry", []bop{{bopEmit, 1}, {bopBadEntry, 0}}, "an entry's length runs past"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := []Call{
				progRec("a", bop{bopPut, 1}, bop{bopEmit, 1}),
				progRec("b", bop{bopPut, 2}, bop{bopEmit, 2}),
				progRec("bad", append(c.bad, bop{bopPut, 9})...),
				progRec("c", bop{bopGet, 0}, bop{bopPut, 3}, bop{bopEmit, 3}),
			}
			d := newDriver(t)
			i := batchInstance(t, Options{}, d)
			d.run(i, calls, false)
			if !slices.Equal(d.results[:2], []string{"ok", "ok"}) || d.results[3] != "ok" {
				t.Errorf("results %q", d.results)
			}
			if !strings.HasPrefix(d.results[2], "ABI misuse") || !strings.Contains(d.results[2], c.want) {
				t.Errorf("bad call: %q, want ABI misuse with %q", d.results[2], c.want)
			}
			for _, e := range d.out {
				if strings.HasPrefix(e, "2/") {
					t.Errorf("the bad call's emit %q was kept", e)
				}
			}
			if _, ok := d.st.committed["bad"]; ok {
				t.Error("the bad call's state write was kept")
			}
			if len(d.out) != 4 {
				t.Errorf("emits %q, want one each of calls 0 and 1, two of call 3", d.out)
			}
		})
	}
}

// TestBatchTimeout: every call of a batch has its own time budget, from
// the end of the previous one, whether or not it makes host calls: calls
// that each take most of the budget pass, a spinning one times out alone.
func TestBatchTimeout(t *testing.T) {
	d := newDriver(t)
	i := batchInstance(t, Options{RecordTimeout: 400 * time.Millisecond}, d)
	// Calls that take a while but finish: a State whose Get takes 150 ms.
	i.b.State = &slowState{stagedState: d.st, delay: 150 * time.Millisecond}
	var calls []Call
	for k := range 5 {
		calls = append(calls, progRec(fmt.Sprint("k", k), bop{bopGet, 0}, bop{bopPut, uint32(k)}))
	}
	calls = append(calls, progRec("spin", bop{bopPut, 7}, bop{bopSpin, 0}), progRec("after", bop{bopPut, 8}))
	start := time.Now()
	d.run(i, calls, false)
	t.Logf("%d calls in %v", len(calls), time.Since(start))
	want := []string{"ok", "ok", "ok", "ok", "ok", "timeout", "ok"}
	for k, w := range want {
		if !strings.HasPrefix(d.results[k], w) {
			t.Errorf("call %d: %q, want %s", k, d.results[k], w)
		}
	}
	if _, ok := d.st.committed["spin"]; ok {
		t.Error("the timed-out call's write was kept")
	}
	if len(d.st.committed) != 6 {
		t.Errorf("state %q", d.st.committed)
	}
}

// slowState delays every Get.
type slowState struct {
	*stagedState
	delay time.Duration
}

func (s *slowState) Get(store int, key []byte) ([]byte, bool, error) {
	time.Sleep(s.delay)
	return s.stagedState.Get(store, key)
}

// TestBatchPureCompute: calls without host calls that together take
// longer than one call's budget pass (the watchdog sees them end through
// the batch's done count).
func TestBatchPureCompute(t *testing.T) {
	d := newDriver(t)
	i := batchInstance(t, Options{RecordTimeout: 150 * time.Millisecond}, d)
	// Each call loops 5 million times: about 5 ms here (a twentieth of
	// the budget leaves room for a loaded machine), 40 of them longer
	// than one call's budget.
	var calls []Call
	for k := range 40 {
		calls = append(calls, progRec(fmt.Sprint("k", k), bop{bopBusy, 5}, bop{bopEmit, uint32(k)}))
	}
	start := time.Now()
	n := d.run(i, calls, false)
	took := time.Since(start)
	t.Logf("%d calls in %v, %d batch calls", len(calls), took, n)
	for k, r := range d.results {
		if r != "ok" {
			t.Errorf("call %d: %s", k, r)
		}
	}
	if took < 150*time.Millisecond {
		t.Logf("the calls took %v together, less than one call's budget: the test proves nothing on this machine", took)
	}
}

// TestBatchTriggers runs timer and commit triggers in a batch and one at
// a time.
func TestBatchTriggers(t *testing.T) {
	var calls []Call
	for k := range 5 {
		kind := abi.TimerEventTime
		if k%2 == 1 {
			kind = abi.TriggerCommit
		}
		calls = append(calls, Call{Trigger: &abi.Trigger{Timestamp: int64(100 + k), Kind: kind, Key: []byte(fmt.Sprint("t", k))}})
	}
	d := compare(t, calls)
	if len(d.out) != 5 {
		t.Errorf("emits %q", d.out)
	}
}

// TestBatchVersion1Module: a version-1 module gets single calls.
func TestBatchVersion1Module(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "passthrough")
	if m.Info().Batch {
		t.Fatal("passthrough speaks version 2")
	}
	d := newDriver(t)
	i, _ := instantiate(t, m, Binding{Sink: d})
	calls := []Call{{Record: rec("a", "1")}, {Record: rec("b", "2")}, {Record: rec("c", "3")}}
	if n := d.run(i, calls, false); n != 1 {
		t.Errorf("%d ProcessBatch calls", n)
	}
	if len(d.out) != 3 || !slices.Equal(d.results, []string{"ok", "ok", "ok"}) {
		t.Errorf("out %q results %q", d.out, d.results)
	}
}

// TestBatchMixedKinds: records and triggers do not share a batch (a
// record moves the stream time a trigger was written with).
func TestBatchMixedKinds(t *testing.T) {
	d := newDriver(t)
	i := batchInstance(t, Options{}, d)
	calls := []Call{progRec("a", bop{bopEmit, 1}), progRec("b", bop{bopEmit, 2}),
		{Trigger: &abi.Trigger{Kind: abi.TriggerCommit, Key: []byte("t")}}}
	if n := i.ProcessBatch(context.Background(), calls, d, time.Time{}); n != 2 {
		t.Errorf("ended %d, want the 2 records", n)
	}
}

// nopHooks are BatchHooks that keep nothing.
type nopHooks struct{ ended int }

func (*nopHooks) Begin(int) {}
func (h *nopHooks) End(_ int, err error) bool {
	if err != nil {
		panic(err)
	}
	h.ended++
	return false
}

// TestBatchPassthrough: the WAT and the Go SDK passthroughs in batches
// emit every record as a single call would, with no allocation in the
// engine per batch.
func TestBatchPassthrough(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	mods := map[string]*Module{"wat": compileFile(t, r, "passthrough2")}
	if !testing.Short() {
		mods["go"] = goSDKPassthrough(t, r)
	}
	for name, m := range mods {
		t.Run(name, func(t *testing.T) {
			if !m.Info().Batch {
				t.Fatalf("%s does not speak version 2", name)
			}
			i, sink := instantiate(t, m, Binding{Config: []byte("{}")})
			var calls []Call
			for k := range 50 {
				r := rec(fmt.Sprint("k", k), fmt.Sprint("value ", k))
				r.Offset = int64(k)
				if k%7 == 3 {
					r.Headers = []abi.Header{{Key: "h", Value: []byte{byte(k)}}}
				}
				if k%11 == 5 {
					r.Key = nil
				}
				calls = append(calls, Call{Record: r})
			}
			h := &nopHooks{}
			if n := i.ProcessBatch(bg, calls, h, time.Time{}); n != len(calls) || h.ended != len(calls) {
				t.Fatalf("ended %d (%d), want %d", n, h.ended, len(calls))
			}
			got := sink.take()
			if len(got) != len(calls) {
				t.Fatalf("%d emits for %d records", len(got), len(calls))
			}
			for k, e := range got {
				want := *calls[k].Record
				want.Offset = -1
				want.Index = 0
				want.Partition = -1
				if name == "wat" {
					want.Partition = calls[k].Record.Partition // the WAT leaves it
				}
				if e.output != 0 || !bytes.Equal(e.rec.Key, want.Key) || (e.rec.Key == nil) != (want.Key == nil) ||
					!bytes.Equal(e.rec.Value, want.Value) || e.rec.Timestamp != want.Timestamp ||
					e.rec.Offset != -1 || len(e.rec.Headers) != len(want.Headers) || e.rec.Partition != want.Partition {
					t.Errorf("emit %d: %+v, want %+v", k, e.rec, want)
				}
			}
			j, _ := instantiate(t, m, Binding{Config: []byte("{}"), Sink: &countSink{}})
			big := make([]Call, 100)
			for k := range big {
				big[k] = Call{Record: benchRecord()}
			}
			j.ProcessBatch(bg, big, h, time.Time{})
			if n := testing.AllocsPerRun(50, func() { j.ProcessBatch(bg, big, h, time.Time{}) }); n != 0 {
				t.Errorf("ProcessBatch allocates %v times per batch of 100", n)
			}
		})
	}
}

// BenchmarkBatch is the per-record cost of the passthroughs, WAT and Go
// SDK, one call per record (Process) and in batches of 100 (ProcessBatch),
// side by side:
//
//	go test -run '^$' -bench Batch -count 6 ./host/internal/engine/
func BenchmarkBatch(b *testing.B) {
	r, _ := newRuntime(b, Options{CacheDir: benchCacheDir(b)})
	mods := []struct {
		name string
		m    *Module
	}{{"wat", compileFile(b, r, "passthrough2")}, {"go", goSDKPassthrough(b, r)}}
	for _, c := range mods {
		b.Run(c.name+"/single", func(b *testing.B) {
			benchModule(b, c.m, Binding{Config: []byte("{}")}, nil)
		})
		b.Run(c.name+"/batch100", func(b *testing.B) {
			i, err := c.m.Instantiate(bg, Binding{Name: "bench", Outputs: []string{"out"}, Config: []byte("{}"), Sink: &countSink{}})
			if err != nil {
				b.Fatal(err)
			}
			defer i.Close(bg)
			calls := make([]Call, 100)
			for k := range calls {
				calls[k] = Call{Record: benchRecord()}
			}
			h := &nopHooks{}
			i.ProcessBatch(bg, calls, h, time.Time{})
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += len(calls) {
				i.ProcessBatch(bg, calls, h, time.Time{})
			}
		})
	}
}

// TestBatchYield: from yieldAt on the plugin is asked to return after the
// call in progress; what it finished stands and the rest is left. The
// first call always runs.
func TestBatchYield(t *testing.T) {
	for _, c := range []struct {
		name  string
		op    bop
		emits int
	}{{"host calls", bop{bopGet, 0}, 2}, {"no host calls", bop{bopBusy, 1}, 1}} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t)
			// A short record timeout: the watchdog ticks at an eighth of it.
			i := batchInstance(t, Options{RecordTimeout: 400 * time.Millisecond}, d)
			var calls []Call
			for k := range 200 {
				calls = append(calls, progRec(fmt.Sprint("k", k), c.op, bop{bopBusy, 5}, bop{bopEmit, uint32(k)}))
			}
			// In the past: one call.
			if n := i.ProcessBatch(context.Background(), calls, d, time.Now().Add(-time.Second)); n != 1 {
				t.Errorf("yieldAt in the past: %d calls ended, want 1", n)
			}
			d.base = 1
			start := time.Now()
			n := i.ProcessBatch(context.Background(), calls[1:], d, start.Add(30*time.Millisecond))
			took := time.Since(start)
			t.Logf("%d calls in %v", n, took)
			if n == 0 || n >= len(calls)-1 {
				t.Errorf("%d of %d calls ended: the batch did not yield", n, len(calls)-1)
			}
			if len(d.out) != c.emits*(n+1) || len(d.results) != n+1 {
				t.Errorf("%d emits and %d results for %d calls", len(d.out), len(d.results), n+1)
			}
		})
	}
}

// TestClockStride: the clock is read so that a yield is at most about
// yieldSlack late at the call time measured, every call for slow calls and
// at most every maxClockStride calls for fast ones.
func TestClockStride(t *testing.T) {
	for _, c := range []struct {
		elapsed time.Duration
		calls   int
		want    int
	}{
		{0, 0, 1},                                    // nothing measured: every call
		{0, 10, maxClockStride},                      // a clock too coarse to see them
		{time.Microsecond, 1, maxClockStride},        // fast calls: capped
		{10 * time.Microsecond, 1, 50},               // 500 µs / 10 µs
		{100 * time.Microsecond, 20, maxClockStride}, // 5 µs a call: 100, capped
		{yieldSlack, 1, 1},                           // a call as long as the slack
		{time.Second, 3, 1},                          // slow calls: every one
		{-time.Millisecond, 5, maxClockStride},       // a clock that went back
	} {
		if got := clockStride(c.elapsed, c.calls); got != c.want {
			t.Errorf("clockStride(%v, %d) = %d, want %d", c.elapsed, c.calls, got, c.want)
		}
	}
}
