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
	v := fmt.Sprintf("timer:%s:%s@%d", trig.Kind, trig.Key, trig.Timestamp)
	return i.env.Sink.Emit(0, &abi.Record{Key: trig.Key, Value: []byte(v), Partition: abi.AnyPartition})
}

func (i *timeInstance) OnCommit(_ context.Context, trig *abi.Trigger) error {
	v := fmt.Sprintf("commit:%s@%d", trig.Key, trig.Timestamp)
	return i.env.Sink.Emit(0, &abi.Record{Key: trig.Key, Value: []byte(v), Partition: abi.AnyPartition})
}

func (i *timeInstance) Close(context.Context) error { return nil }

// timeFixture is a fixture whose processor has a store and a time store,
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
	f.b.ProduceTo(t, 0, &kgo.Record{Topic: f.in, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ts)})
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := f.outputs(t)
		missing := ""
		for _, w := range want {
			if count(got, w) == 0 {
				missing = w
				break
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed output has no %q; it has %q", missing, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
