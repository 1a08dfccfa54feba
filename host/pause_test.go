package host

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// Pause and resume through the control topic, under exactly_once: a paused
// processor processes nothing of what arrives, across a restart of the
// process (the pause is read from the control topic at start), while the
// other processor goes on; /v1/processors says so; after the resume every
// input comes out exactly once.
func TestPauseResumeThroughControlTopic(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	in2, out2 := p.b.Name(t, "in2"), p.b.Name(t, "out2")
	p.b.CreateTopic(t, in2, 3, nil)
	p.b.CreateTopic(t, out2, 3, nil)
	p.cfg.Guarantee = ExactlyOnce
	other := p.cfg.Processors[0]
	other.Name, other.Inputs, other.Outputs = "other", []string{in2}, map[string]OutputConfig{"out": {Topic: out2}}
	p.cfg.Processors = append(p.cfg.Processors, other)
	p.cfg.ApplyDefaults()
	if err := p.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, log := depCtx(t), testLogger(t)
	produce := func(topic string, from, n int) {
		recs := make([]*kgo.Record, 0, n)
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
		}
		p.b.Produce(t, recs...)
	}
	outputs := func(topic string) map[string]int {
		seen := map[string]int{}
		for _, r := range p.b.ReadCommitted(t, topic, 30*time.Second) {
			seen[string(r.Value)]++
		}
		return seen
	}
	waitOutputs := func(topic string, n int) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			if got := len(outputs(topic)); got != n {
				return fmt.Errorf("%s: %d distinct outputs, want %d", topic, got, n)
			}
			return nil
		})
	}
	paused := func(h *Host) map[string]bool {
		out := map[string]bool{}
		for _, pi := range h.status.Processors() {
			out[pi.Name] = pi.Paused
		}
		return out
	}
	waitPaused := func(h *Host, want bool) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			if got := paused(h); got["proc"] != want || got["other"] {
				return fmt.Errorf("paused %v; want proc %v, other false", got, want)
			}
			return nil
		})
	}

	const n = 50
	produce(p.in, 0, n)
	produce(in2, 0, n)
	h, stop := p.run(t)
	waitOutputs(p.out, n)
	waitOutputs(out2, n)

	if res, err := Pause(ctx, p.cfg, "proc", log); err != nil || !res.Paused || res.Offset < 0 {
		t.Fatalf("Pause = %+v, %v", res, err)
	}
	waitPaused(h, true)
	produce(p.in, n, n)
	produce(in2, n, n)
	waitOutputs(out2, 2*n)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A restarted process reads the pause from the control topic.
	h, stop = p.run(t)
	waitPaused(h, true)
	produce(in2, 2*n, n)
	waitOutputs(out2, 3*n)
	if got := outputs(p.out); len(got) != n {
		t.Fatalf("proc produced %d distinct outputs while paused, want the %d from before the pause", len(got), n)
	}

	if res, err := Resume(ctx, p.cfg, "proc", log); err != nil || res.Paused {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	waitPaused(h, false)
	waitOutputs(p.out, 2*n)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{p.out: 2 * n, out2: 3 * n} {
		got := outputs(topic)
		for i := 0; i < want; i++ {
			if c := got["v"+strconv.Itoa(i)]; c != 1 {
				t.Fatalf("%s: input %d came out %d times, want once", topic, i, c)
			}
		}
	}
}
