package runner

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A slow plugin costs its own task only (I9; issue 11: "30 slow records in
// one poll took 34 s, longer than the transaction timeout: the producer was
// fenced and the healthy processor stalled the whole time"). Here one poll
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
