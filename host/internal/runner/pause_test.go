package runner

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A paused processor processes nothing of what arrives while it is paused,
// through a rebalance (a second member joins, its partitions are assigned
// paused) and on a member that starts paused, while the other processor
// of the same client goes on; after the resume every input comes out
// exactly once.
func TestPauseResume(t *testing.T) {
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) { testPauseResume(t, mode.eos) })
	}
}

func testPauseResume(t *testing.T, eos bool) {
	f := newFixture(t, eos, 4)
	in2, out2 := f.b.Name(t, "in2"), f.b.Name(t, "out2")
	f.b.CreateTopic(t, in2, 4, nil)
	f.b.CreateTopic(t, out2, 4, nil)
	produce := func(topic string, from, n int) {
		recs := make([]*kgo.Record, 0, n)
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))})
		}
		f.b.Produce(t, recs...)
	}
	committed := func(topic string, want int64) func() error {
		return func() error {
			var sum int64
			for _, o := range f.committed(t, topic) {
				sum += o
			}
			if sum != want {
				return fmt.Errorf("%s: %d committed, want %d", topic, sum, want)
			}
			return nil
		}
	}
	// Each process has its own registry, filled from the control topic.
	newMember := func(pauses *Pauses) *Runner {
		return f.runnerWith(t, &goPlugin{}, Fail, func(o *Options) {
			o.Processors = append(o.Processors, ProcessorSpec{
				Name: "other", Inputs: []string{in2}, Outputs: []string{out2}, OnError: Fail, Plugin: &goPlugin{},
			})
			o.Pauses = pauses
		}, kgo.HeartbeatInterval(200*time.Millisecond))
	}

	const batch = 200
	produce(f.in, 0, batch)
	produce(in2, 0, batch)
	p1 := NewPauses()
	r1 := newMember(p1)
	stop1 := start(t, r1)
	testutil.Eventually(t, 60*time.Second, committed(f.in, batch))
	testutil.Eventually(t, 60*time.Second, committed(in2, batch))

	p1.Set("upper", true)
	testutil.Eventually(t, 30*time.Second, func() error {
		if !r1.Paused("upper") || r1.Paused("other") {
			return fmt.Errorf("paused: upper %v, other %v; want true, false", r1.Paused("upper"), r1.Paused("other"))
		}
		return nil
	})
	produce(f.in, batch, batch)
	produce(in2, batch, batch)
	// The healthy processor of the same client takes its second batch.
	testutil.Eventually(t, 60*time.Second, committed(in2, 2*batch))

	// A second member joins, paused from the start as a process that read
	// the pause from the control topic: partitions move both ways.
	p2 := NewPauses()
	p2.Set("upper", true)
	r2 := newMember(p2)
	stop2 := start(t, r2)
	testutil.Eventually(t, 60*time.Second, func() error {
		if up, other := tasksOf(r2, "upper"), tasksOf(r2, "other"); up+other == 0 {
			return errors.New("member 2 has no task: no rebalance yet")
		}
		return nil
	})
	n2 := 3 * batch // records of in2 produced
	produce(in2, 2*batch, batch)
	testutil.Eventually(t, 60*time.Second, committed(in2, int64(n2)))
	if n := r1.Stats("upper").RecordsIn.Load() + r2.Stats("upper").RecordsIn.Load(); n != batch {
		t.Fatalf("upper processed %d records while paused, want only the %d before the pause", n, batch)
	}
	if got := committed(f.in, batch)(); got != nil {
		t.Fatal(got)
	}
	for _, o := range f.b.ReadCommitted(t, f.out, 30*time.Second) {
		if i, _ := strconv.Atoi(string(o.Value[len("VALUE-"):])); i >= batch {
			t.Fatalf("output %q of the second batch came out while upper was paused", o.Value)
		}
	}

	// Member 2 leaves: its partitions come back to member 1, assigned
	// to a paused processor, and stay paused.
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if up, other := tasksOf(r1, "upper"), tasksOf(r1, "other"); up != 4 || other != 4 {
			return fmt.Errorf("member 1 holds %d tasks of upper and %d of other, want 4 and 4", up, other)
		}
		return nil
	})
	produce(in2, n2, batch)
	n2 += batch
	testutil.Eventually(t, 60*time.Second, committed(in2, int64(n2)))
	if n := r1.Stats("upper").RecordsIn.Load() + r2.Stats("upper").RecordsIn.Load(); n != batch {
		t.Fatalf("upper processed %d records while paused after the rebalance, want %d", n, batch)
	}

	p1.Set("upper", false)
	testutil.Eventually(t, 60*time.Second, committed(f.in, 2*batch))
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topic string
		n     int
	}{{f.out, 2 * batch}, {out2, n2}} {
		seen := map[string]int{}
		for _, o := range f.b.ReadCommitted(t, c.topic, 30*time.Second) {
			seen[string(o.Value)]++
		}
		for i := 0; i < c.n; i++ {
			if n := seen["VALUE-"+strconv.Itoa(i)]; n != 1 {
				t.Fatalf("%s: input %d came out %d times, want once", c.topic, i, n)
			}
		}
		if len(seen) != c.n {
			t.Fatalf("%s: %d distinct outputs, want %d", c.topic, len(seen), c.n)
		}
	}
}

// tasksOf counts r's tasks of processor.
func tasksOf(r *Runner, processor string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range r.tasks {
		if id.Processor == processor {
			n++
		}
	}
	return n
}

// A paused processor's timers do not fire, nor does it get commit calls,
// while the other processor's fire at the same commit points; they fire
// after the resume.
func TestPausedTimersDoNotFire(t *testing.T) {
	f := newFixture(t, true, 1)
	f.createChangelogs(t, 1)
	in2 := f.b.Name(t, "in2")
	f.b.CreateTopic(t, in2, 1, nil)
	otherTime := f.group + "-other-time-changelog"
	f.b.CreateTopic(t, otherTime, 1, map[string]string{"cleanup.policy": "compact"})
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// The wall clock the plugins see moves only when the test moves it.
	var wall atomic.Int64
	wall.Store(time.Now().UnixMilli())
	pauses := NewPauses()
	r := f.runnerWith(t, &timePlugin{}, Fail, func(o *Options) {
		o.State = db
		o.Clock = func() time.Time { return time.UnixMilli(wall.Load()) }
		o.Pauses = pauses
		o.Processors[0].Stores = []string{"s", "_time.upper"}
		o.Processors[0].Changelogs = []string{f.group + "-s-changelog", f.group + "-time-changelog"}
		o.Processors[0].TimeStore = true
		o.Processors = append(o.Processors, ProcessorSpec{
			Name: "other", Inputs: []string{in2}, Outputs: []string{f.out}, OnError: Fail, Plugin: &timePlugin{},
			Stores: []string{"_time.other"}, Changelogs: []string{otherTime}, TimeStore: true,
		})
	})
	stop := start(t, r)
	f.produceAt(t, "p1", 900) // upper: a processing-time timer at wall+200
	f.b.ProduceTo(t, 0, &kgo.Record{Topic: in2, Key: []byte("p2"), Value: []byte("v"), Timestamp: time.UnixMilli(timeBase + 900)})
	f.waitOutputs(t, "commit:p1@900", "commit:p2@900")

	pauses.Set("upper", true)
	testutil.Eventually(t, 30*time.Second, func() error {
		if !r.Paused("upper") {
			return errors.New("upper not paused yet")
		}
		return nil
	})
	wall.Add(1000)
	// other's timer fires at a commit point; upper's, due as well, not.
	got := f.waitOutputs(t, "timer:processing:p2@*")
	if n := count(got, "timer:processing:p1@*"); n != 0 {
		t.Fatalf("the paused processor's timer fired: %q", got)
	}
	pauses.Set("upper", false)
	got = f.waitOutputs(t, "timer:processing:p1@*")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"timer:processing:p1@*", "timer:processing:p2@*", "commit:p1@900", "commit:p2@900"} {
		if n := count(got, w); n != 1 {
			t.Errorf("%q is %d times in the committed output, want once: %q", w, n, got)
		}
	}
}
