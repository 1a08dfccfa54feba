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
	p.advance(rec.Timestamp)
	steps := []step{p.process(name, rec)}
	return append(steps, p.check(false)...)
}

// advance moves the stream time to include a record's timestamp.
func (p *plugin) advance(ts int64) {
	if ts >= 0 && ts > p.clock.stream {
		p.clock.stream = ts
	}
}

// timedBatch runs records through ProcessBatch as the runner does: each
// moves the stream time as its call begins, and a batch is cut after a
// record after which a timer is due, for the check that fires it; then
// the rest go on in a new batch. The steps are timedRecord's, record by
// record.
func (p *plugin) timedBatch(names []string, recs []abi.Record) (steps []step, batches int) {
	calls := make([]engine.Call, len(recs))
	for k := range recs {
		calls[k] = engine.Call{Record: &recs[k]}
	}
	for base := 0; base < len(calls); {
		done, n := p.runCalls(calls[base:], names[base:],
			func(k int) { p.advance(recs[base+k].Timestamp) },
			func(int) bool { return len(p.clock.due(false)) > 0 })
		steps = append(steps, done...)
		base += len(done)
		batches += n
		steps = append(steps, p.checkBatch(false)...)
	}
	return steps, batches
}

// check fires the due timers, one step each ("on_timer kind ts key"); a
// fired timer is removed whatever its call does (the skip policy), and a
// timer an earlier callback of the check cancelled does not fire.
func (p *plugin) check(commitPoint bool) []step {
	var steps []step
	for _, id := range p.clock.due(commitPoint) {
		if !p.clock.timers[id] {
			continue
		}
		delete(p.clock.timers, id)
		p.sink.out = nil
		trig := abi.Trigger{Timestamp: id.ts, Kind: id.kind, Key: []byte(id.key)}
		err := p.inst.OnTimer(context.Background(), &trig)
		p.endCall(err == nil)
		steps = append(steps, p.callbackStep(timerStep(id), err))
	}
	return steps
}

func timerStep(id timerID) string { return fmt.Sprintf("on_timer %s %d %.16q", id.kind, id.ts, id.key) }

// checkBatch is check with the firings in batches: each trigger carries
// the clocks (the single call reads them from the Time), and a batch is cut
// after a callback that cancelled a timer still to fire in it, so that the
// next is built from what is pending (as the runner does).
func (p *plugin) checkBatch(commitPoint bool) []step {
	var steps []step
	due := p.clock.due(commitPoint)
	for len(due) > 0 {
		calls, names := make([]engine.Call, len(due)), make([]string, len(due))
		for k, id := range due {
			calls[k] = engine.Call{Trigger: &abi.Trigger{Timestamp: id.ts, StreamTime: p.clock.stream,
				WallTime: p.clock.wall, Kind: id.kind, Key: []byte(id.key)}}
			names[k] = timerStep(id)
		}
		cancelled := func(k int) bool {
			for _, id := range due[k+1:] {
				if !p.clock.timers[id] {
					return true
				}
			}
			return false
		}
		done, _ := p.runCalls(calls, names, func(k int) { delete(p.clock.timers, due[k]) }, cancelled)
		steps = append(steps, done...)
		var rest []timerID
		for _, id := range due[len(done):] {
			if p.clock.timers[id] {
				rest = append(rest, id)
			}
		}
		due = rest
	}
	return steps
}

// commitPoint is a check of both kinds, then one on_commit call per
// marked key in key order; then the marks are cleared. Batched, both go
// through ProcessBatch.
func (p *plugin) commitPoint(batched bool) []step {
	var steps []step
	if batched {
		steps = p.checkBatch(true)
	} else {
		steps = p.check(true)
	}
	marks := p.clock.marks
	p.clock.marks = map[string]int64{}
	keys := slices.Sorted(maps.Keys(marks))
	if batched {
		calls, names := make([]engine.Call, len(keys)), make([]string, len(keys))
		for k, key := range keys {
			calls[k] = engine.Call{Trigger: &abi.Trigger{Timestamp: marks[key], StreamTime: p.clock.stream,
				WallTime: p.clock.wall, Kind: abi.TriggerCommit, Key: []byte(key)}}
			names[k] = "on_commit " + strconv.Quote(key)
		}
		done, _ := p.runCalls(calls, names, nil, nil)
		return append(steps, done...)
	}
	for _, k := range keys {
		p.sink.out = nil
		trig := abi.Trigger{Timestamp: marks[k], Kind: abi.TriggerCommit, Key: []byte(k)}
		err := p.inst.OnCommit(context.Background(), &trig)
		p.endCall(err == nil)
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

// runTime runs the time script (README.md) in one language, one call at a
// time or in batches (records, timer firings and commit calls through
// ProcessBatch). It returns the steps, the final state and the number of
// record batches.
func runTime(t *testing.T, g guest, batched bool) ([]step, []string, int) {
	t.Helper()
	wasm := g.wasm(t)
	b := conformanceBinding
	b.timed = true
	p := start(t, "conformance-time-"+g.lang, wasm, b)
	steps := []step{{name: "init", logs: p.initLogs}}
	batches := 0
	// records runs the script's records between two commit points.
	records := func(cmds ...string) {
		var names []string
		var recs []abi.Record
		for _, c := range cmds {
			name, at, _ := strings.Cut(c, "@")
			ts, err := strconv.ParseInt(at, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, "cmd:"+c)
			recs = append(recs, abi.Record{Timestamp: ts, Offset: ts, Key: []byte("cmd:" + name)})
		}
		if !batched {
			for k := range recs {
				steps = append(steps, p.timedRecord(names[k], recs[k])...)
			}
			return
		}
		done, n := p.timedBatch(names, recs)
		steps = append(steps, done...)
		batches += n
	}
	records("now@1000", "timers@1001", "mark@1002")
	steps = append(steps, p.commitPoint(batched)...) // the marks; p is not due yet
	records("noop@4500",                             // fires "" at 4000
		"noop@6000", // fires a at 5000, chain, fail
		"noop@6001") // fires chain2, set by chain
	p.clock.wall += 5000
	steps = append(steps, p.commitPoint(batched)...) // fires p; commits t-chain
	records("noop@7000",                             // fires fault (the instance is replaced), zzz
		"noop@9000", // fires the 4096-byte key
		"timerfault@9001", "now@9002")
	return steps, append(p.state.dump(b.stores), p.clock.dump()...), batches
}

// TestConformanceTime runs the time script in every language, one call at
// a time and in batches, checks the Go SDK's run against abi/ABI.md
// section 8, and requires every other run to do exactly the same.
func TestConformanceTime(t *testing.T) {
	var want, wantState string
	for _, g := range guests {
		for _, batched := range []bool{false, true} {
			name := g.lang
			if batched {
				name += "/batched"
			}
			t.Run(name, func(t *testing.T) {
				steps, state, batches := runTime(t, g, batched)
				checkTime(t, steps, state)
				if batched {
					checkTimeBatches(t, steps, batches)
				}
				got, st := transcript(conformanceBinding.outputs, steps), strings.Join(state, "\n")
				if want == "" {
					want, wantState = got, st
					return
				}
				if got != want {
					t.Errorf("%s differs from go: %s", name, firstDiff(want, got))
				}
				if st != wantState {
					t.Errorf("%s: final state differs from go:\n%s", name, firstDiff(wantState, st))
				}
			})
		}
	}
}

// checkTimeBatches checks that a batched run of the time script (every
// SDK speaks ABI version 2) took its calls in batches: records, timer
// firings and commit calls, a failed callback in the middle of one.
func checkTimeBatches(t *testing.T, steps []step, recordBatches int) {
	t.Helper()
	by := map[string]step{}
	for _, s := range steps {
		by[s.name] = s
	}
	for name, pos := range map[string]int{
		"cmd:mark@1002":              2, // now, timers, mark: no timer due before
		`on_timer event 6000 "fail"`: 2, // a, chain, fail: fails mid-batch
		`on_commit "m2"`:             1, // cfail failed alone; m1, m2, x0... follow
	} {
		if by[name].pos != pos {
			t.Errorf("%s: position %d in its batch, want %d", name, by[name].pos, pos)
		}
	}
	t.Logf("%d record batches", recordBatches)
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
	// The instance the fault replaced is restored from the snapshot of its
	// init before the next call: init does not run again.
	if l, ok := by[`on_timer event 7000 "zzz"`]; !ok || l.err != nil || len(l.logs) > 0 && strings.HasPrefix(l.logs[0], "INFO init") {
		t.Errorf("on_timer zzz after the fault: %v, logs %q; want it to run, without init again", l.err, l.logs)
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
