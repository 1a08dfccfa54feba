package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// candPlugin is a candidate for a shadow run: goPlugin's upper-casing,
// with another value for the keys in diff, failures (after emitting) for
// the keys in fail, and, with hog, a huge emit and state writes per
// record.
type candPlugin struct {
	diff, fail map[string]bool
	delay      time.Duration
	hog        bool
}

func (p *candPlugin) Close(context.Context) error { return nil }

func (p *candPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &candInstance{p: p, env: env}, nil
}

type candInstance struct {
	p   *candPlugin
	env Env
}

func (i *candInstance) Process(_ context.Context, rec *abi.Record) error {
	if i.p.delay > 0 {
		time.Sleep(i.p.delay)
	}
	v := bytes.ToUpper(rec.Value)
	if i.p.diff[string(rec.Key)] {
		v = append(v, "-CHANGED"...)
	}
	if i.p.hog {
		v = bytes.Repeat([]byte("x"), 1<<20)
	}
	if err := i.env.Sink.Emit(0, &abi.Record{Key: rec.Key, Value: v, Partition: abi.AnyPartition, Timestamp: rec.Timestamp}); err != nil {
		return err
	}
	if i.p.fail[string(rec.Key)] {
		return &KindError{Kind: FailureTrap, Err: errors.New("candidate rejected the record")}
	}
	return nil
}

func (i *candInstance) Close(context.Context) error { return nil }

// keysWhere returns the keys k<i> of 0 <= i < n for which pick(i).
func keysWhere(n int, pick func(int) bool) map[string]bool {
	m := map[string]bool{}
	for i := range n {
		if pick(i) {
			m["k"+strconv.Itoa(i)] = true
		}
	}
	return m
}

// outputsByPartition is what a consumer of the output sees: per
// partition, each record's key, value and headers, in order.
func outputsByPartition(recs []*kgo.Record) map[int32][]string {
	out := map[int32][]string{}
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		out[r.Partition] = append(out[r.Partition], fmt.Sprintf("%q=%q %v", r.Key, r.Value, hs))
	}
	return out
}

// runOnce runs n inputs through a fresh app (with cand as a shadow when
// non-nil) and returns its committed outputs and, with a shadow, its
// status and samples.
func runOnce(t *testing.T, eos bool, n int, cand *candPlugin, lim ShadowLimits) ([]*kgo.Record, ShadowStatus, []ShadowSample) {
	f := newFixture(t, eos, 4)
	f.produceInputs(t, 0, n)
	r := f.runner(t, &goPlugin{}, Fail)
	if cand != nil {
		if err := r.StartShadow("upper", "v2", cand, lim, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	st, _ := r.ShadowStatus("upper")
	samples := r.ShadowSamples("upper", 0)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// On Kafka the group's offsets can show before the transaction
	// markers reach every output partition: read until all n are there.
	var out []*kgo.Record
	testutil.Eventually(t, 60*time.Second, func() error {
		if out = f.b.ReadCommitted(t, f.out, 30*time.Second); len(out) < n {
			return fmt.Errorf("%d outputs committed, want %d", len(out), n)
		}
		return nil
	})
	return out, st, samples
}

// A candidate that changes its output for a known tenth of the keys: the
// shadow counts exactly those records as differences, samples them with
// both sides, and the active outputs are byte for byte those of the same
// run without a shadow.
func testShadowFindsKnownDifferences(t *testing.T, eos bool) {
	const n = 2000
	diff := keysWhere(n, func(i int) bool { return i%10 == 3 })
	base, _, _ := runOnce(t, eos, n, nil, ShadowLimits{})
	// A time budget no loaded machine reaches: exact counts are tested
	// here, the budget in TestShadowHostileCandidatesStopOnlyThemselves.
	out, st, samples := runOnce(t, eos, n, &candPlugin{diff: diff}, ShadowLimits{Samples: 1000, TimeCap: 10 * time.Second})
	if !st.Running || st.Stopped != "" {
		t.Fatalf("shadow stopped: %q", st.Stopped)
	}
	want := ShadowCounts{Records: n, Matches: n - int64(len(diff)), Differences: int64(len(diff))}
	if st.Total != want {
		t.Fatalf("shadow counts %+v, want %+v", st.Total, want)
	}
	if got := st.Total.DiffRatio(); got != 0.1 {
		t.Fatalf("difference ratio %v, want 0.1", got)
	}
	if len(samples) != len(diff) {
		t.Fatalf("%d samples, want %d", len(samples), len(diff))
	}
	for _, s := range samples {
		if !diff[string(s.Key)] || s.Topic == "" || s.Offset < 0 {
			t.Fatalf("sample of key %q (%s/%d@%d) is not one the candidate changed", s.Key, s.Topic, s.Partition, s.Offset)
		}
		if len(s.Active.Emits) != 1 || len(s.Candidate.Emits) != 1 ||
			string(s.Candidate.Emits[0].Value) != string(s.Active.Emits[0].Value)+"-CHANGED" {
			t.Fatalf("sample %+v: want both sides, the candidate's value the active's plus -CHANGED", s)
		}
	}
	a, b := outputsByPartition(base), outputsByPartition(out)
	if len(out) != n || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("active outputs with a shadow (%d records) differ from those without (%d)", len(out), len(base))
	}
}

// A candidate that fails 1 % of its records, as shadow-first runs it
// under exactly_once: no committed record carries its version, the shadow
// counts exactly its failures, and the verdict refuses it with the reason.
func testShadowFailingCandidate(t *testing.T, eos bool) {
	const n = 2000
	fail := keysWhere(n, func(i int) bool { return i%100 == 7 })
	out, st, _ := runOnce(t, eos, n, &candPlugin{fail: fail}, ShadowLimits{TimeCap: 10 * time.Second})
	if len(out) != n {
		t.Fatalf("%d outputs, want %d", len(out), n)
	}
	for _, o := range out {
		if v := versionOf(o); v != "initial" {
			t.Fatalf("a committed output carries version %q", v)
		}
	}
	if st.Total.Failures != int64(len(fail)) || st.Total.Records != n {
		t.Fatalf("shadow counts %+v, want %d failures of %d", st.Total, len(fail), n)
	}
	reason := ShadowVerdict(st, 0.01, -1)
	if !strings.Contains(reason, "failed 20 of 2000 records") {
		t.Fatalf("verdict %q, want a refusal naming 20 of 2000 failed", reason)
	}
}

func TestShadow(t *testing.T) {
	for _, eos := range []bool{true, false} {
		name := "at_least_once"
		if eos {
			name = "exactly_once"
		}
		t.Run(name+"/known_differences", func(t *testing.T) { testShadowFindsKnownDifferences(t, eos) })
		t.Run(name+"/failing_candidate", func(t *testing.T) { testShadowFailingCandidate(t, eos) })
	}
}

// Hostile candidates stop themselves, and only themselves: one that emits a
// MiB per record (nothing of it reaches a topic; a sample keeps 1 KiB of
// it), one that sleeps past its share of time, one that fails everything.
// The active path commits every input, byte-identical.
func TestShadowHostileCandidatesStopOnlyThemselves(t *testing.T) {
	const n = 6000
	cases := []struct {
		name   string
		cand   *candPlugin
		lim    ShadowLimits
		stop   string // in the reason; "" runs on
		sample int
	}{
		// Its share of time is large here: what is tested is that a
		// MiB per record stays out of the topics and the samples.
		{"huge emits", &candPlugin{hog: true}, ShadowLimits{Samples: 5, TimeSlack: 10 * time.Second, TimeCap: 10 * time.Second}, "", 5},
		{"slow", &candPlugin{delay: 30 * time.Millisecond}, ShadowLimits{TimeSlack: 5 * time.Millisecond}, "time budget", -1},
		// Time no loaded machine reaches (the race detector made the
		// default budget stop it first): what is tested is the failures.
		{"failing", &candPlugin{fail: keysWhere(n, func(int) bool { return true })}, ShadowLimits{MaxFailureRatio: 0.01, MinRecords: 10, TimeSlack: 10 * time.Second, TimeCap: 10 * time.Second}, "failed", -1},
	}
	// Within its time budget but over its share of time, window after
	// window: stopped after shadowStrikes of them.
	cases = append(cases, struct {
		name   string
		cand   *candPlugin
		lim    ShadowLimits
		stop   string
		sample int
	}{"over its share", &candPlugin{delay: 200 * time.Microsecond}, ShadowLimits{TimeSlack: time.Millisecond, TimeCap: 10 * time.Second}, "more than its share", -1})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, st, samples := runOnce(t, true, n, c.cand, c.lim)
			if len(out) != n {
				t.Fatalf("%d outputs, want %d", len(out), n)
			}
			for _, o := range out {
				if versionOf(o) != "initial" || !strings.HasPrefix(string(o.Value), "VALUE-") {
					t.Fatalf("output %q of version %q", o.Value, versionOf(o))
				}
			}
			if c.stop == "" && !st.Running || c.stop != "" && (st.Running || !strings.Contains(st.Stopped, c.stop)) {
				t.Fatalf("shadow running=%v stopped %q; want stopped for %q", st.Running, st.Stopped, c.stop)
			}
			if c.sample >= 0 && len(samples) != c.sample {
				t.Fatalf("%d samples, want %d", len(samples), c.sample)
			}
			for _, s := range samples {
				for _, e := range s.Candidate.Emits {
					if c.cand.hog && (len(e.Value) > DefaultShadowSampleBytes || e.ValueLen != 1<<20) {
						t.Fatalf("sample keeps %d bytes of a %d-byte value", len(e.Value), e.ValueLen)
					}
				}
			}
		})
	}
}

// StartShadow refuses a second shadow while one runs, and StopShadow ends
// it with the reason; the stopped run's status stays readable.
func TestShadowStartStop(t *testing.T) {
	f := newFixture(t, false, 1)
	r := f.runner(t, &goPlugin{}, Fail)
	if err := r.StartShadow("nope", "v2", &candPlugin{}, ShadowLimits{}, nil); err == nil {
		t.Fatal("a shadow of an unknown processor started")
	}
	if err := r.StartShadow("upper", "v2", &candPlugin{}, ShadowLimits{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.StartShadow("upper", "v3", &candPlugin{}, ShadowLimits{}, nil); !errors.Is(err, ErrShadowRunning) {
		t.Fatalf("second shadow: %v, want ErrShadowRunning", err)
	}
	if !r.StopShadow("upper", "operator") || r.StopShadow("upper", "again") {
		t.Fatal("StopShadow did not stop exactly once")
	}
	st, ok := r.ShadowStatus("upper")
	if !ok || st.Running || st.Stopped != "operator" || st.Version != "v2" {
		t.Fatalf("status %+v", st)
	}
	testutil.Eventually(t, time.Second, func() error {
		if err := r.StartShadow("upper", "v3", &candPlugin{}, ShadowLimits{}, nil); err != nil {
			return err
		}
		return nil
	})
}

// The overlay reads through to the active state, keeps a successful
// call's writes and drops a failed one's, never writes the active stores,
// merges its writes into scans, and refuses writes past its limit.
func TestShadowStateOverlay(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Task("p", 0, []string{"s"})
	defer st.Close()
	for _, k := range []string{"a", "b", "c"} {
		if err := st.Put(0, []byte(k), []byte("active-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	st.CommitRecord()
	o := &shadowState{st: st, limit: 1000}
	if v, ok, _ := o.Get(0, []byte("a")); !ok || string(v) != "active-a" {
		t.Fatalf("read through: %q %v", v, ok)
	}
	_ = o.Put(0, []byte("a"), []byte("shadow-a"))
	_ = o.Delete(0, []byte("b"))
	_ = o.Put(0, []byte("d"), []byte("shadow-d"))
	if why := o.endCall(true); why != "" {
		t.Fatal(why)
	}
	_ = o.Put(0, []byte("c"), []byte("failed-call"))
	o.endCall(false)
	if v, _, _ := st.Get(0, []byte("a")); string(v) != "active-a" {
		t.Fatalf("the overlay wrote the active store: %q", v)
	}
	if _, ok, _ := st.Get(0, []byte("d")); ok {
		t.Fatal("the overlay wrote the active store")
	}
	it, err := o.Scan(0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(k)+"="+string(v))
	}
	_ = it.Close()
	if want := "[a=shadow-a c=active-c d=shadow-d]"; fmt.Sprint(got) != want {
		t.Fatalf("scan %v, want %s", got, want)
	}
	if err := o.Put(0, []byte("big"), bytes.Repeat([]byte("x"), 2000)); !errors.Is(err, abi.ErrnoLimit) {
		t.Fatalf("a write past the limit: %v", err)
	}
	if why := o.endCall(true); !strings.Contains(why, "overlay passed") {
		t.Fatalf("endCall after a refused write: %q", why)
	}
}

// countPlugin counts its records per key in store 0 and emits each count:
// the candidate's writes go to its overlay (Env.Overlay), the active
// version's to the task's state.
type countPlugin struct{ bump string }

func (countPlugin) Close(context.Context) error { return nil }

func (p countPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	var st StateView = env.State
	if env.Overlay != nil {
		st = env.Overlay
	}
	return &countInstance{p: p, st: st, sink: env.Sink}, nil
}

type countInstance struct {
	p    countPlugin
	st   StateView
	sink Sink
}

func (i *countInstance) Process(_ context.Context, rec *abi.Record) error {
	v, _, err := i.st.Get(0, rec.Key)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(v))
	n++
	if string(rec.Key) == i.p.bump {
		n += 1000 // the candidate's change: this key's count runs ahead, from its first record on
	}
	if err := i.st.Put(0, rec.Key, []byte(strconv.Itoa(n))); err != nil {
		return err
	}
	return i.sink.Emit(0, &abi.Record{Key: rec.Key, Value: []byte(strconv.Itoa(n)), Partition: abi.AnyPartition})
}

func (i *countInstance) Close(context.Context) error { return nil }

// A stateful candidate reads through to the active state as it was before
// each record: the same counter as a shadow matches on every record; one
// that changes one key's count differs on exactly that key's records; and
// neither touches the active counts.
func TestShadowStatefulCandidate(t *testing.T) {
	const n, keys = 2000, 40
	for _, c := range []struct {
		bump string
		diff int64
	}{{"", 0}, {"k7", n / keys}} {
		f := newFixture(t, true, 4)
		db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		clog := f.b.Name(t, "clog")
		f.b.CreateTopic(t, clog, 4, nil)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("x")})
		}
		f.b.Produce(t, recs...)
		r := f.runnerWith(t, countPlugin{}, Fail, func(o *Options) {
			o.State = db
			o.Processors[0].Stores = []string{"counts"}
			o.Processors[0].Changelogs = []string{clog}
		})
		if err := r.StartShadow("upper", "v2", countPlugin{bump: c.bump}, ShadowLimits{TimeCap: 10 * time.Second}, nil); err != nil {
			t.Fatal(err)
		}
		stop := start(t, r)
		f.waitCommitted(t, f.endOffsets(t, f.in))
		st, _ := r.ShadowStatus("upper")
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := ShadowCounts{Records: n, Matches: n - c.diff, Differences: c.diff}
		if st.Total != want {
			t.Fatalf("candidate bumping %q: shadow counts %+v, want %+v (stopped %q)", c.bump, st.Total, want, st.Stopped)
		}
		var out []*kgo.Record
		testutil.Eventually(t, 60*time.Second, func() error {
			if out = f.b.ReadCommitted(t, f.out, 30*time.Second); len(out) < n {
				return fmt.Errorf("%d outputs, want %d", len(out), n)
			}
			return nil
		})
		last := map[string]int{}
		for _, o := range out {
			v, _ := strconv.Atoi(string(o.Value))
			last[string(o.Key)] = max(last[string(o.Key)], v)
		}
		for k, v := range last {
			if v != n/keys {
				t.Fatalf("active count of %s is %d, want %d: the shadow touched the active state", k, v, n/keys)
			}
		}
	}
}

// A cheap active version with a CPU-heavy shadow candidate: the
// candidate's time is its task's, run under the same slot, so the task
// counts as heavy (heavyTask) and its batches take a slot of the CPU
// share. Before, only the active version's time counted and the
// candidate's work escaped the share.
func TestShadowTimeMakesTheTaskHeavy(t *testing.T) {
	const delay = 4 * heavyCost
	f := newFixture(t, false, 1)
	r := f.runner(t, &goPlugin{}, Fail)
	// A share of time and a budget no test machine reaches: the candidate
	// must run every record, not be stopped for its slowness.
	lim := ShadowLimits{TimeRatio: 1e6, TimeCap: time.Minute}
	if err := r.StartShadow("upper", "v2", &candPlugin{delay: delay}, lim, nil); err != nil {
		t.Fatal(err)
	}
	stop := start(t, r)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	// In rounds, so the task's cost (a moving average over its batches)
	// is measured over several batches.
	const rounds, each = 8, 3
	for i := range rounds {
		f.produceInputs(t, i*each, each)
		f.waitCommitted(t, f.endOffsets(t, f.in))
	}
	if st, _ := r.ShadowStatus("upper"); !st.Running || st.Total.Records == 0 {
		t.Fatalf("the shadow compared no record or stopped: %+v", st)
	}
	r.mu.Lock()
	var cost time.Duration
	var heavy bool
	for _, tk := range r.tasks {
		cost, heavy = tk.recordCost, heavyTask(tk)
	}
	r.mu.Unlock()
	t.Logf("cost per record with a %s shadow candidate: %s", delay, cost)
	if !heavy {
		t.Errorf("the task costs %s per record, its shadow candidate %s: not heavy (above %s), so the candidate's work escapes the CPU share", cost, delay, heavyCost)
	}
}
