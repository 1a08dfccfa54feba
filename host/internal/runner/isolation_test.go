package runner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A slow plugin costs its own task only (I9; once, 30 slow records in
// one poll took 34 s, longer than the transaction timeout: the producer was
// fenced and the healthy processor stalled the whole time). Here one poll
// holds 30 records of 200 ms each (6 s of plugin time) for a slow
// processor, with a 3 s transaction timeout, next to a healthy processor.
// Commit points must come on schedule: the healthy processor's records are
// all committed while the slow one is still at its first records, no
// transaction is aborted or fenced, and every slow record is processed
// exactly once in the end.
func TestSlowPluginKeepsCommitPointsOnSchedule(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) {
			f := newFixture(t, eos, 1)
			fastIn := f.b.Name(t, "fast-in")
			f.b.CreateTopic(t, fastIn, 1, nil)
			const slowN, fastN = 30, 20
			f.produceInputs(t, 0, slowN)
			slow := &goPlugin{delay: 200 * time.Millisecond}
			fast := &goPlugin{}
			r := f.runnerWith(t, slow, Fail, func(o *Options) {
				o.CommitInterval = 100 * time.Millisecond
				o.TransactionTimeout = 3 * time.Second
				o.Processors[0].Name = "slow"
				o.Processors = append(o.Processors, ProcessorSpec{
					Name: "fast", Inputs: []string{fastIn}, Outputs: []string{f.out}, OnError: Fail, Plugin: fast,
				})
			})
			recs := make([]*kgo.Record, fastN)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: fastIn, Key: []byte("f" + strconv.Itoa(i)), Value: []byte("fast-" + strconv.Itoa(i))}
			}
			f.b.Produce(t, recs...)
			stop := start(t, r)

			testutil.Eventually(t, 60*time.Second, func() error {
				if got := f.committed(t, fastIn); got[0] != fastN {
					return fmt.Errorf("fast processor committed %v, want %d", got, fastN)
				}
				return nil
			})
			if n := slow.seen[0].Load(); n >= slowN/2 {
				t.Fatalf("the healthy processor's records were committed only after the slow one had processed %d of its %d records: commit points waited for the slow plugin", n, slowN)
			}
			f.waitCommitted(t, map[int32]int64{0: slowN})
			if err := stop(); err != nil {
				t.Fatalf("Run: %v (a slow plugin must not fence the producer or stop the runner)", err)
			}
			if a := r.Stats("slow").Aborts.Load() + r.Stats("fast").Aborts.Load(); a != 0 {
				t.Fatalf("%d transactions aborted", a)
			}
			if c := r.Stats("slow").Cuts.Load(); c == 0 {
				t.Fatal("the slow task's polls were never cut at the commit deadline")
			}
			out := f.b.ReadCommitted(t, f.out, 30*time.Second)
			slowOut := map[string]int{}
			for _, o := range out {
				if v := string(o.Value); strings.HasPrefix(v, "VALUE-") {
					slowOut[v]++
				}
			}
			if len(slowOut) != slowN {
				t.Fatalf("%d distinct slow outputs, want %d", len(slowOut), slowN)
			}
			for v, n := range slowOut {
				if n != 1 {
					t.Fatalf("output %s appears %d times", v, n)
				}
			}
		})
	}
}

// slowTimerPlugin is timePlugin whose timer firings on partition 0 take
// delay: its records are as cheap as any, its callbacks are not.
type slowTimerPlugin struct {
	timePlugin
	delay time.Duration
}

func (p *slowTimerPlugin) Instantiate(ctx context.Context, id TaskID, env Env) (Processor, error) {
	inst, err := p.timePlugin.Instantiate(ctx, id, env)
	if err != nil || id.Partition != 0 {
		return inst, err
	}
	return &slowTimerInstance{timeInstance: inst.(*timeInstance), delay: p.delay}, nil
}

type slowTimerInstance struct {
	*timeInstance
	delay time.Duration
}

func (i *slowTimerInstance) OnTimer(ctx context.Context, trig *abi.Trigger) error {
	time.Sleep(i.delay)
	return i.timeInstance.OnTimer(ctx, trig)
}

// Timer work is charged to its task like records: the
// processing slots of a poll go to the cheapest tasks first, and a task
// whose records are cheap but whose every record's timer firing is slow
// is not cheap. Both partitions get the same records, each setting an
// event-time timer that the next record makes due; only partition 0's
// firings are slow. Its task must cost more per record than partition
// 1's, by about a firing per record (before, only the records' own time
// counted, and the two cost the same).
func TestTimerWorkIsChargedToItsTask(t *testing.T) {
	const delay = 20 * time.Millisecond
	f := newFixture(t, true, 2)
	f.createChangelogs(t, 2)
	r, db := f.timeRunner(t, &slowTimerPlugin{delay: delay}, t.TempDir(), Fail)
	t.Cleanup(func() { _ = db.Close() })
	stop := start(t, r)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	const n = 20
	for p := range int32(2) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: f.in, Partition: p, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v"),
				Timestamp: time.UnixMilli(timeBase + int64(i)*100)})
		}
		f.b.ProduceTo(t, p, recs...)
	}
	f.waitCommitted(t, map[int32]int64{0: n, 1: n})
	r.mu.Lock()
	cost := map[int32]time.Duration{}
	for id, tk := range r.tasks {
		cost[id.Partition] = tk.recordCost
	}
	r.mu.Unlock()
	t.Logf("cost per record: partition 0 (slow firings) %s, partition 1 %s", cost[0], cost[1])
	if cost[0] < delay/2 {
		t.Errorf("partition 0's task costs %s per record, where each of its records' firings takes %s: its timer work is not charged", cost[0], delay)
	}
	if cost[1] >= cost[0]/2 {
		t.Errorf("partition 1's task (cheap firings) costs %s per record, partition 0's %s", cost[1], cost[0])
	}
}

// The processing slots go by cost class, then to the least recently run:
// tasks known to be cheap first, tasks not measured yet next, slow tasks
// last, and slow tasks of one class take turns (the one that waited goes
// first), so a poll cut at its deadline leaves different ones behind each
// time.
func TestSlotOrder(t *testing.T) {
	now := time.Now()
	mk := func(name string, cost time.Duration, ranAgo time.Duration) *task {
		tk := &task{recordCost: cost, id: TaskID{Processor: name}}
		if ranAgo >= 0 {
			tk.lastProcessed = now.Add(-ranAgo)
		}
		return tk
	}
	tasks := []*task{
		mk("spin-ran-last", time.Second, 0),
		mk("new", 0, -1),
		mk("spin-waited", 600*time.Millisecond, 5*time.Second), // one class with 1 s: [2^19, 2^20) µs
		mk("healthy", 3*time.Microsecond, 0),
		mk("healthy-2", 2*time.Microsecond, time.Second), // same class, ran earlier
		mk("medium", 20*time.Millisecond, 0),
	}
	slices.SortStableFunc(tasks, slotOrder)
	var got []string
	for _, tk := range tasks {
		got = append(got, tk.id.Processor)
	}
	want := []string{"healthy-2", "healthy", "new", "medium", "spin-waited", "spin-ran-last"}
	if !slices.Equal(got, want) {
		t.Fatalf("slot order %v, want %v", got, want)
	}
}
