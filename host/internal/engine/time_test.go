package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
)

// Tests of the time ABI (abi/ABI.md section 8; time.go) on testdata/timers,
// whose records are programs of import calls (see timers.wat).

// fakeTime is a Time that keeps pending timers and marks in maps and
// records every call. Limits of 0 mean none; fail* errors are returned by
// the matching method; panicOn panics in it.
type fakeTime struct {
	stream, wall int64
	nows         int
	timers       map[string]abitest.Timer // timerKey -> pending timer
	marks        map[string]int64         // key -> timestamp of its last mark
	calls        []string                 // "set event 5 \"k\"", "cancel ...", "mark \"k\" 7"
	maxTimers    int
	maxMarks     int
	failSet      error
	failCancel   error
	failMark     error
	panicOn      string // "set", "cancel" or "mark"
	keys         [][]byte
}

func newFakeTime(stream, wall int64) *fakeTime {
	return &fakeTime{stream: stream, wall: wall, timers: map[string]abitest.Timer{}, marks: map[string]int64{}}
}

func timerKey(kind abi.TimerKind, ts int64, key []byte) string {
	return fmt.Sprintf("%s %d %q", kind, ts, key)
}

func (f *fakeTime) Now() (int64, int64) {
	f.nows++
	return f.stream, f.wall
}

func (f *fakeTime) SetTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerKey(kind, ts, key)
	f.calls = append(f.calls, "set "+id)
	if f.panicOn == "set" {
		panic("set exploded")
	}
	if f.failSet != nil {
		return false, f.failSet
	}
	if _, ok := f.timers[id]; ok {
		return false, nil
	}
	if f.maxTimers > 0 && len(f.timers) >= f.maxTimers {
		return false, fmt.Errorf("task 3: %w", ErrTimerLimit)
	}
	f.timers[id] = abitest.Timer{Kind: kind, TS: ts, Key: bytes.Clone(key)}
	f.keys = append(f.keys, bytes.Clone(key))
	return true, nil
}

func (f *fakeTime) CancelTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerKey(kind, ts, key)
	f.calls = append(f.calls, "cancel "+id)
	if f.panicOn == "cancel" {
		panic("cancel exploded")
	}
	if f.failCancel != nil {
		return false, f.failCancel
	}
	if _, ok := f.timers[id]; !ok {
		return false, nil
	}
	delete(f.timers, id)
	return true, nil
}

func (f *fakeTime) Mark(key []byte, ts int64) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("mark %q %d", key, ts))
	if f.panicOn == "mark" {
		panic("mark exploded")
	}
	if f.failMark != nil {
		return false, f.failMark
	}
	_, had := f.marks[string(key)]
	if !had && f.maxMarks > 0 && len(f.marks) >= f.maxMarks {
		return false, ErrMarkLimit
	}
	f.marks[string(key)] = ts
	return !had, nil
}

func (f *fakeTime) takeCalls() []string {
	c := f.calls
	f.calls = nil
	return c
}

// Ops of testdata/timers.
const (
	opSet    = 1
	opCancel = 2
	opNow    = 3
	opMark   = 4
	opFail   = 5
	opTrap   = 6
	opSpin   = 7
	opReturn = 9
	opKeep   = 10
	opInit   = 11
)

// cmd is one command of a timers program. ptr, when set, is the key's
// absolute address (for EFAULT and long keys); otherwise key is placed
// after the program and its address computed.
type cmd struct {
	op, a  uint32
	ts     int64
	key    []byte
	ptr    uint32
	usePtr bool
	keyLen uint32 // with usePtr
}

// program encodes cmds for a program that sits at address base, followed
// by a "return 0" terminator and then the keys.
func program(base uint32, cmds ...cmd) []byte {
	cmds = append(cmds, cmd{op: opReturn})
	var keys []byte
	out := make([]byte, 0, 24*len(cmds))
	le := binary.LittleEndian
	for _, c := range cmds {
		ptr, n := c.ptr, c.keyLen
		if !c.usePtr {
			ptr = base + uint32(24*len(cmds)+len(keys))
			n = uint32(len(c.key))
			keys = append(keys, c.key...)
		}
		out = le.AppendUint32(out, c.op)
		out = le.AppendUint32(out, c.a)
		out = le.AppendUint64(out, uint64(c.ts))
		out = le.AppendUint32(out, ptr)
		out = le.AppendUint32(out, n)
	}
	return append(out, keys...)
}

// valueBase is where a record's value starts in timers' input buffer for
// a record with a null key; keptBase where a kept program lives.
const (
	valueBase = 1024 + abi.HeaderSize
	keptBase  = 50000
)

// runRecord processes a record (null key, timestamp ts) whose value is
// the program cmds.
func runRecord(i *Instance, ts int64, cmds ...cmd) error {
	return i.Process(bg, &abi.Record{Timestamp: ts, Offset: 1, Value: program(valueBase, cmds...)})
}

// keep stores cmds as the program the callbacks run.
func keep(t *testing.T, i *Instance, sink *sinkCapture, cmds ...cmd) {
	t.Helper()
	v := append(program(valueBase, cmd{op: opKeep}), program(keptBase, cmds...)...)
	// The opKeep program is 2 commands; what follows its terminator is the
	// kept program, so drop the terminator.
	v = append(v[:24], v[48:]...)
	if err := i.Process(bg, &abi.Record{Value: v}); err != nil {
		t.Fatalf("keeping the callback program: %v", err)
	}
	sink.take()
}

// results decodes the i64 results the program emitted (8-byte values).
func results(t *testing.T, got []emitted) []int64 {
	t.Helper()
	var out []int64
	for _, e := range got {
		if len(e.rec.Value) != 8 {
			t.Fatalf("an emit of %d bytes, want an 8-byte result", len(e.rec.Value))
		}
		out = append(out, int64(binary.LittleEndian.Uint64(e.rec.Value)))
	}
	return out
}

func timersInstance(t *testing.T, o Options, ft *fakeTime) (*Instance, *sinkCapture) {
	t.Helper()
	r, _ := newRuntime(t, o)
	return instantiate(t, compileFile(t, r, "timers"), Binding{Time: ft})
}

func errnoResult(e abi.Errno) int64 { return int64(e.Result()) }

// TestTimeImports: each import's results, argument checks (the shared
// vectors of testdata/triggers.json) and what the Time sees.
func TestTimeImports(t *testing.T) {
	ft := newFakeTime(1700000000500, 1700000009000)
	i, sink := timersInstance(t, Options{}, ft)
	const ts = 1700000000000
	err := runRecord(i, ts,
		cmd{op: opSet, a: 0, ts: 60000, key: []byte("user-1")},
		cmd{op: opSet, a: 0, ts: 60000, key: []byte("user-1")},
		cmd{op: opSet, a: 1, ts: 60000, key: []byte("user-1")},
		cmd{op: opSet, a: 0, ts: 0, key: []byte{}},
		cmd{op: opCancel, a: 0, ts: 60000, key: []byte("user-1")},
		cmd{op: opCancel, a: 0, ts: 60000, key: []byte("user-1")},
		cmd{op: opNow, a: 0},
		cmd{op: opNow, a: 1},
		cmd{op: opNow, a: 2},
		cmd{op: opNow, a: 0xffffffff},
		cmd{op: opMark, key: []byte("w")},
		cmd{op: opMark, key: []byte("w")},
		cmd{op: opMark, key: []byte{}},
		cmd{op: opMark, usePtr: true, ptr: 0, keyLen: abi.MaxTimerKeySize + 1},
		cmd{op: opMark, usePtr: true, ptr: 0, keyLen: abi.MaxTimerKeySize},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 0, 1, 1, 1, 0, 1700000000500, 1700000009000,
		errnoResult(abi.ErrnoInval), errnoResult(abi.ErrnoInval), 1, 0, 1, errnoResult(abi.ErrnoTooLarge), 1}
	if got := results(t, sink.take()); !slices.Equal(got, want) {
		t.Errorf("results %v\nwant    %v", got, want)
	}
	wantCalls := []string{
		`set event 60000 "user-1"`, `set event 60000 "user-1"`, `set processing 60000 "user-1"`, `set event 0 ""`,
		`cancel event 60000 "user-1"`, `cancel event 60000 "user-1"`,
		`mark "w" 1700000000000`, `mark "w" 1700000000000`, `mark "" 1700000000000`,
	}
	calls := ft.takeCalls()
	if len(calls) != len(wantCalls)+1 || !slices.Equal(calls[:len(wantCalls)], wantCalls) {
		t.Errorf("Time calls %q\nwant %q and a 4096-byte mark", calls, wantCalls)
	}
	if ft.nows != 1 {
		t.Errorf("Time.Now called %d times for one record, want once", ft.nows)
	}
	// The key handed to the Time is the plugin's (the fake copied it).
	if string(ft.keys[0]) != "user-1" {
		t.Errorf("first key %q", ft.keys[0])
	}

	// The argument checks of the shared vectors, in abi.CheckTimer's order,
	// for timer_set and timer_cancel alike; the Time sees only accepted
	// calls. Keys are read at address 0 (any bytes will do).
	tv, err := abitest.LoadTriggers(abitest.TriggersPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(tv.Checks) == 0 {
		t.Fatal("no timer_set checks in the vectors")
	}
	for _, op := range []uint32{opSet, opCancel} {
		for _, c := range tv.Checks {
			err := runRecord(i, ts, cmd{op: op, a: uint32(c.Kind), ts: c.TS, usePtr: true, ptr: 0, keyLen: uint32(c.KeyLen)})
			if err != nil {
				t.Fatalf("op %d %+v: %v", op, c, err)
			}
			got := results(t, sink.take())[0]
			calls := ft.takeCalls()
			switch {
			case c.Errno != 0 && (got != errnoResult(c.Errno) || len(calls) != 0):
				t.Errorf("op %d %+v: got %d (Time calls %q), want -%s", op, c, got, c.Errno.Name(), calls)
			case c.Errno == 0 && (got < 0 || got > 1 || len(calls) != 1):
				t.Errorf("op %d %+v: got %d (Time calls %q), want 0 or 1", op, c, got, calls)
			}
		}
	}
}

// TestTimeFault: a key outside memory is EFAULT and fails the call as an
// ABI misuse (the instance is replaced), for each import that takes one.
func TestTimeFault(t *testing.T) {
	ft := newFakeTime(0, 0)
	i, sink := timersInstance(t, Options{}, ft)
	for _, c := range []cmd{
		{op: opSet, ts: 5, usePtr: true, ptr: 0xfffff000, keyLen: 16},
		{op: opCancel, a: 1, ts: 5, usePtr: true, ptr: 131070, keyLen: 4},
		{op: opMark, usePtr: true, ptr: 0xffffffff, keyLen: 1},
	} {
		err := runRecord(i, 1, c)
		if !IsABIMisuse(err) || !strings.Contains(err.Error(), "EFAULT") {
			t.Fatalf("op %d: got %v, want an ABI misuse (EFAULT)", c.op, err)
		}
		if got := results(t, sink.take()); len(got) != 1 || got[0] != errnoResult(abi.ErrnoFault) {
			t.Errorf("op %d: results %v", c.op, got)
		}
		if calls := ft.takeCalls(); len(calls) != 0 {
			t.Errorf("op %d: the Time was called: %q", c.op, calls)
		}
	}
	err := runRecord(i, 1, cmd{op: opCancel, usePtr: true, ptr: 0xfffff000, keyLen: 1})
	if !strings.Contains(err.Error(), "timer_cancel: EFAULT") {
		t.Errorf("the misuse does not name the import: %v", err)
	}
}

// TestTimeLimitsAndHostErrors: ErrTimerLimit and ErrMarkLimit give the
// plugin ELIMIT and the call goes on; any other Time error (or panic)
// gives EIO and fails the call with HostFailed, keeping the instance.
func TestTimeLimitsAndHostErrors(t *testing.T) {
	ft := newFakeTime(0, 0)
	ft.maxTimers, ft.maxMarks = 1, 1
	i, sink := timersInstance(t, Options{}, ft)
	err := runRecord(i, 1,
		cmd{op: opSet, ts: 1, key: []byte("a")},
		cmd{op: opSet, ts: 2, key: []byte("a")},
		cmd{op: opSet, ts: 1, key: []byte("a")}, // the same timer: no new one, no limit
		cmd{op: opMark, key: []byte("a")},
		cmd{op: opMark, key: []byte("b")},
		cmd{op: opMark, key: []byte("a")},
	)
	if err != nil {
		t.Fatalf("a limit failed the record: %v", err)
	}
	lim := errnoResult(abi.ErrnoLimit)
	if got, want := results(t, sink.take()), []int64{1, lim, 0, 1, lim, 0}; !slices.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}

	disk := errors.New("disk on fire")
	for _, c := range []struct {
		name  string
		setup func()
		cmd   cmd
		msg   string
	}{
		{"set", func() { ft.failSet = disk }, cmd{op: opSet, ts: 9, key: []byte("k")}, "timer set: disk on fire"},
		{"cancel", func() { ft.failCancel = disk }, cmd{op: opCancel, ts: 9, key: []byte("k")}, "timer cancel: disk on fire"},
		{"mark", func() { ft.failMark = disk }, cmd{op: opMark, key: []byte("k")}, "commit mark: disk on fire"},
		{"set panic", func() { ft.panicOn = "set" }, cmd{op: opSet, ts: 9, key: []byte("k")}, "timer set: panic: set exploded"},
		{"mark panic", func() { ft.panicOn = "mark" }, cmd{op: opMark, key: []byte("k")}, "commit mark: panic: mark exploded"},
	} {
		ft.failSet, ft.failCancel, ft.failMark, ft.panicOn = nil, nil, nil, ""
		c.setup()
		err := runRecord(i, 1, c.cmd)
		if !IsHostFailed(err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want HostFailed with %q", c.name, err, c.msg)
		}
		if c.name == "set" && !errors.Is(err, disk) {
			t.Errorf("%s: the Time's error is not in the chain: %v", c.name, err)
		}
		if got := results(t, sink.take()); len(got) != 1 || got[0] != errnoResult(abi.ErrnoIO) {
			t.Errorf("%s: results %v", c.name, got)
		}
	}
	ft.failSet, ft.failCancel, ft.failMark, ft.panicOn = nil, nil, nil, ""
	// The instance was kept and the next call is clean.
	if err := runRecord(i, 1, cmd{op: opNow, a: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestTimePhases: all four imports are EPHASE during init; in on_commit
// commit_mark is EPHASE and the others work; in on_timer commit_mark
// remembers the timer's time; time_now in a callback returns the clocks
// the trigger carries.
func TestTimePhases(t *testing.T) {
	ft := newFakeTime(500, 9000)
	i, sink := timersInstance(t, Options{}, ft)
	if err := runRecord(i, 1, cmd{op: opInit}); err != nil {
		t.Fatal(err)
	}
	got := sink.take()
	phase := errnoResult(abi.ErrnoPhase)
	if len(got) != 1 || len(got[0].rec.Value) != 32 {
		t.Fatalf("init results: %+v", got)
	}
	for k := range 4 {
		if v := int64(binary.LittleEndian.Uint64(got[0].rec.Value[8*k:])); v != phase {
			t.Errorf("init call %d returned %d, want -EPHASE", k, v)
		}
	}
	if calls := ft.takeCalls(); len(calls) != 0 {
		t.Errorf("init reached the Time: %q", calls)
	}

	keep(t, i, sink,
		cmd{op: opNow, a: 0}, cmd{op: opNow, a: 1},
		cmd{op: opMark, key: []byte("m")},
		cmd{op: opSet, a: 1, ts: 77, key: []byte("t")},
		cmd{op: opCancel, a: 1, ts: 77, key: []byte("t")},
	)
	ft.nows = 0
	if err := i.OnTimer(bg, &abi.Trigger{Timestamp: 60000, Kind: abi.TimerEventTime, Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if res := results(t, sink.take()[1:]); !slices.Equal(res, []int64{500, 9000, 1, 1, 1}) {
		t.Errorf("on_timer results %v", res)
	}
	if calls := ft.takeCalls(); !slices.Equal(calls, []string{`mark "m" 60000`, `set processing 77 "t"`, `cancel processing 77 "t"`}) {
		t.Errorf("on_timer Time calls %q", calls)
	}
	ft.stream, ft.wall = 600, 9100
	if err := i.OnCommit(bg, &abi.Trigger{Timestamp: 42, Kind: abi.TriggerCommit, Key: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if res := results(t, sink.take()[1:]); !slices.Equal(res, []int64{600, 9100, phase, 1, 1}) {
		t.Errorf("on_commit results %v", res)
	}
	if calls := ft.takeCalls(); !slices.Equal(calls, []string{`set processing 77 "t"`, `cancel processing 77 "t"`}) {
		t.Errorf("on_commit Time calls %q", calls)
	}
	if ft.nows != 2 {
		t.Errorf("Time.Now called %d times for two callbacks", ft.nows)
	}
}

// TestTriggerDelivery: OnTimer and OnCommit write the exact trigger bytes
// of the shared vectors into the input buffer (growing it when needed),
// with the clocks from Time.Now; the caller's trigger is not modified.
func TestTriggerDelivery(t *testing.T) {
	tv, err := abitest.LoadTriggers(abitest.TriggersPath())
	if err != nil {
		t.Fatal(err)
	}
	ft := newFakeTime(0, 0)
	i, sink := timersInstance(t, Options{}, ft)
	vectors := tv.Vectors
	// A key of the maximum size: the trigger no longer fits the default
	// 4 KiB input buffer, so the engine asks for a larger one first.
	big := abi.Trigger{Timestamp: 7, StreamTime: 8, WallTime: 9, Kind: abi.TriggerCommit, Key: bytes.Repeat([]byte("x"), abi.MaxTimerKeySize)}
	vectors = append(vectors, abitest.TriggerVector{Name: "max key", Trigger: big, Encoded: big.AppendEncode(nil)})
	for _, v := range vectors {
		ft.stream, ft.wall = v.Trigger.StreamTime, v.Trigger.WallTime
		trig := v.Trigger
		trig.StreamTime, trig.WallTime = 1, 2 // replaced by Time.Now
		call := i.OnTimer
		if trig.Kind == abi.TriggerCommit {
			call = i.OnCommit
		}
		if err := call(bg, &trig); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		got := sink.take()
		if len(got) != 1 || !bytes.Equal(got[0].rec.Value, v.Encoded) {
			t.Errorf("%s: the plugin got %x\nwant %x", v.Name, got[0].rec.Value, v.Encoded)
		}
		if trig.StreamTime != 1 || trig.WallTime != 2 {
			t.Errorf("%s: the caller's trigger was modified", v.Name)
		}
	}

	// Misuse by the caller: plain errors, nothing runs.
	for _, c := range []struct {
		call func() error
		want string
	}{
		{func() error { return i.OnTimer(bg, &abi.Trigger{Kind: abi.TriggerCommit}) }, "OnTimer: trigger kind commit, want event or processing"},
		{func() error { return i.OnCommit(bg, &abi.Trigger{Kind: abi.TimerEventTime}) }, "OnCommit: trigger kind event, want commit"},
		{func() error {
			return i.OnTimer(bg, &abi.Trigger{Key: make([]byte, abi.MaxTimerKeySize+1)})
		}, "a 4097-byte trigger key"},
	} {
		err := c.call()
		if err == nil || KindOf(err) != 0 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want a plain error with %q", err, c.want)
		}
	}
	if got := sink.take(); len(got) != 0 {
		t.Errorf("refused calls ran the plugin: %d emits", len(got))
	}

	// A module without the callbacks.
	r, _ := newRuntime(t, Options{})
	p, _ := instantiate(t, compileFile(t, r, "passthrough"), Binding{})
	err = p.OnTimer(bg, &abi.Trigger{Kind: abi.TimerProcessingTime})
	if err == nil || !strings.Contains(err.Error(), `module "passthrough" does not export wasmstream_on_timer`) {
		t.Errorf("OnTimer on passthrough: %v", err)
	}
	err = p.OnCommit(bg, &abi.Trigger{Kind: abi.TriggerCommit})
	if err == nil || !strings.Contains(err.Error(), "does not export wasmstream_on_commit") {
		t.Errorf("OnCommit on passthrough: %v", err)
	}
}

// TestCallbackFailures: a callback that fails, traps, times out, misuses
// the ABI or passes a staging limit fails like a record, with the same
// kinds and discards; the per-call limits start afresh each call.
func TestCallbackFailures(t *testing.T) {
	ft := newFakeTime(0, 0)
	i, sink := timersInstance(t, Options{RecordTimeout: 100 * time.Millisecond, Record: RecordLimits{MaxEmits: 3}}, ft)
	timer := &abi.Trigger{Timestamp: 5, Kind: abi.TimerProcessingTime, Key: []byte("k")}
	commit := &abi.Trigger{Timestamp: 5, Kind: abi.TriggerCommit, Key: []byte("k")}
	for _, c := range []struct {
		name    string
		prog    []cmd
		kind    FailureKind
		msg     string
		discard bool
	}{
		{"failed", []cmd{{op: opFail}}, PluginFailed, "failed", false},
		{"unknown status", []cmd{{op: opReturn, a: 7}}, ABIMisuse, "returned unknown status 7", true},
		{"trap", []cmd{{op: opTrap}}, Trap, "unreachable", true},
		{"timeout", []cmd{{op: opSpin}}, Timeout, "longer than 100ms", true},
		{"emits", []cmd{{op: opNow}, {op: opNow}, {op: opNow}}, LimitExceeded, "more than 3 emits", false},
		{"fault", []cmd{{op: opSet, usePtr: true, ptr: 0xfffff000, keyLen: 1}}, ABIMisuse, "timer_set: EFAULT", true},
	} {
		for _, trig := range []*abi.Trigger{timer, commit} {
			call, export := i.OnTimer, abi.ExportOnTimer
			if trig.Kind == abi.TriggerCommit {
				call, export = i.OnCommit, abi.ExportOnCommit
			}
			keep(t, i, sink, c.prog...)
			err := call(bg, trig)
			var re *RecordError
			if !errors.As(err, &re) || re.Kind != c.kind || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("%s via %s: got %v, want %v with %q", c.name, export, err, c.kind, c.msg)
			}
			if c.kind == Trap && !strings.Contains(err.Error(), export) {
				t.Errorf("%s: the error does not name %s: %v", c.name, export, err)
			}
			if got := i.cur == nil; got != c.discard {
				t.Errorf("%s via %s: instance discarded %v, want %v", c.name, export, got, c.discard)
			}
			sink.take()
			// The next call runs (on a fresh instance after a discard)
			// with fresh per-call limits: two results and the echo are 3
			// emits.
			keep(t, i, sink, cmd{op: opNow}, cmd{op: opNow})
			for range 2 {
				if err := call(bg, trig); err != nil {
					t.Fatalf("%s via %s, next call: %v", c.name, export, err)
				}
				if got := sink.take(); len(got) != 3 {
					t.Fatalf("%s via %s, next call: %d emits", c.name, export, len(got))
				}
			}
		}
	}
}

// TestTimeModuleRules: the load-time rules of section 8.2 and the import
// and export signatures, and what Info reports.
func TestTimeModuleRules(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	for _, c := range []struct {
		file string
		kind ModuleErrorKind
		want []string
	}{
		{"timernocallback", MissingExport, []string{"wasmstream_on_timer, want func (i32) -> i32", "imports wasmstream.timer_set", "timers could never be delivered", `time-exports" and onTimer(f)`, "ws_on_timer"}},
		{"cancelnocallback", MissingExport, []string{"wasmstream_on_timer", "imports wasmstream.timer_cancel"}},
		{"marknocommit", MissingExport, []string{"wasmstream_on_commit, want func (i32) -> i32", "imports wasmstream.commit_mark", "commit marks could never be delivered", "on_commit = f"}},
		{"badtimeimport", ForbiddenImport, []string{
			"wasmstream.timer_set is func (i32, i32, i32, i32) -> i32, want func (i32, i64, i32, i32) -> i32",
			"wasmstream.time_now is func (i32) -> i32, want func (i32) -> i64",
		}},
		{"ontimersig", WrongSignature, []string{"wasmstream_on_timer is func (i64) -> i32, want func (i32) -> i32"}},
	} {
		for _, via := range []string{"Compile", "Inspect"} {
			var err error
			if via == "Compile" {
				_, err = r.Compile(bg, c.file, wasmFile(t, c.file))
			} else {
				_, err = Inspect(bg, wasmFile(t, c.file))
			}
			if ModuleErrorKindOf(err) != c.kind {
				t.Fatalf("%s %s: got %v, want %v", via, c.file, err, c.kind)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %s: %q does not contain %q", via, c.file, err, w)
				}
			}
		}
	}

	m := compileFile(t, r, "timers")
	info := m.Info()
	if !info.HasOnTimer || !info.HasOnCommit || !info.ImportsTimerSet || !info.ImportsTimerCancel ||
		!info.ImportsTimeNow || !info.ImportsCommitMark || !info.UsesTime() {
		t.Errorf("timers info %+v", info)
	}
	if p := compileFile(t, r, "passthrough").Info(); p.HasOnTimer || p.HasOnCommit || p.UsesTime() {
		t.Errorf("passthrough info %+v", p)
	}
	_, err := m.Instantiate(bg, Binding{Name: "p", Outputs: []string{"out"}, Sink: &countSink{}})
	if err == nil || !strings.Contains(err.Error(), `processor "p": the module imports wasmstream.timer_set but the binding has no Time`) {
		t.Errorf("Instantiate without a Time: %v", err)
	}
}

// TestOnTimerAllocs: the callback path makes no heap allocation in the
// host, as Process does not.
func TestOnTimerAllocs(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	i, _ := instantiate(t, compileFile(t, r, "timers"), Binding{Time: newFakeTime(1, 2), Sink: &countSink{}})
	trig := &abi.Trigger{Timestamp: 5, Kind: abi.TimerEventTime, Key: []byte("key00001")}
	if err := i.OnTimer(bg, trig); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := i.OnTimer(bg, trig); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("OnTimer allocates %v times per call", n)
	}
}

// TestTimeCallsChargeStateBytes: timer_set, timer_cancel and commit_mark
// count key + timeEntryOverhead bytes against the record's state-bytes
// limit, so a record cannot stage unbounded timers or marks: the call over
// it gets ELIMIT and the record fails (LimitExceeded), as for state_put.
func TestTimeCallsChargeStateBytes(t *testing.T) {
	ft := newFakeTime(0, 0)
	key := make([]byte, 100)
	per := len(key) + timeEntryOverhead
	i, _ := timersInstance(t, Options{Record: RecordLimits{MaxStateBytes: 3 * per}}, ft)
	err := runRecord(i, 1,
		cmd{op: opSet, ts: 1, key: key},
		cmd{op: opCancel, ts: 1, key: key},
		cmd{op: opMark, key: key},
		cmd{op: opSet, ts: 2, key: key}, // the fourth is over
	)
	if !IsLimitExceeded(err) || !strings.Contains(err.Error(), "timer_set") {
		t.Fatalf("the call past the state-bytes limit: %v, want LimitExceeded naming timer_set", err)
	}
	// The budget is per record.
	if err := runRecord(i, 1, cmd{op: opMark, key: key}); err != nil {
		t.Fatalf("the next record starts with a fresh budget: %v", err)
	}
}
