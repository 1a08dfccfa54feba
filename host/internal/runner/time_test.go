package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// timePlugin is a processor in Go that uses time the way a Wasm plugin does
// through the ABI: every record sets an event-time timer 10ms after its
// timestamp keyed by its key, records with key "p..." also a
// processing-time timer 200ms after the wall time of the call, and every
// record marks its key. Firings emit "timer:<kind>:<key>@<ts>", commit calls
// "commit:<key>@<ts>". A record with key "fail" sets a timer whose firing
// fails.
type timePlugin struct {
	noCommit bool // no on_commit export
}

func (*timePlugin) Close(context.Context) error { return nil }

// timeBase is added to the test records' timestamps and taken from the
// outputs': an hour ago, so that a real broker's retention does not delete
// the records (1970 timestamps are past any retention).
var timeBase = (time.Now().UnixMilli()/1000 - 3600) * 1000

type timeInstance struct {
	p   *timePlugin
	env Env
}

func (p *timePlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &timeInstance{p: p, env: env}, nil
}

func (i *timeInstance) Process(_ context.Context, rec *abi.Record) error {
	tm := i.env.Time
	if _, err := tm.SetTimer(abi.TimerEventTime, rec.Timestamp+10, rec.Key); err != nil {
		return err
	}
	if strings.HasPrefix(string(rec.Key), "p") {
		_, wall := tm.Now()
		if _, err := tm.SetTimer(abi.TimerProcessingTime, wall+200, rec.Key); err != nil {
			return err
		}
	}
	_, err := tm.Mark(rec.Key, rec.Timestamp)
	return err
}

func (i *timeInstance) TimeCallbacks() (bool, bool) { return true, !i.p.noCommit }

func (i *timeInstance) OnTimer(_ context.Context, trig *abi.Trigger) error {
	if string(trig.Key) == "fail" {
		return &KindError{Kind: FailureTrap, Err: errors.New("timer callback trapped")}
	}
	v := fmt.Sprintf("timer:%s:%s@%d", trig.Kind, trig.Key, trig.Timestamp-timeBase)
	return i.env.Sink.Emit(0, &abi.Record{Key: trig.Key, Value: []byte(v), Partition: abi.AnyPartition})
}

func (i *timeInstance) OnCommit(_ context.Context, trig *abi.Trigger) error {
	v := fmt.Sprintf("commit:%s@%d", trig.Key, trig.Timestamp-timeBase)
	return i.env.Sink.Emit(0, &abi.Record{Key: trig.Key, Value: []byte(v), Partition: abi.AnyPartition})
}

func (i *timeInstance) Close(context.Context) error { return nil }

// timeRunner starts a runner whose processor has a store and a time store,
// on a state database that outlives its runners.
func (f *fixture) timeRunner(t *testing.T, p Plugin, dir string, onError ErrorPolicy) (*Runner, *state.DB) {
	db, err := state.Open(dir, state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := f.runnerWith(t, p, onError, func(o *Options) {
		o.State = db
		o.Processors[0].Stores = []string{"s", "_time.upper"}
		o.Processors[0].Changelogs = []string{f.group + "-s-changelog", f.group + "-time-changelog"}
		o.Processors[0].TimeStore = true
	})
	return r, db
}

func (f *fixture) createChangelogs(t *testing.T, partitions int) {
	for _, c := range []string{f.group + "-s-changelog", f.group + "-time-changelog"} {
		f.b.CreateTopic(t, c, partitions, map[string]string{"cleanup.policy": "compact"})
	}
}

func (f *fixture) produceAt(t *testing.T, key string, ts int64) {
	f.b.ProduceTo(t, 0, &kgo.Record{Topic: f.in, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(timeBase + ts)})
}

// outputs returns the committed output values, in order.
func (f *fixture) outputs(t *testing.T) []string {
	var vs []string
	for _, r := range f.b.ReadCommitted(t, f.out, 30*time.Second) {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// waitOutputs waits until the committed output holds, for each of want,
// a value equal to it or, for a want ending in "*", starting with it; it
// returns the output, or fails the test.
func (f *fixture) waitOutputs(t *testing.T, want ...string) []string {
	t.Helper()
	var got []string
	testutil.Eventually(t, 30*time.Second, func() error {
		got = f.outputs(t)
		for _, w := range want {
			if count(got, w) == 0 {
				return fmt.Errorf("committed output has no %q; it has %q", w, got)
			}
		}
		return nil
	})
	return got
}

// count is how many values of vs match w (equal, or with the prefix
// before a final "*").
func count(vs []string, w string) int {
	n := 0
	for _, x := range vs {
		if x == w || (strings.HasSuffix(w, "*") && strings.HasPrefix(x, strings.TrimSuffix(w, "*"))) {
			n++
		}
	}
	return n
}

// Timers through the runner, under both guarantees (ABI.md section 8):
// event-time timers fire when a record moves the stream time past them; a
// processing-time timer fires on a quiet partition at a commit point; every
// marked key gets a commit call; pending timers and the stream time survive
// a restart on the same state directory and one on an empty directory
// (restored from the changelog); under exactly_once every firing and
// commit call is in the committed output exactly once.
func TestTimersFireCommitAndRestore(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) {
			f := newFixture(t, eos, 1)
			f.createChangelogs(t, 1)
			run := func(dir string, phase func()) {
				r, db := f.timeRunner(t, &timePlugin{}, dir, Fail)
				stop := start(t, r)
				phase()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			run(dir, func() {
				f.produceAt(t, "a", 1000) // timer a@1010
				f.produceAt(t, "b", 1005) // timer b@1015
				f.produceAt(t, "c", 1020) // stream time 1020: a and b fire; c@1030 waits
				f.waitOutputs(t, "timer:event:a@1010", "timer:event:b@1015")
				// An older record leaves the stream time at 1020, so its
				// timer (910) is due at once; its processing-time timer
				// fires 200ms later with no record arriving.
				f.produceAt(t, "p1", 900)
				f.waitOutputs(t, "timer:event:p1@910", "timer:processing:p1@*",
					"commit:a@1000", "commit:b@1005", "commit:c@1020", "commit:p1@900")
			})
			// The same state: the stream time is still 1020 (x@510 is due
			// at once), c@1030 is still pending (fires when e moves the
			// stream time to 1040).
			run(dir, func() {
				f.produceAt(t, "x", 500)
				f.waitOutputs(t, "timer:event:x@510")
				f.produceAt(t, "e", 1040)
				f.waitOutputs(t, "timer:event:c@1030")
			})
			// An empty state directory: the store, the timers (e@1050) and
			// the stream time (1040) come back from the changelog.
			run(t.TempDir(), func() {
				f.produceAt(t, "w", 100)
				f.waitOutputs(t, "timer:event:w@110")
				f.produceAt(t, "z", 1100)
				f.waitOutputs(t, "timer:event:e@1050")
			})
			got := f.outputs(t)
			for _, w := range []string{"timer:event:a@1010", "timer:event:b@1015", "timer:event:p1@910",
				"timer:processing:p1@*", "timer:event:x@510", "timer:event:c@1030", "timer:event:w@110",
				"timer:event:e@1050", "commit:a@1000", "commit:c@1020", "commit:e@1040", "commit:z@1100"} {
				n := count(got, w)
				if n == 0 || (eos && n != 1) {
					t.Errorf("%q is %d times in the committed output, want once: %q", w, n, got)
				}
			}
			if n := count(got, "timer:event:z@1110"); n != 0 {
				t.Errorf("z's timer fired before its time: %q", got)
			}
		})
	}
}

// A hot swap keeps the task's pending timers (ABI.md section 8.5): a timer
// set by the first version fires in the second, which sees it exactly as
// it was set; a version without wasmstream_on_commit gets no commit calls
// (the marks are dropped and counted) and its run goes on.
func TestTimersSurviveASwap(t *testing.T) {
	f := newFixture(t, true, 1)
	f.createChangelogs(t, 1)
	r, db := f.timeRunner(t, &timePlugin{}, t.TempDir(), Fail)
	defer db.Close()
	stop := start(t, r)
	defer stop()
	f.produceAt(t, "a", 1000) // a@1010, set by v1
	f.waitOutputs(t, "commit:a@1000")
	if err := r.vers.Propose("upper", versions.Info{ID: "v2"}, &timePlugin{noCommit: true}, versions.Canary{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if active, _ := activeVersion(r, "upper"); active != "v2" {
			return fmt.Errorf("active version %q", active)
		}
		return nil
	})
	f.produceAt(t, "b", 1020) // stream time 1020: v2 fires a@1010
	f.waitOutputs(t, "timer:event:a@1010")
	var fired *kgo.Record
	for _, rec := range f.b.ReadCommitted(t, f.out, 30*time.Second) {
		if string(rec.Value) == "timer:event:a@1010" {
			fired = rec
		}
	}
	if v := versionOf(fired); v != "v2" {
		t.Errorf("the timer set by v1 fired in version %q, want v2", v)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := r.Stats("upper").MarksDropped.Load(); n == 0 {
			return errors.New("b's mark, made under a version without on_commit, was not dropped")
		}
		return nil
	})
}

// A failing timer callback goes through on_error like a record (ABI.md
// section 8.3): skip drops the firing for good (the timer is removed);
// dead_letter does too and writes the trigger to the dead-letter topic;
// fail stops the task with the timer still pending, and a restart fires
// it again.
func TestTimerCallbackFailures(t *testing.T) {
	for _, policy := range []ErrorPolicy{Skip, DeadLetter, Fail} {
		t.Run(policy.String(), func(t *testing.T) {
			f := newFixture(t, true, 1)
			f.createChangelogs(t, 1)
			dir := t.TempDir()
			r, db := f.timeRunner(t, &timePlugin{}, dir, policy)
			stop := start(t, r)
			f.produceAt(t, "fail", 1000) // fail@1010: its firing fails
			f.produceAt(t, "a", 1020)    // moves the stream time: fail@1010 fires, fails
			testutil.Eventually(t, 30*time.Second, func() error {
				if n := r.Stats("upper").Failures()[FailureTrap.String()]; n == 0 {
					return errors.New("the failing timer has not fired")
				}
				return nil
			})
			st := r.Stats("upper")
			skipped, dead, failed := st.Skipped.Load(), st.DeadLettered.Load(), st.FailedTasks.Load()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			switch policy {
			case Skip:
				if skipped != 1 {
					t.Errorf("skipped %d, want 1", skipped)
				}
			case DeadLetter:
				dl := f.b.ReadCommitted(t, f.dlq, 30*time.Second)
				if dead != 1 || len(dl) != 1 || string(dl[0].Key) != "fail" {
					t.Fatalf("dead-lettered %d, dead letters %d", dead, len(dl))
				}
				var trig abi.Trigger
				if err := trig.Decode(dl[0].Value); err != nil || trig.Timestamp != timeBase+1010 || trig.Kind != abi.TimerEventTime {
					t.Errorf("dead letter value: %+v, %v; want the trigger of fail@1010", trig, err)
				}
			case Fail:
				if failed != 1 {
					t.Errorf("failed tasks %d, want 1", failed)
				}
			}
			// A restart on the same state: under fail the timer is still
			// pending and fires (and fails) again; otherwise it is gone.
			r, db = f.timeRunner(t, &timePlugin{}, dir, policy)
			stop = start(t, r)
			f.produceAt(t, "b", 1030) // a@1030 is due, after fail@1010 if that is pending
			if policy == Fail {
				testutil.Eventually(t, 30*time.Second, func() error {
					if n := r.Stats("upper").Failures()[FailureTrap.String()]; n != 1 {
						return fmt.Errorf("after a restart the failing timer failed %d times, want 1", n)
					}
					return nil
				})
			} else {
				f.waitOutputs(t, "timer:event:a@1030")
				if n := r.Stats("upper").Failures()[FailureTrap.String()]; n != 0 {
					t.Errorf("after a restart the dropped timer failed %d times, want 0", n)
				}
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
		})
	}
}
