package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"
)

// The time script of the conformance suite (README.md, "Time"): timers,
// clocks, commit marks and both callbacks (abi/ABI.md section 8), driven
// through the engine by a Time that keeps timers and marks as the host
// does, with checks after records and at commit points. Every language's
// transcript and final state (stores and pending timers) must be the same
// byte for byte.

// Limits the script runs into.
const (
	scriptMaxTimers = 10
	scriptMaxMarks  = 6
	scriptWall      = int64(1_700_000_000_000)
)

type timerID struct {
	kind abi.TimerKind
	ts   int64
	key  string
}

// scriptTime is the Time of the time script: the task's clocks, pending
// timers and the window's marks, with the current call's changes staged
// and kept only if the call succeeds, and the limits of abi/ABI.md 8.6.
type scriptTime struct {
	stream, wall int64
	timers       map[timerID]bool
	staged       map[timerID]bool // true set, false cancelled
	marks        map[string]int64
	stagedMarks  map[string]int64
}

func newScriptTime() *scriptTime {
	return &scriptTime{stream: abi.NoTime, wall: scriptWall, timers: map[timerID]bool{}, staged: map[timerID]bool{},
		marks: map[string]int64{}, stagedMarks: map[string]int64{}}
}

func (s *scriptTime) Now() (int64, int64) { return s.stream, s.wall }

func (s *scriptTime) pending(id timerID) bool {
	if set, ok := s.staged[id]; ok {
		return set
	}
	return s.timers[id]
}

func (s *scriptTime) count() int {
	n := len(s.timers)
	for id, set := range s.staged {
		switch {
		case set && !s.timers[id]:
			n++
		case !set && s.timers[id]:
			n--
		}
	}
	return n
}

func (s *scriptTime) SetTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerID{kind, ts, string(key)}
	if s.pending(id) {
		return false, nil
	}
	if s.count() >= scriptMaxTimers {
		return false, engine.ErrTimerLimit
	}
	s.staged[id] = true
	return true, nil
}

func (s *scriptTime) CancelTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerID{kind, ts, string(key)}
	if !s.pending(id) {
		return false, nil
	}
	s.staged[id] = false
	return true, nil
}

func (s *scriptTime) Mark(key []byte, ts int64) (bool, error) {
	k := string(key)
	_, a := s.marks[k]
	_, b := s.stagedMarks[k]
	if !a && !b {
		n := len(s.marks)
		for m := range s.stagedMarks {
			if _, ok := s.marks[m]; !ok {
				n++
			}
		}
		if n >= scriptMaxMarks {
			return false, engine.ErrMarkLimit
		}
	}
	s.stagedMarks[k] = ts
	return !a && !b, nil
}

// end keeps (ok) or drops the call's timer changes and marks.
func (s *scriptTime) end(ok bool) {
	if ok {
		for id, set := range s.staged {
			if set {
				s.timers[id] = true
			} else {
				delete(s.timers, id)
			}
		}
		maps.Copy(s.marks, s.stagedMarks)
	}
	clear(s.staged)
	clear(s.stagedMarks)
}

// due returns the pending timers a check fires, in abi.TimerLess order:
// event-time ones at or before the stream time, and at a commit point the
// processing-time ones at or before the wall time.
func (s *scriptTime) due(commitPoint bool) []timerID {
	var ids []timerID
	for id := range s.timers {
		if (id.kind == abi.TimerEventTime && id.ts <= s.stream) ||
			(commitPoint && id.kind == abi.TimerProcessingTime && id.ts <= s.wall) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b timerID) int {
		if abi.TimerLess(a.kind, a.ts, []byte(a.key), b.kind, b.ts, []byte(b.key)) {
			return -1
		}
		return 1
	})
	return ids
}

// dump is the pending timers, "timer kind/ts/key" sorted.
func (s *scriptTime) dump() []string {
	var out []string
	for id := range s.timers {
		k := id.key
		if len(k) > 16 {
			k = k[:16] + "...(" + strconv.Itoa(len(id.key)) + ")"
		}
		out = append(out, fmt.Sprintf("timer %s/%d/%q", id.kind, id.ts, k))
	}
	slices.Sort(out)
	return out
}

// timedRecord runs one record after moving the stream time to its
// timestamp, then the check after it (event-time timers).
func (p *plugin) timedRecord(name string, rec abi.Record) []step {
	if rec.Timestamp >= 0 && rec.Timestamp > p.clock.stream {
		p.clock.stream = rec.Timestamp
	}
	steps := []step{p.process(name, rec)}
	return append(steps, p.check(false)...)
}

// check fires the due timers, one step each ("on_timer kind ts key"); a
// fired timer is removed whatever its call does (the skip policy).
func (p *plugin) check(commitPoint bool) []step {
	var steps []step
	for _, id := range p.clock.due(commitPoint) {
		delete(p.clock.timers, id)
		p.sink.out = nil
		trig := abi.Trigger{Timestamp: id.ts, Kind: id.kind, Key: []byte(id.key)}
		err := p.inst.OnTimer(context.Background(), &trig)
		p.state.end(err == nil)
		p.clock.end(err == nil)
		steps = append(steps, p.callbackStep(fmt.Sprintf("on_timer %s %d %.16q", id.kind, id.ts, id.key), err))
	}
	return steps
}

// commitPoint is a check of both kinds, then one on_commit call per
// marked key in key order; then the marks are cleared.
func (p *plugin) commitPoint() []step {
	steps := p.check(true)
	marks := p.clock.marks
	p.clock.marks = map[string]int64{}
	for _, k := range slices.Sorted(maps.Keys(marks)) {
		p.sink.out = nil
		trig := abi.Trigger{Timestamp: marks[k], Kind: abi.TriggerCommit, Key: []byte(k)}
		err := p.inst.OnCommit(context.Background(), &trig)
		p.state.end(err == nil)
		p.clock.end(err == nil)
		steps = append(steps, p.callbackStep("on_commit "+strconv.Quote(k), err))
	}
	return steps
}

func (p *plugin) callbackStep(name string, err error) step {
	s := step{name: name, err: err, logs: p.logs.take()}
	if err == nil {
		s.emits = p.sink.out
	}
	return s
}

// runTime runs the time script (README.md) in one language.
func runTime(t *testing.T, g guest) ([]step, []string) {
	t.Helper()
	wasm := g.wasm(t)
	b := conformanceBinding
	b.timed = true
	p := start(t, "conformance-time-"+g.lang, wasm, b)
	steps := []step{{name: "init", logs: p.initLogs}}
	cmd := func(name string, ts int64) {
		steps = append(steps, p.timedRecord("cmd:"+name+"@"+strconv.FormatInt(ts, 10),
			abi.Record{Timestamp: ts, Offset: ts, Key: []byte("cmd:" + name)})...)
	}
	cmd("now", 1000)
	cmd("timers", 1001)
	cmd("mark", 1002)
	steps = append(steps, p.commitPoint()...) // the marks; p is not due yet
	cmd("noop", 4500)                         // fires "" at 4000
	cmd("noop", 6000)                         // fires a at 5000, chain, fail
	cmd("noop", 6001)                         // fires chain2, set by chain
	p.clock.wall += 5000
	steps = append(steps, p.commitPoint()...) // fires p; commits t-chain
	cmd("noop", 7000)                         // fires fault (the instance is replaced), zzz
	cmd("noop", 9000)                         // fires the 4096-byte key
	cmd("timerfault", 9001)
	cmd("now", 9002)
	return steps, append(p.state.dump(b.stores), p.clock.dump()...)
}

// TestConformanceTime runs the time script in every language, checks the
// Go SDK's run against abi/ABI.md section 8, and requires every other
// language to do exactly the same.
func TestConformanceTime(t *testing.T) {
	var want, wantState string
	for _, g := range guests {
		t.Run(g.lang, func(t *testing.T) {
			steps, state := runTime(t, g)
			checkTime(t, steps, state)
			got, st := transcript(conformanceBinding.outputs, steps), strings.Join(state, "\n")
			if want == "" {
				want, wantState = got, st
				return
			}
			if got != want {
				t.Errorf("%s differs from go: %s", g.lang, firstDiff(want, got))
			}
			if st != wantState {
				t.Errorf("%s: final state differs from go:\n%s", g.lang, firstDiff(wantState, st))
			}
		})
	}
}

// checkTime checks one language's run of the time script against the ABI.
func checkTime(t *testing.T, steps []step, state []string) {
	t.Helper()
	notes := map[string][]string{} // step name -> "key=value" notes on side
	by := map[string]step{}
	for _, s := range steps {
		by[s.name] = s
		for _, e := range s.emits {
			if e.output == 1 {
				r := e.record(t)
				notes[s.name] = append(notes[s.name], string(r.Key)+"="+string(r.Value))
			}
		}
	}
	w := strconv.FormatInt(scriptWall, 10)
	expectNotes := func(name string, want ...string) {
		t.Helper()
		if got := notes[name]; !slices.Equal(got, want) {
			t.Errorf("%s: notes\n  %q\nwant\n  %q", name, got, want)
		}
	}
	if l := by["init"].logs; len(l) != 3 || l[2] != "INFO init time set EPHASE cancel EPHASE stream EPHASE wall EPHASE mark EPHASE" {
		t.Errorf("init logs %q", l)
	}
	expectNotes("cmd:now@1000", "now=1000 "+w, "now-bad-clock=EINVAL")
	expectNotes("cmd:timers@1001", "set-new=1", "set-again=0", "set-processing=1", "set-empty-key=1",
		"cancel=1", "cancel-again=0", "set-kind-2=EINVAL", "set-kind-7=EINVAL", "set-negative=EINVAL",
		"set-long-key=ETOOLARGE", "set-order=EINVAL", "cancel-kind-2=EINVAL", "cancel-long-key=ETOOLARGE",
		"set-max-key=1", "set-limit=2 ELIMIT")
	expectNotes("cmd:mark@1002", "mark-new=1", "mark-again=0", "mark-long-key=ETOOLARGE", "mark-limit=3 ELIMIT")
	expectNotes(`on_commit "m1"`, "commit=m1 1002 1002 "+w, "commit-mark=EPHASE")
	expectNotes(`on_timer event 4000 ""`, "fired=event 4000 4500 "+w+" 0")
	expectNotes(`on_timer event 6000 "chain"`, "fired=event 6000 6000 "+w+" 5", "chain-set=1", "chain-mark=1")
	expectNotes(`on_timer event 6000 "chain2"`, "fired=event 6000 6001 "+w+" 6")
	pw := strconv.FormatInt(scriptWall+5000, 10)
	expectNotes(`on_timer processing `+pw+` "p"`, "fired=processing "+pw+" 6001 "+pw+" 1")
	expectNotes(`on_commit "t-chain"`, "commit=t-chain 6000 6001 "+pw, "commit-mark=EPHASE")
	expectNotes(`on_timer event 9000 "mmmmmmmmmmmmmmmm"`, "fired=event 9000 9000 "+pw+" 4096")
	expectNotes("cmd:now@9002", "now=9002 "+pw, "now-bad-clock=EINVAL")

	// Emits in callbacks default to the trigger's timestamp.
	if s := by[`on_commit "m1"`]; len(s.emits) == 0 || s.emits[0].record(t).Timestamp != 1002 {
		t.Errorf("on_commit m1: emits %v, want the mark's timestamp", s.emits)
	}
	if s := by[`on_timer event 6000 "chain"`]; len(s.emits) == 0 || s.emits[0].record(t).Timestamp != 6000 {
		t.Errorf("on_timer chain: emits %v, want the timer's time", s.emits)
	}

	// Failures of callbacks: their effects are discarded.
	wantFail := map[string]string{
		`on_commit "cfail"`:           "plugin failed: conformance: commit failed on purpose",
		`on_timer event 6000 "fail"`:  "plugin failed: conformance: timer failed on purpose",
		`on_timer event 7000 "fault"`: "ABI misuse: EFAULT",
		"cmd:timerfault@9001":         "ABI misuse: EFAULT",
	}
	for name, want := range wantFail {
		s, ok := by[name]
		if !ok || s.err == nil || failure(s.err) != want || len(s.emits) != 0 {
			t.Errorf("%s: failure %v, %d emits; want %q and none", name, s.err, len(s.emits), want)
		}
	}
	// The instance the fault replaced starts again before the next call.
	if l := by[`on_timer event 7000 "zzz"`].logs; len(l) < 3 || !strings.HasPrefix(l[0], "INFO init config") {
		t.Errorf("on_timer zzz after the fault: logs %q; want the fresh instance's init first", l)
	}
	all := strings.Join(state, "\n")
	for _, gone := range []string{"timer-fail", "lost"} {
		if strings.Contains(all, gone) {
			t.Errorf("final state holds %s from a failed callback:\n%s", gone, all)
		}
	}
	for _, s := range steps {
		if strings.Contains(s.name, "lost") {
			t.Errorf("a failed callback's timer or mark fired: %s", s.name)
		}
	}
	if strings.Contains(all, "timer ") {
		t.Errorf("timers left pending:\n%s", all)
	}
}
