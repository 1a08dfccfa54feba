package engine

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// End-to-end tests of the time ABI with the Go SDK's time plugins
// (plugins/windowcount on sdk/window, plugins/alert on sdk/timer), built
// for wasip1 and driven through the engine by timeTask: a stand-in for the
// runner's side of ABI.md section 8.3 (stream time, checks, commit points)
// on a fakeTime, with no staging (every call here succeeds).

// timeTask drives one instance as a runner does.
type timeTask struct {
	t    *testing.T
	i    *Instance
	ft   *fakeTime
	sink *sinkCapture
	off  int64
}

func newTimeTask(t *testing.T, pkg, config string, outputs, stores []string) *timeTask {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a Go plugin")
	}
	wasm, err := os.ReadFile(wasmbuild.Build(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newRuntime(t, Options{})
	m, err := r.Compile(bg, pkg, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if info := m.Info(); !info.HasOnTimer || !info.ImportsTimerSet {
		t.Fatalf("%s: info %+v", pkg, info)
	}
	ft := newFakeTime(abi.NoTime, 1_700_000_000_000)
	i, sink := instantiate(t, m, Binding{Outputs: outputs, Stores: stores, State: newMemState(len(stores)),
		Time: ft, Config: []byte(config)})
	return &timeTask{t: t, i: i, ft: ft, sink: sink}
}

// record processes one record (moving the stream time first, as ABI.md
// 8.1 says), then runs the event-time check that follows every record.
func (tt *timeTask) record(key string, ts int64) {
	tt.t.Helper()
	if ts >= 0 && ts > tt.ft.stream {
		tt.ft.stream = ts
	}
	tt.off++
	if err := tt.i.Process(bg, &abi.Record{Timestamp: ts, Offset: tt.off, Key: []byte(key), Value: []byte("v")}); err != nil {
		tt.t.Fatalf("record %q@%d: %v", key, ts, err)
	}
	tt.check(false)
}

// check fires the timers due at its start, in abi.TimerLess order, each
// removed before its call; processing-time timers only when wall is set.
func (tt *timeTask) check(wall bool) {
	tt.t.Helper()
	var due []abitest.Timer
	for _, tm := range tt.ft.timers {
		if (tm.Kind == abi.TimerEventTime && tm.TS <= tt.ft.stream) || (wall && tm.Kind == abi.TimerProcessingTime && tm.TS <= tt.ft.wall) {
			due = append(due, tm)
		}
	}
	sortTimers(due)
	for _, tm := range due {
		delete(tt.ft.timers, timerKey(tm.Kind, tm.TS, tm.Key))
		if err := tt.i.OnTimer(bg, &abi.Trigger{Timestamp: tm.TS, Kind: tm.Kind, Key: tm.Key}); err != nil {
			tt.t.Fatalf("timer %s: %v", timerKey(tm.Kind, tm.TS, tm.Key), err)
		}
	}
}

func sortTimers(ts []abitest.Timer) {
	slices.SortFunc(ts, func(a, b abitest.Timer) int {
		if abi.TimerLess(a.Kind, a.TS, a.Key, b.Kind, b.TS, b.Key) {
			return -1
		}
		if abi.TimerLess(b.Kind, b.TS, b.Key, a.Kind, a.TS, a.Key) {
			return 1
		}
		return 0
	})
}

// commit is a commit point: the check of both kinds, then one on_commit
// per marked key in key order; the marks are cleared.
func (tt *timeTask) commit() {
	tt.t.Helper()
	tt.check(true)
	for _, k := range slices.Sorted(maps.Keys(tt.ft.marks)) {
		if err := tt.i.OnCommit(bg, &abi.Trigger{Timestamp: tt.ft.marks[k], Kind: abi.TriggerCommit, Key: []byte(k)}); err != nil {
			tt.t.Fatalf("commit %q: %v", k, err)
		}
	}
	clear(tt.ft.marks)
}

// emits returns what was emitted since the last call, one
// "key value @timestamp" line each.
func (tt *timeTask) emits() []string {
	var out []string
	for _, e := range tt.sink.take() {
		out = append(out, fmt.Sprintf("%s %s @%d", e.rec.Key, e.rec.Value, e.rec.Timestamp))
	}
	return out
}

func (tt *timeTask) expect(what string, want ...string) {
	tt.t.Helper()
	if got := tt.emits(); !slices.Equal(got, want) {
		tt.t.Errorf("%s: emitted\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// The harness fires in the order of the shared vectors.
func TestTimerOrderVectors(t *testing.T) {
	tv, err := abitest.LoadTriggers(abitest.TriggersPath())
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(tv.Given)
	sortTimers(got)
	if len(got) != len(tv.Fired) || len(got) == 0 {
		t.Fatalf("%d timers fired of %d", len(got), len(tv.Fired))
	}
	for k := range got {
		if got[k].Kind != tv.Fired[k].Kind || got[k].TS != tv.Fired[k].TS || !bytes.Equal(got[k].Key, tv.Fired[k].Key) {
			t.Fatalf("fired %d: %+v, want %+v", k, got[k], tv.Fired[k])
		}
	}
}

// TestGoSDKWindowCount: tumbling one-minute windows. With emit "final"
// each window's count comes once, from its event-time timer, when a record
// moves the stream time past its end; with emit "commit" the latest count
// of each changed window comes from on_commit at each commit point.
func TestGoSDKWindowCount(t *testing.T) {
	tt := newTimeTask(t, "./plugins/windowcount", `{"window":"tumbling","size":"1m"}`, []string{"counts"}, []string{"windows"})
	tt.record("a", 1000)
	tt.record("b", 2000)
	tt.record("a", 59000)
	tt.commit()
	tt.expect("before the windows close")
	tt.record("c", 60000) // stream time 60000: [0, 60000) closes
	tt.expect("at 60000",
		`a {"start":0,"end":60000,"count":2} @59000`,
		`b {"start":0,"end":60000,"count":1} @2000`)
	tt.record("a", 30000) // late: counted, not emitted
	tt.record("a", 125000)
	tt.expect("at 125000", `c {"start":60000,"end":120000,"count":1} @60000`)
	tt.commit()
	tt.expect("a commit point with no marks")
	if n := len(tt.ft.timers); n != 1 {
		t.Errorf("%d timers pending, want 1 (a's window [120000, 180000))", n)
	}

	tt = newTimeTask(t, "./plugins/windowcount", `{"window":"tumbling","size":"1m","emit":"commit"}`, []string{"counts"}, []string{"windows"})
	tt.record("a", 1000)
	tt.record("a", 2000)
	tt.record("b", 3000)
	tt.expect("before the commit point")
	tt.commit()
	tt.expect("first commit point",
		`a {"start":0,"end":60000,"count":2} @2000`,
		`b {"start":0,"end":60000,"count":1} @3000`)
	tt.record("a", 4000)
	tt.commit()
	tt.expect("second commit point", `a {"start":0,"end":60000,"count":3} @4000`)
	tt.record("x", 60000) // closes [0, 60000): nothing changed since the last commit point
	tt.expect("at the close")
	tt.commit()
	tt.expect("third commit point", `x {"start":60000,"end":120000,"count":1} @60000`)
}

// TestGoSDKAlert: a processing-time timer per key, moved by each record,
// fires at the first commit point at which the wall time has reached it.
func TestGoSDKAlert(t *testing.T) {
	tt := newTimeTask(t, "./plugins/alert", `{"timeout":"5m"}`, []string{"alerts"}, []string{"alert"})
	w := tt.ft.wall
	tt.record("s1", 111)
	tt.ft.wall = w + 1000
	tt.record("s2", 222)
	tt.ft.wall = w + 299_999
	tt.commit()
	tt.expect("before the deadline")
	tt.ft.wall = w + 300_000
	tt.commit()
	tt.expect("at s1's deadline",
		fmt.Sprintf(`s1 {"status":"silent","last_seen":%d,"silent_ms":300000,"record_timestamp":111} @%d`, w, w+300_000))
	tt.ft.wall = w + 300_500
	tt.record("s2", 333) // moves s2's deadline to w+600500
	tt.ft.wall = w + 301_000
	tt.commit()
	tt.expect("at s2's first deadline")
	tt.ft.wall = w + 700_000
	tt.commit()
	tt.expect("after s2's deadline",
		fmt.Sprintf(`s2 {"status":"silent","last_seen":%d,"silent_ms":399500,"record_timestamp":333} @%d`, w+300_500, w+700_000))
	if n := len(tt.ft.timers); n != 0 {
		t.Errorf("%d timers pending", n)
	}
}
