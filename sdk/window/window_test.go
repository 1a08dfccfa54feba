package window_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
	"github.com/wasmstream/wasmstream/sdk/timer"
	"github.com/wasmstream/wasmstream/sdk/window"
)

var (
	out   = sdk.Output("out")
	late  = sdk.Output("late")
	store = sdk.Store("w")
)

// start installs a plugin that adds every record to the windows of spec
// and emits each result to "out" as "key start-end count[ final]" (count
// "retract" for a retraction), and returns a fake host for it.
func start(t *testing.T, spec window.Spec, opts ...sdktest.Option) (*sdktest.Host, *window.Windows) {
	t.Helper()
	spec.Store = store
	if spec.Name == "" {
		spec.Name = "t"
	}
	spec.Aggregate = window.Count
	if spec.Gap > 0 {
		spec.Merge = window.MergeCounts
	}
	spec.Result = func(res *window.Result) error {
		v := "retract"
		if res.Agg != nil {
			n, err := window.CountOf(res.Agg)
			if err != nil {
				return err
			}
			v = strconv.FormatUint(n, 10)
		}
		s := string(res.Key) + " " + strconv.FormatInt(res.Window.Start, 10) + "-" + strconv.FormatInt(res.Window.End, 10) + " " + v
		if res.Final {
			s += " final"
		}
		return out.Emit(sdk.Out{Key: res.Key, Value: []byte(s), Timestamp: res.Timestamp})
	}
	w, err := window.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	sdk.OnInit(nil)
	sdk.Handle(w.Add)
	timer.Handle(func(f *timer.Firing) error {
		ok, err := w.OnTimer(f)
		if !ok {
			return errors.New("a timer that is not the windows': " + string(f.Key))
		}
		return err
	})
	timer.OnCommit(func(c *timer.Commit) error {
		ok, err := w.OnCommit(c)
		if !ok {
			return errors.New("a mark that is not the windows': " + string(c.Key))
		}
		return err
	})
	return sdktest.New(t, append(opts, sdktest.Outputs("out", "late"), sdktest.Stores("w"))...), w
}

func rec(key string, ts int64) sdktest.Record {
	return sdktest.Record{Key: []byte(key), Value: []byte("v"), Timestamp: ts}
}

func outs(res sdktest.Result) []string {
	var v []string
	for _, e := range res.Emitted["out"] {
		v = append(v, string(e.Value))
	}
	return v
}

func expect(t *testing.T, what string, res sdktest.Result, want ...string) {
	t.Helper()
	if err := res.Failed(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := outs(res); !slices.Equal(got, want) {
		t.Fatalf("%s: emitted %q, want %q", what, got, want)
	}
}

func TestTumblingEmitFinal(t *testing.T) {
	h, _ := start(t, window.Spec{Size: 10, Grace: 5})
	expect(t, "a@1", h.Process(rec("a", 1)))
	expect(t, "b@3", h.Process(rec("b", 3)))
	expect(t, "a@9", h.Process(rec("a", 9)))
	expect(t, "a@12: window [0,10) is open until stream time 15", h.Process(rec("a", 12)))
	expect(t, "a@7 out of order, within grace", h.Process(rec("a", 7)))
	res := h.Process(rec("c", 15))
	expect(t, "c@15 closes [0,10)", res, "a 0-10 3 final", "b 0-10 1 final")
	if ts := res.Emitted["out"][0].Timestamp; ts != 9 {
		t.Fatalf("result timestamp %d, want the largest record timestamp 9", ts)
	}
	expect(t, "a@8 is late", h.Process(rec("a", 8)))
	expect(t, "c@100 closes [10,20)", h.Process(rec("c", 100)), "a 10-20 1 final", "c 10-20 1 final")
	if n := h.State("w").Len(); n != 2 { // c's window [100,110) and the late count
		t.Fatalf("state keys left: %q", h.State("w").Keys())
	}
}

func TestLateRecordsCountedAndRouted(t *testing.T) {
	h, w := start(t, window.Spec{Size: 10, LateOutput: late})
	h.MustProcess(rec("a", 25))
	res := h.MustProcess(sdktest.Record{Key: []byte("a"), Value: []byte("old"), Timestamp: 9,
		Headers: []sdk.Header{{Key: "h", Value: []byte("1")}}})
	l := res.Emitted["late"]
	if len(l) != 1 || string(l[0].Value) != "old" || l[0].Timestamp != 9 || len(l[0].Headers) != 2 ||
		l[0].Headers[1].Key != window.LateHeader || string(l[0].Headers[1].Value) != "t" {
		t.Fatalf("late output %+v", l)
	}
	h.MustProcess(sdktest.Record{Key: []byte("a"), Timestamp: -1}) // no timestamp: late too
	var n uint64
	sdk.Handle(func(*sdk.Record) error {
		var err error
		n, err = w.LateCount()
		return err
	})
	h.MustProcess(sdktest.Record{})
	if n != 2 {
		t.Fatalf("late count %d, want 2", n)
	}
}

func TestHopping(t *testing.T) {
	h, _ := start(t, window.Spec{Size: 10, Advance: 5, Emit: window.EmitUpdate})
	expect(t, "a@7", h.Process(rec("a", 7)), "a 0-10 1", "a 5-15 1")
	expect(t, "a@12", h.Process(rec("a", 12)), "a 5-15 2", "a 10-20 1")
	// Stream time 12 closed [0,10); a@3 fits no open window: late.
	expect(t, "a@3", h.Process(rec("a", 3)))
	// a@6 misses [0,10) but fits [5,15): not late.
	expect(t, "a@6", h.Process(rec("a", 6)), "a 5-15 3")
	res := h.Process(rec("b", 2)) // windows start at 0 and later only
	expect(t, "b@2 is late (stream time 12 closed [0,10))", res)
}

func TestHoppingFirstWindowsStartAtZero(t *testing.T) {
	h, _ := start(t, window.Spec{Size: 10, Advance: 5, Emit: window.EmitUpdate})
	expect(t, "a@2", h.Process(rec("a", 2)), "a 0-10 1")
}

func TestEmitOnCommit(t *testing.T) {
	h, _ := start(t, window.Spec{Size: 10, Emit: window.EmitOnCommit})
	for _, ts := range []int64{1, 2, 3} {
		expect(t, "a", h.Process(rec("a", ts)))
	}
	h.MustProcess(rec("b", 4))
	expect(t, "commit 1", h.Commit(), "a 0-10 3", "b 0-10 1")
	expect(t, "commit 2: nothing changed", h.Commit())
	h.MustProcess(rec("a", 5))
	// The window closes before the commit point: its change since the last
	// commit is emitted at the close, once.
	expect(t, "close", h.Process(rec("c", 10)), "a 0-10 4 final")
	expect(t, "commit 3", h.Commit(), "c 10-20 1")
	expect(t, "close c", h.Process(rec("c", 25)))
}

// With the host's commit-mark limit reached, updates are emitted at once.
func TestEmitOnCommitOverMarkLimit(t *testing.T) {
	h, _ := start(t, window.Spec{Size: 10, Emit: window.EmitOnCommit}, sdktest.TimerLimits(0, 0, 1))
	expect(t, "a", h.Process(rec("a", 1)))
	expect(t, "b over the limit", h.Process(rec("b", 1)), "b 0-10 1")
	expect(t, "commit", h.Commit(), "a 0-10 1")
}

func TestSessions(t *testing.T) {
	h, _ := start(t, window.Spec{Gap: 10, Grace: 20})
	h.MustProcess(rec("a", 100))
	h.MustProcess(rec("a", 105))
	h.MustProcess(rec("a", 125)) // a new session: more than 10 after 105
	h.MustProcess(rec("a", 115)) // within 10 of 105 and of 125: merges them
	h.MustProcess(rec("b", 120))
	expect(t, "nothing closed yet", h.Process(rec("z", 150)))
	// b's session [120,121) closes at 121+10+20; a's [100,126) at 126+30.
	expect(t, "b closes", h.Process(rec("z", 151)), "b 120-121 1 final")
	expect(t, "a closes", h.Process(rec("z", 156)), "a 100-126 4 final")
	expect(t, "z closes", h.Process(rec("y", 300)), "z 150-157 3 final")
}

func TestSessionsEmitUpdateRetractsMerged(t *testing.T) {
	h, _ := start(t, window.Spec{Gap: 10, Grace: 50, Emit: window.EmitUpdate})
	expect(t, "1", h.Process(rec("a", 100)), "a 100-101 1")
	expect(t, "2", h.Process(rec("a", 120)), "a 120-121 1")
	expect(t, "bridge", h.Process(rec("a", 110)), "a 120-121 retract", "a 100-121 3")
	// An earlier record moves the session's start: the session under the
	// old start is retracted.
	expect(t, "earlier", h.Process(rec("a", 95)), "a 100-121 retract", "a 95-121 4")
	expect(t, "inside", h.Process(rec("a", 115)), "a 95-121 5")
	if got := h.State("w").Len(); got != 1 {
		t.Fatalf("state %q", h.State("w").Keys())
	}
}

func TestSessionLate(t *testing.T) {
	h, w := start(t, window.Spec{Gap: 10, Grace: 5})
	h.MustProcess(rec("a", 100))
	h.MustProcess(rec("b", 200))
	// a's session [100,101) closed at 101+10+5 = 116 <= 200: a@95 would
	// merge into it but the merged session is closed too: late.
	h.MustProcess(rec("a", 95))
	h.MustProcess(rec("b", 186)) // joins b's open session, not late
	var n uint64
	sdk.Handle(func(*sdk.Record) error { var err error; n, err = w.LateCount(); return err })
	h.MustProcess(sdktest.Record{})
	if n != 1 {
		t.Fatalf("late count %d", n)
	}
}

func TestNewChecksSpec(t *testing.T) {
	agg := window.Count
	res := func(*window.Result) error { return nil }
	for _, c := range []struct {
		spec window.Spec
		want string
	}{
		{window.Spec{Store: store, Size: 1, Aggregate: agg, Result: res}, "Name is required"},
		{window.Spec{Name: "a\x00", Store: store, Size: 1, Aggregate: agg, Result: res}, "zero byte"},
		{window.Spec{Name: "a", Size: 1, Aggregate: agg, Result: res}, "Store is required"},
		{window.Spec{Name: "a", Store: store, Aggregate: agg, Result: res}, "exactly one of Size"},
		{window.Spec{Name: "a", Store: store, Size: 1, Gap: 1, Aggregate: agg, Result: res}, "exactly one of Size"},
		{window.Spec{Name: "a", Store: store, Size: 10, Advance: 11, Aggregate: agg, Result: res}, "Advance must be in (0, Size]"},
		{window.Spec{Name: "a", Store: store, Gap: 10, Aggregate: agg, Result: res}, "Merge is required"},
		{window.Spec{Name: "a", Store: store, Size: 10, Grace: -1, Aggregate: agg, Result: res}, "Grace"},
		{window.Spec{Name: "a", Store: store, Size: 10, Result: res}, "Aggregate is required"},
		{window.Spec{Name: "a", Store: store, Size: 10, Aggregate: agg}, "Result is required"},
		{window.Spec{Name: "a", Store: store, Size: 10, Aggregate: agg, Result: res, Emit: 9}, "unknown Emit"},
	} {
		if _, err := window.New(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}

// Timers and marks of another Windows or of the plugin are not taken.
func TestOnTimerIgnoresOtherKeys(t *testing.T) {
	w, err := window.New(window.Spec{Name: "x", Store: store, Size: 10, Aggregate: window.Count,
		Result: func(*window.Result) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "x", "y\x00w", "x\x00w\x00\x00\x00\x09short", "x\x00q\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"} {
		if ok, err := w.OnTimer(&timer.Firing{Kind: timer.EventTime, Key: []byte(k)}); ok || err != nil {
			t.Errorf("OnTimer(%q) = %v, %v", k, ok, err)
		}
		if ok, err := w.OnCommit(&timer.Commit{Key: []byte(k)}); ok || err != nil {
			t.Errorf("OnCommit(%q) = %v, %v", k, ok, err)
		}
	}
}

func TestCount(t *testing.T) {
	a, _ := window.Count(nil, nil)
	a, _ = window.Count(a, nil)
	if n, _ := window.CountOf(a); n != 2 {
		t.Fatal(n)
	}
	m, _ := window.MergeCounts(a, binary.BigEndian.AppendUint64(nil, 5))
	if n, _ := window.CountOf(m); n != 7 {
		t.Fatal(n)
	}
	if _, err := window.CountOf([]byte{1}); err == nil {
		t.Fatal("a 1-byte count was accepted")
	}
	if _, err := window.CountOf([]byte{}); err == nil {
		t.Fatal("an empty count was accepted")
	}
}

// Out-of-order input against a reference computed independently: random
// keys and timestamps jittered around a rising clock, tumbling and hopping
// windows with a grace period, emit-final. Every window that received a
// record is emitted exactly once, after it closed, with the count of the
// records that came before the stream time passed its end plus grace;
// every other record is late.
func TestRandomOutOfOrderAgainstReference(t *testing.T) {
	for _, c := range []struct{ size, adv, grace int64 }{{100, 100, 0}, {100, 100, 30}, {100, 25, 40}, {60, 40, 10}} {
		t.Run(strconv.FormatInt(c.size, 10)+"/"+strconv.FormatInt(c.adv, 10)+"/"+strconv.FormatInt(c.grace, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.size), uint64(c.adv*1000+c.grace)))
			h, w := start(t, window.Spec{Size: c.size, Advance: c.adv, Grace: c.grace}, sdktest.CommitEvery(7))
			type win struct {
				key   string
				start int64
			}
			want := map[win]int{}
			var stream int64 = -1
			lateWant := 0
			var got []string
			collect := func(res sdktest.Result) {
				if err := res.Failed(); err != nil {
					t.Fatal(err)
				}
				got = append(got, outs(res)...)
			}
			for i := range 2000 {
				ts := max(0, int64(i)*3+rng.Int64N(240)-120)
				key := "k" + strconv.Itoa(rng.IntN(5))
				stream = max(stream, ts)
				applied := false
				for s := max(0, ts-c.size+c.adv) / c.adv * c.adv; s <= ts; s += c.adv {
					if s+c.size+c.grace > stream {
						want[win{key, s}]++
						applied = true
					}
				}
				if !applied {
					lateWant++
				}
				collect(h.Process(rec(key, ts)))
			}
			collect(h.Process(rec("end", 1<<40))) // closes everything before it
			collect(h.Commit())
			seen := map[win]bool{}
			for _, g := range got {
				f := strings.Fields(g) // key start-end count final
				if len(f) != 4 || f[3] != "final" {
					t.Fatalf("result %q", g)
				}
				se := strings.Split(f[1], "-")
				s, _ := strconv.ParseInt(se[0], 10, 64)
				n, _ := strconv.Atoi(f[2])
				k := win{f[0], s}
				if f[0] == "end" {
					continue
				}
				if seen[k] {
					t.Fatalf("window %v emitted twice", k)
				}
				seen[k] = true
				if want[k] != n {
					t.Fatalf("window %v: count %d, want %d", k, n, want[k])
				}
			}
			if len(seen) != len(want) {
				var missing []string
				for k := range want {
					if !seen[k] {
						missing = append(missing, k.key+"@"+strconv.FormatInt(k.start, 10))
					}
				}
				sort.Strings(missing)
				t.Fatalf("%d windows emitted, want %d; missing %v", len(seen), len(want), missing)
			}
			var n uint64
			sdk.Handle(func(*sdk.Record) error { var err error; n, err = w.LateCount(); return err })
			h.MustProcess(sdktest.Record{Timestamp: 1 << 40})
			if int(n) != lateWant || lateWant == 0 {
				t.Fatalf("late %d, want %d (and some)", n, lateWant)
			}
		})
	}
}

// Sessions on out-of-order input against a reference model: every closed
// session is emitted once with its span and count, and late records are
// counted.
func TestRandomSessionsAgainstReference(t *testing.T) {
	const gap, grace = 20, 15
	rng := rand.New(rand.NewPCG(7, 11))
	h, w := start(t, window.Spec{Gap: gap, Grace: grace}, sdktest.CommitEvery(5))
	type session struct{ start, end, n int64 }
	open := map[string][]session{}
	var want, got []string
	var stream int64 = -1
	lateWant := 0
	for i := range 3000 {
		ts := max(0, int64(i)*2+rng.Int64N(80)-40)
		if rng.IntN(10) == 0 {
			ts += 60 // a burst ahead, which closes sessions early
		}
		key := "k" + strconv.Itoa(rng.IntN(4))
		stream = max(stream, ts)
		s := session{ts, ts + 1, 1}
		var keep []session
		for _, o := range open[key] {
			if ts >= o.start-gap && ts <= o.end-1+gap {
				s = session{min(s.start, o.start), max(s.end, o.end), s.n + o.n}
			} else {
				keep = append(keep, o)
			}
		}
		if s.end+gap+grace <= stream {
			lateWant++
		} else {
			open[key] = append(keep, s)
		}
		for k, ss := range open { // the timers that are due after the record
			var left []session
			for _, o := range ss {
				if o.end+gap+grace <= stream {
					want = append(want, k+" "+strconv.FormatInt(o.start, 10)+"-"+strconv.FormatInt(o.end, 10)+" "+strconv.FormatInt(o.n, 10)+" final")
				} else {
					left = append(left, o)
				}
			}
			open[k] = left
		}
		res := h.Process(rec(key, ts))
		if err := res.Failed(); err != nil {
			t.Fatal(err)
		}
		got = append(got, outs(res)...)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) || len(want) < 100 {
		t.Fatalf("got %d results, want %d\ngot  %q\nwant %q", len(got), len(want), got[:min(10, len(got))], want[:min(10, len(want))])
	}
	var n uint64
	sdk.Handle(func(*sdk.Record) error { var err error; n, err = w.LateCount(); return err })
	h.MustProcess(sdktest.Record{Timestamp: 0})
	if int(n) != lateWant || lateWant == 0 {
		t.Fatalf("late %d, want %d (and some)", n, lateWant)
	}
}

// In commit mode a merged-away session is retracted only if it was ever
// emitted; the merged session is emitted at the next commit point.
func TestSessionsEmitOnCommit(t *testing.T) {
	h, _ := start(t, window.Spec{Gap: 10, Grace: 100, Emit: window.EmitOnCommit})
	expect(t, "a@100", h.Process(rec("a", 100)))
	expect(t, "commit 1", h.Commit(), "a 100-101 1")
	expect(t, "a@120", h.Process(rec("a", 120)))
	expect(t, "a@140", h.Process(rec("a", 140)))
	expect(t, "commit 2", h.Commit(), "a 120-121 1", "a 140-141 1")
	expect(t, "a@160 not yet emitted", h.Process(rec("a", 160)))
	// a@130 joins 120 and 140; a@150 then joins that and 160, which was
	// never emitted: no retraction for it.
	expect(t, "bridge 120-140", h.Process(rec("a", 130)), "a 140-141 retract")
	expect(t, "bridge to 160", h.Process(rec("a", 150)))
	expect(t, "commit 3", h.Commit(), "a 120-161 5")
	// Both of a's sessions close unchanged since their last emit: nothing
	// more to say.
	expect(t, "close", h.Process(rec("z", 1000)))
	if got := h.State("w").Len(); got != 1 {
		t.Fatalf("state %q, want z's session only", h.State("w").Keys())
	}
}
