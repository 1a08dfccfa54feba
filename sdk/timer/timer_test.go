package timer_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var out = sdk.Output("out")

// plugin installs a record handler and timer callbacks for one test.
func plugin(process func(r *sdk.Record) error, fired func(f *timer.Firing) error, committed func(c *timer.Commit) error) {
	sdk.OnInit(nil)
	sdk.Handle(process)
	timer.Handle(fired)
	timer.OnCommit(committed)
}

func emit(s string) error { return out.Emit(sdk.Out{Value: []byte(s)}) }

func values(res sdktest.Result) []string {
	var v []string
	for _, e := range res.All {
		v = append(v, string(e.Value))
	}
	return v
}

// A record's value is a list of commands: "set:e:100:k" sets an event-time
// timer, "set:p:..." a processing-time one, "cancel:..." cancels,
// "mark:k" marks a key.
func commands(r *sdk.Record) error {
	for _, c := range strings.Fields(string(r.Value)) {
		f := strings.Split(c, ":")
		switch f[0] {
		case "set", "cancel":
			kind := timer.EventTime
			if f[1] == "p" {
				kind = timer.ProcessingTime
			}
			ts, _ := strconv.ParseInt(f[2], 10, 64)
			op := timer.Set
			if f[0] == "cancel" {
				op = timer.Cancel
			}
			changed, err := op(kind, ts, []byte(f[3]))
			if err != nil {
				return err
			}
			if err := emit(c + "=" + strconv.FormatBool(changed)); err != nil {
				return err
			}
		case "mark":
			if _, err := timer.Mark([]byte(f[1])); err != nil {
				return err
			}
		case "now":
			st, err := timer.StreamTime()
			if err != nil {
				return err
			}
			wt, err := timer.WallTime()
			if err != nil {
				return err
			}
			if err := emit("now " + strconv.FormatInt(st, 10) + " " + strconv.FormatInt(wt, 10)); err != nil {
				return err
			}
		case "fail":
			return errors.New("failed on purpose")
		}
	}
	return nil
}

func firedEmit(f *timer.Firing) error {
	return emit("fired " + f.Kind.String() + " " + strconv.FormatInt(f.Time, 10) + " " + string(f.Key) +
		" stream=" + strconv.FormatInt(f.StreamTime, 10))
}

func newHost(t *testing.T, opts ...sdktest.Option) *sdktest.Host {
	return sdktest.New(t, append(opts, sdktest.Outputs("out"), sdktest.Stores("s"))...)
}

func TestSetCancelAndIdentity(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t)
	res := h.MustProcess(sdktest.Record{Timestamp: 10, Value: []byte("set:e:100:a set:e:100:a set:p:100:a set:e:100:b cancel:e:100:b cancel:e:100:b")})
	want := []string{"set:e:100:a=true", "set:e:100:a=false", "set:p:100:a=true", "set:e:100:b=true",
		"cancel:e:100:b=true", "cancel:e:100:b=false"}
	if got := values(res); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := h.Timers(); len(got) != 2 || got[0].Kind != timer.EventTime || got[1].Kind != timer.ProcessingTime {
		t.Fatalf("pending %+v", got)
	}
}

// Event-time timers fire after the record that moves the stream time to
// them, in (time, kind, key) order, and see the stream time that includes
// that record; an earlier record (out of order) does not move it back.
func TestEventTimeFiresAfterTheRecord(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t)
	h.MustProcess(sdktest.Record{Timestamp: 10, Value: []byte("set:e:100:b set:e:100:a set:e:50:z set:p:10:p")})
	if res := h.MustProcess(sdktest.Record{Timestamp: 49, Value: []byte("now")}); !slices.Equal(values(res), []string{"now 49 " + strconv.FormatInt(sdktest.DefaultWallTime, 10)}) {
		t.Fatalf("before: %q", values(res))
	}
	res := h.MustProcess(sdktest.Record{Timestamp: 120, Value: []byte("now")})
	want := []string{"now 120 " + strconv.FormatInt(sdktest.DefaultWallTime, 10),
		"fired event 50 z stream=120", "fired event 100 a stream=120", "fired event 100 b stream=120"}
	if got := values(res); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if len(res.Callbacks) != 3 || res.All[1].Timestamp != 50 {
		t.Fatalf("callbacks %+v; emits in a callback default to the timer's time: %d", res.Callbacks, res.All[1].Timestamp)
	}
	// Out of order: stream time stays; no timer left but the processing one.
	res = h.MustProcess(sdktest.Record{Timestamp: 5, Value: []byte("now")})
	if got := values(res); !slices.Equal(got, []string{"now 120 " + strconv.FormatInt(sdktest.DefaultWallTime, 10)}) {
		t.Fatalf("out of order: %q", got)
	}
	if h.StreamTime() != 120 || len(h.Timers()) != 1 {
		t.Fatalf("stream %d, timers %+v", h.StreamTime(), h.Timers())
	}
	// A negative timestamp (no timestamp) does not move the stream time.
	h.MustProcess(sdktest.Record{Timestamp: -1})
	if h.StreamTime() != 120 {
		t.Fatalf("stream %d after a record without timestamp", h.StreamTime())
	}
}

// Processing-time timers fire at commit points only, when the wall clock
// has reached them, even with no records.
func TestProcessingTimeFiresAtCommitPoints(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t, sdktest.WallTime(1000))
	h.MustProcess(sdktest.Record{Timestamp: 1, Value: []byte("set:p:61000:k set:p:1000:now")})
	if res := h.MustProcess(sdktest.Record{Timestamp: 2}); len(res.Callbacks) != 0 {
		t.Fatalf("a processing-time timer fired between records: %+v", res.Callbacks)
	}
	if got := values(h.MustCommit()); !slices.Equal(got, []string{"fired processing 1000 now stream=2"}) {
		t.Fatalf("first commit: %q", got)
	}
	if got := values(h.AdvanceWallTime(59 * time.Second)); len(got) != 0 {
		t.Fatalf("early: %q", got)
	}
	res := h.AdvanceWallTime(time.Second)
	if got := values(res); !slices.Equal(got, []string{"fired processing 61000 k stream=2"}) || res.All[0].Timestamp != 61000 {
		t.Fatalf("due: %q", got)
	}
	if len(h.Timers()) != 0 {
		t.Fatalf("left: %+v", h.Timers())
	}
}

// A timer set by a callback that is already due fires at the next check,
// not in the same one.
func TestTimerSetInCallbackWaitsForNextCheck(t *testing.T) {
	n := 0
	plugin(commands, func(f *timer.Firing) error {
		n++
		if n < 3 {
			if _, err := timer.Set(timer.EventTime, f.Time, []byte("again"+strconv.Itoa(n))); err != nil {
				return err
			}
		}
		return firedEmit(f)
	}, nil)
	h := newHost(t)
	h.MustProcess(sdktest.Record{Timestamp: 10, Value: []byte("set:e:5:a")})
	// The record at 10 made the timer at 5 due: it fired after that record.
	if n != 1 || len(h.Timers()) != 1 {
		t.Fatalf("n=%d timers=%+v", n, h.Timers())
	}
	if res := h.MustProcess(sdktest.Record{Timestamp: 10}); len(res.Callbacks) != 1 || string(res.Callbacks[0].Key) != "again1" {
		t.Fatalf("next check: %+v", res.Callbacks)
	}
	if res := h.MustCommit(); len(res.Callbacks) != 1 || string(res.Callbacks[0].Key) != "again2" {
		t.Fatalf("commit point: %+v", res.Callbacks)
	}
}

// At most the firings limit fire per commit window; the rest wait, in order.
func TestFiringsPerCommitLimit(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t, sdktest.TimerLimits(0, 2, 0))
	h.MustProcess(sdktest.Record{Timestamp: 0, Value: []byte("set:e:1:a set:e:2:b set:e:3:c set:e:4:d set:e:5:e")})
	if res := h.MustProcess(sdktest.Record{Timestamp: 10}); len(res.Callbacks) != 2 {
		t.Fatalf("first window: %d firings", len(res.Callbacks))
	}
	if res := h.MustProcess(sdktest.Record{Timestamp: 11}); len(res.Callbacks) != 0 {
		t.Fatalf("over the limit in the same window: %d", len(res.Callbacks))
	}
	if got := values(h.MustCommit()); len(got) != 0 {
		t.Fatalf("commit point of a spent window fired %q", got)
	}
	got := values(h.MustProcess(sdktest.Record{Timestamp: 12}))
	if !slices.Equal(got, []string{"fired event 3 c stream=12", "fired event 4 d stream=12"}) {
		t.Fatalf("second window: %q", got)
	}
}

func TestPendingTimersLimit(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t, sdktest.TimerLimits(2, 0, 0))
	res := h.Process(sdktest.Record{Timestamp: 0, Value: []byte("set:e:10:a set:e:10:a set:e:11:b set:e:12:c")})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "sdk: timer_set: ELIMIT") {
		t.Fatalf("a third timer over a limit of 2: err %v", res.Err)
	}
	// A cancel in the same call frees a place.
	h.MustProcess(sdktest.Record{Timestamp: 0, Value: []byte("set:e:10:a set:e:11:b cancel:e:10:a set:e:12:c")})
	if got := h.Timers(); len(got) != 2 || string(got[1].Key) != "c" {
		t.Fatalf("pending %+v", got)
	}
}

func TestTimerArgumentsChecked(t *testing.T) {
	var errs []error
	plugin(func(r *sdk.Record) error {
		_, e1 := timer.Set(abi.TriggerCommit, 1, nil)
		_, e2 := timer.Set(timer.EventTime, -1, nil)
		_, e3 := timer.Set(timer.EventTime, 1, make([]byte, abi.MaxTimerKeySize+1))
		_, e4 := timer.Cancel(7, 1, nil)
		_, e5 := timer.Mark(make([]byte, abi.MaxTimerKeySize+1))
		errs = []error{e1, e2, e3, e4, e5}
		return nil
	}, firedEmit, nil)
	h := newHost(t)
	h.MustProcess(sdktest.Record{})
	want := []abi.Errno{abi.ErrnoInval, abi.ErrnoInval, abi.ErrnoTooLarge, abi.ErrnoInval, abi.ErrnoTooLarge}
	for i, e := range want {
		if !errors.Is(errs[i], e) {
			t.Errorf("call %d: %v, want %v", i, errs[i], e)
		}
	}
	if !strings.HasPrefix(errs[0].Error(), "sdk: timer_set: EINVAL") {
		t.Errorf("error text %q", errs[0])
	}
}

func TestTimeCallsRefusedDuringInit(t *testing.T) {
	var errs []error
	sdk.Handle(commands)
	sdk.OnInit(func() error {
		_, e1 := timer.Set(timer.EventTime, 1, nil)
		_, e2 := timer.StreamTime()
		_, e3 := timer.Mark(nil)
		_, e4 := timer.WallTime()
		errs = []error{e1, e2, e3, e4}
		return nil
	})
	t.Cleanup(func() { sdk.OnInit(nil) })
	newHost(t)
	for i, err := range errs {
		if !errors.Is(err, abi.ErrnoPhase) {
			t.Errorf("call %d during init: %v, want EPHASE", i, err)
		}
	}
}

// A failed callback's emits, state writes and timer changes are discarded,
// and its timer stays removed; a panicking one is recovered the same way.
func TestFailedCallback(t *testing.T) {
	store := sdk.Store("s")
	plugin(commands, func(f *timer.Firing) error {
		if err := store.Put(f.Key, []byte("x")); err != nil {
			return err
		}
		if _, err := timer.Set(timer.EventTime, 1000, f.Key); err != nil {
			return err
		}
		if err := emit("lost"); err != nil {
			return err
		}
		if string(f.Key) == "panic" {
			var m map[string]int
			//lint:ignore SA5000 a deliberate runtime error in the callback
			m["x"] = 1
		}
		return errors.New("callback says no")
	}, nil)
	h := newHost(t)
	h.MustProcess(sdktest.Record{Timestamp: 0, Value: []byte("set:e:1:err set:e:2:panic")})
	res := h.Process(sdktest.Record{Timestamp: 5})
	if res.Err != nil || len(res.Callbacks) != 2 || len(res.All) != 0 {
		t.Fatalf("result %+v", res)
	}
	if e := res.Callbacks[0].Err; e == nil || e.Error() != "callback says no" {
		t.Fatalf("callback error %v", e)
	}
	if e := res.Callbacks[1].Err; e == nil || !strings.HasPrefix(e.Error(), "panic: assignment to entry in nil map") {
		t.Fatalf("panic: %v", e)
	}
	if err := res.Failed(); err == nil || !strings.Contains(err.Error(), `event callback for key "err" at 1: callback says no`) {
		t.Fatalf("Failed() = %v", err)
	}
	if len(h.Timers()) != 0 || h.State("s").Len() != 0 {
		t.Fatalf("a failed callback left timers %+v or state %v", h.Timers(), h.State("s").Keys())
	}
}

// A failed record's timer changes and marks are discarded, but the record
// still moved the stream time.
func TestFailedRecordDiscardsTimersAndMarks(t *testing.T) {
	plugin(commands, firedEmit, func(c *timer.Commit) error { return emit("commit " + string(c.Key)) })
	h := newHost(t)
	res := h.Process(sdktest.Record{Timestamp: 40, Value: []byte("set:e:100:a mark:k fail")})
	if res.Err == nil || len(h.Timers()) != 0 || len(h.Marked()) != 0 {
		t.Fatalf("err %v, timers %+v, marks %q", res.Err, h.Timers(), h.Marked())
	}
	if h.StreamTime() != 40 {
		t.Fatalf("stream time %d", h.StreamTime())
	}
}

// Commit marks: one call per marked key per window, in key order, with
// the timestamp of the call that marked it last; marks made by timers that
// fire at the commit point are included; Mark is refused in OnCommit.
func TestCommitMarks(t *testing.T) {
	var markErr error
	plugin(commands, func(f *timer.Firing) error {
		_, err := timer.Mark(f.Key)
		return err
	}, func(c *timer.Commit) error {
		_, markErr = timer.Mark([]byte("again"))
		return emit("commit " + string(c.Key) + " " + strconv.FormatInt(c.Timestamp, 10))
	})
	h := newHost(t, sdktest.WallTime(0))
	h.MustProcess(sdktest.Record{Timestamp: 7, Value: []byte("mark:b mark:a")})
	h.MustProcess(sdktest.Record{Timestamp: 5, Value: []byte("mark:b set:p:0:t")})
	if got := h.Marked(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("marked %q", got)
	}
	res := h.MustCommit()
	want := []string{"commit a 7", "commit b 5", "commit t 0"}
	if got := values(res); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if res.All[0].Timestamp != 7 || res.All[1].Timestamp != 5 {
		t.Fatalf("emit timestamps %d %d, want the marks'", res.All[0].Timestamp, res.All[1].Timestamp)
	}
	if !errors.Is(markErr, abi.ErrnoPhase) {
		t.Fatalf("Mark in OnCommit: %v", markErr)
	}
	if got := values(h.MustCommit()); len(got) != 0 {
		t.Fatalf("a second commit point repeated %q", got)
	}
}

func TestCommitMarksLimit(t *testing.T) {
	var errs []error
	plugin(func(r *sdk.Record) error {
		for _, k := range []string{"a", "b", "a", "c"} {
			_, err := timer.Mark([]byte(k))
			errs = append(errs, err)
		}
		return nil
	}, nil, func(c *timer.Commit) error { return nil })
	h := newHost(t, sdktest.TimerLimits(0, 0, 2))
	h.MustProcess(sdktest.Record{})
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], abi.ErrnoLimit) {
		t.Fatalf("errors %v", errs)
	}
}

// CommitEvery runs the commit point after every n records.
func TestCommitEvery(t *testing.T) {
	plugin(commands, nil, func(c *timer.Commit) error { return emit("commit " + string(c.Key)) })
	h := newHost(t, sdktest.CommitEvery(2))
	if got := values(h.MustProcess(sdktest.Record{Value: []byte("mark:x")})); len(got) != 0 {
		t.Fatalf("first record: %q", got)
	}
	if got := values(h.MustProcess(sdktest.Record{Value: []byte("mark:x")})); !slices.Equal(got, []string{"commit x"}) {
		t.Fatalf("second record: %q", got)
	}
}

// A callback without a registered handler fails with a message that says
// what to do.
func TestNoHandler(t *testing.T) {
	plugin(commands, nil, nil)
	h := newHost(t)
	res := h.Process(sdktest.Record{Timestamp: 10, Value: []byte("set:e:1:a")})
	if len(res.Callbacks) != 1 || res.Callbacks[0].Err == nil || !strings.Contains(res.Callbacks[0].Err.Error(), "call timer.Handle") {
		t.Fatalf("callbacks %+v", res.Callbacks)
	}
}

func TestStreamTimeOption(t *testing.T) {
	plugin(commands, firedEmit, nil)
	h := newHost(t, sdktest.StreamTime(500))
	if got := values(h.MustProcess(sdktest.Record{Timestamp: 3, Value: []byte("now")})); !strings.HasPrefix(got[0], "now 500 ") {
		t.Fatalf("got %q", got)
	}
}

// The largest key makes a trigger larger than the first buffer the host
// asks for (4096 bytes); it must arrive whole.
func TestLargestKey(t *testing.T) {
	var got int
	plugin(func(r *sdk.Record) error {
		_, err := timer.Set(timer.EventTime, 1, make([]byte, abi.MaxTimerKeySize))
		return err
	}, func(f *timer.Firing) error { got = len(f.Key); return nil }, nil)
	h := newHost(t)
	h.MustProcess(sdktest.Record{Timestamp: 1})
	if got != abi.MaxTimerKeySize {
		t.Fatalf("key of %d bytes arrived as %d", abi.MaxTimerKeySize, got)
	}
}
