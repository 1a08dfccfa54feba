package runner

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// An output that takes the latest record per key gets, per commit window,
// the last record each key was emitted with: far fewer records than
// inputs, the last one of each key being the last input's; under
// exactly_once an aborted window leaves none of its records.
func testLatestPerKey(t *testing.T, eos bool) {
	f := newFixture(t, eos, 3)
	const n, keys = 3000, 30
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		// Keys k0..k29 cycled, so each key's inputs are in one partition,
		// in order.
		recs = append(recs, &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("value-" + strconv.Itoa(i))})
	}
	f.b.Produce(t, recs...)
	r := f.runnerWith(t, &goPlugin{delay: 100 * time.Microsecond}, Fail, func(o *Options) {
		o.Processors[0].Latest = []bool{true}
		o.CommitInterval = 100 * time.Millisecond
	})
	stop := start(t, r)
	if eos {
		// A window aborts half way: its latest records must not come out.
		testutil.Eventually(t, 30*time.Second, func() error {
			if in := r.Stats("upper").RecordsIn.Load(); in < n/3 {
				return fmt.Errorf("%d records in", in)
			}
			return nil
		})
		// Under the runner's lock, which every commit point holds: a
		// failure landing after a committed seal would break the runner
		// (no real produce fails there under exactly_once).
		injected := errors.New("injected produce failure")
		r.mu.Lock()
		r.cp.produceErr.Store(&injected)
		r.mu.Unlock()
	}
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	last := map[string]string{}
	for _, o := range out {
		last[string(o.Key)] = string(o.Value)
	}
	for k := range keys {
		want := "VALUE-" + strconv.Itoa(n-keys+k)
		if got := last["k"+strconv.Itoa(k)]; got != want {
			t.Errorf("key k%d: last output %q, want %q", k, got, want)
		}
	}
	s := r.Stats("upper")
	if len(out) >= n/2 {
		t.Errorf("%d outputs for %d inputs of %d keys: not the latest per key per window", len(out), n, keys)
	}
	if eos && s.Aborts.Load() == 0 {
		t.Error("no window aborted: the test proved nothing about aborts")
	}
	t.Logf("%d inputs, %d outputs, %d commits, %d aborts", n, len(out), s.Commits.Load(), s.Aborts.Load())
}
