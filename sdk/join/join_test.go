package join_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/join"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	out   = sdk.Output("out")
	late  = sdk.Output("late")
	store = sdk.Store("j")
)

const (
	leftIn  = 0
	rightIn = 1
)

// start installs a plugin that joins inputs 0 (left) and 1 (right) per spec
// and emits each result to "out" as "key left|right" where a side is
// "value@ts" or "-" when missing, and returns a fake host for it.
func start(t *testing.T, spec join.Spec, opts ...sdktest.Option) (*sdktest.Host, *join.Join) {
	t.Helper()
	spec.Store = store
	if spec.Name == "" {
		spec.Name = "j"
	}
	spec.Left, spec.Right = leftIn, rightIn
	spec.Result = func(res *join.Result) error {
		s := string(res.Key) + " " + side(res.Left) + "|" + side(res.Right)
		return out.Emit(sdk.Out{Key: res.Key, Value: []byte(s), Timestamp: res.Timestamp})
	}
	j, err := join.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	sdk.OnInit(nil)
	sdk.Handle(j.Add)
	timer.Handle(func(f *timer.Firing) error {
		ok, err := j.OnTimer(f)
		if !ok {
			return errors.New("a timer that is not the join's: " + string(f.Key))
		}
		return err
	})
	return sdktest.New(t, append(opts, sdktest.Outputs("out", "late"), sdktest.Stores("j"))...), j
}

func side(s *join.Side) string {
	if s == nil {
		return "-"
	}
	v := "null"
	if s.Value != nil {
		v = string(s.Value)
	}
	return v + "@" + strconv.FormatInt(s.Timestamp, 10)
}

var offset int64

func rec(input int, key, value string, ts int64) sdktest.Record {
	offset++
	return sdktest.Record{Key: []byte(key), Value: []byte(value), Timestamp: ts, Input: input, Offset: offset}
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

func TestInner(t *testing.T) {
	h, _ := start(t, join.Spec{Before: 10, After: 20, Grace: 5})
	expect(t, "l1@100", h.Process(rec(leftIn, "a", "l1", 100)))
	expect(t, "r1@95 joins l1 (within Before... of the right: l in [r-20, r+10])", h.Process(rec(rightIn, "a", "r1", 95)), "a l1@100|r1@95")
	expect(t, "r2@120 joins l1 (t+After)", h.Process(rec(rightIn, "a", "r2", 120)), "a l1@100|r2@120")
	expect(t, "r3@121 is past l1+After", h.Process(rec(rightIn, "a", "r3", 121)))
	expect(t, "other key", h.Process(rec(rightIn, "b", "rb", 118)))
	res := h.Process(rec(leftIn, "a", "l2", 119))
	expect(t, "l2@119 joins r2, r3 (in [109,139]) in timestamp order", res, "a l2@119|r2@120", "a l2@119|r3@121")
	if ts := res.Emitted["out"][1].Timestamp; ts != 121 {
		t.Fatalf("result timestamp %d, want the larger, 121", ts)
	}
}

func TestLeftEmitsUnmatchedOnceWindowPassed(t *testing.T) {
	h, _ := start(t, join.Spec{Before: 0, After: 10, Grace: 5, Kind: join.Left})
	expect(t, "l@100", h.Process(rec(leftIn, "a", "l", 100)))
	expect(t, "m@100", h.Process(rec(leftIn, "b", "m", 100)))
	expect(t, "r@108 matches l", h.Process(rec(rightIn, "a", "r", 108)), "a l@100|r@108")
	expect(t, "stream 115: a right record at 110 could still come", h.Process(rec(rightIn, "z", "x", 115)))
	// Stream time 116 > 100+10+5: l expired (matched, nothing), m unmatched.
	expect(t, "stream 116 expires l and m", h.Process(rec(rightIn, "z", "x", 116)), "b m@100|-")
	expect(t, "m's window passed: a right record for it is late", h.Process(rec(rightIn, "b", "r", 110)))
}

func TestOuter(t *testing.T) {
	h, _ := start(t, join.Spec{Before: 5, After: 5, Kind: join.Outer})
	expect(t, "r@10", h.Process(sdktest.Record{Key: []byte("a"), Timestamp: 10, Input: rightIn, Offset: 1}))
	expect(t, "l@50 expires r (10+5+0 < 50)", h.Process(rec(leftIn, "b", "l", 50)), "a -|null@10")
	expect(t, "l@100 expires l@50", h.Process(rec(leftIn, "c", "l", 100)), "b l@50|-")
}

// An empty value is a value, not null, whichever side is buffered.
func TestEmptyIsNotNull(t *testing.T) {
	h, _ := start(t, join.Spec{Before: 5, After: 5, Kind: join.Outer})
	expect(t, "l@10 empty", h.Process(rec(leftIn, "a", "", 10)))
	expect(t, "r@12 joins", h.Process(rec(rightIn, "a", "r", 12)), "a @10|r@12")
	expect(t, "r@40 empty", h.Process(rec(rightIn, "b", "", 40)))
	expect(t, "l@41 joins", h.Process(rec(leftIn, "b", "l", 41)), "b l@41|@40")
}

func TestLateCountedAndRouted(t *testing.T) {
	h, j := start(t, join.Spec{Before: 10, After: 10, Grace: 5, LateOutput: late})
	h.MustProcess(rec(leftIn, "a", "l", 100))
	res := h.MustProcess(rec(rightIn, "a", "old", 94)) // 94 < 100-5: late though within l's window
	if len(res.Emitted["out"]) != 0 {
		t.Fatalf("a late record joined: %q", outs(res))
	}
	l := res.Emitted["late"]
	if len(l) != 1 || string(l[0].Value) != "old" || l[0].Timestamp != 94 ||
		l[0].Headers[len(l[0].Headers)-1].Key != join.LateHeader {
		t.Fatalf("late output %+v", l)
	}
	h.MustProcess(sdktest.Record{Key: []byte("a"), Timestamp: -1, Input: leftIn}) // no timestamp: late
	var n uint64
	sdk.Handle(func(*sdk.Record) error {
		var err error
		n, err = j.LateCount()
		return err
	})
	h.MustProcess(sdktest.Record{})
	if n != 2 {
		t.Fatalf("late count %d, want 2", n)
	}
}

func TestBufferIsDeletedWhenWindowPasses(t *testing.T) {
	h, _ := start(t, join.Spec{Before: 10, After: 10, Grace: 5})
	for i := range 50 {
		h.MustProcess(rec(i%2, "k"+strconv.Itoa(i%7), "v", int64(1000+i)))
	}
	h.MustProcess(rec(leftIn, "end", "v", 10_000))
	if keys := h.State("j").Keys(); len(keys) != 1 { // the last record's own buffer entry
		t.Fatalf("buffered records left after their windows passed: %d", len(keys))
	}
	if n := len(h.Timers()); n != 1 {
		t.Fatalf("%d timers pending, want 1", n)
	}
}

func TestOtherInputFails(t *testing.T) {
	h, _ := start(t, join.Spec{After: 1})
	res := h.Process(rec(2, "a", "v", 1))
	if res.Err == nil || !strings.Contains(res.Err.Error(), "input 2") {
		t.Fatalf("a record of a third input: %v", res.Err)
	}
}

func TestNewChecksSpec(t *testing.T) {
	ok := join.Spec{Name: "j", Store: store, Left: 0, Right: 1, Result: func(*join.Result) error { return nil }}
	for name, mod := range map[string]func(*join.Spec){
		"no name":     func(s *join.Spec) { s.Name = "" },
		"zero byte":   func(s *join.Spec) { s.Name = "a\x00" },
		"no store":    func(s *join.Spec) { s.Store = nil },
		"no result":   func(s *join.Spec) { s.Result = nil },
		"same inputs": func(s *join.Spec) { s.Right = 0 },
		"negative":    func(s *join.Spec) { s.After = -1 },
		"kind":        func(s *join.Spec) { s.Kind = 9 },
	} {
		s := ok
		mod(&s)
		if _, err := join.New(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := join.New(ok); err != nil {
		t.Fatal(err)
	}
}

// TestRandomOutOfOrderAgainstReference joins random out-of-order streams of
// both sides and checks the output against a brute-force join of the
// records that were not late: every pair once, every unmatched record of a
// left or outer join once, nothing else.
func TestRandomOutOfOrderAgainstReference(t *testing.T) {
	for _, kind := range []join.Kind{join.Inner, join.Left, join.Outer} {
		for seed := range uint64(6) {
			t.Run(strconv.Itoa(int(kind))+"/"+strconv.FormatUint(seed, 10), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				spec := join.Spec{Before: rng.Int64N(30), After: rng.Int64N(30), Grace: rng.Int64N(20), Kind: kind}
				h, _ := start(t, spec)
				type in struct {
					input int
					key   string
					val   string
					ts    int64
				}
				var accepted []in
				var got []string
				stream := int64(-1)
				base := int64(1000)
				for i := range 400 {
					base += rng.Int64N(4)
					r := in{input: rng.IntN(2), key: "k" + strconv.Itoa(rng.IntN(5)), val: "v" + strconv.Itoa(i),
						ts: base - rng.Int64N(spec.Grace+15)} // some beyond grace: late
					stream = max(stream, r.ts)
					if r.ts >= stream-spec.Grace {
						accepted = append(accepted, r)
					}
					res := h.Process(rec(r.input, r.key, r.val, r.ts))
					if err := res.Failed(); err != nil {
						t.Fatal(err)
					}
					got = append(got, outs(res)...)
				}
				res := h.Process(rec(leftIn, "end", "x", base+1_000_000)) // expire everything
				if err := res.Failed(); err != nil {
					t.Fatal(err)
				}
				got = append(got, outs(res)...)

				var want []string
				matched := make([]bool, len(accepted))
				for a, l := range accepted {
					if l.input != leftIn {
						continue
					}
					for b, r := range accepted {
						if r.input == rightIn && r.key == l.key && r.ts >= l.ts-spec.Before && r.ts <= l.ts+spec.After {
							want = append(want, l.key+" "+l.val+"@"+strconv.FormatInt(l.ts, 10)+"|"+r.val+"@"+strconv.FormatInt(r.ts, 10))
							matched[a], matched[b] = true, true
						}
					}
				}
				for i, r := range accepted {
					if matched[i] {
						continue
					}
					s := r.val + "@" + strconv.FormatInt(r.ts, 10)
					switch {
					case r.input == leftIn && kind != join.Inner:
						want = append(want, r.key+" "+s+"|-")
					case r.input == rightIn && kind == join.Outer:
						want = append(want, r.key+" -|"+s)
					}
				}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("spec %+v: got %d results, want %d\n got %q\nwant %q", spec, len(got), len(want), got, want)
				}
			})
		}
	}
}
