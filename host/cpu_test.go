package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// CPU isolation between processors (I9): a
// processor whose records spin for their whole record_timeout on 8
// partitions, each its own group member (kafka.members: per_processor),
// next to a healthy passthrough with steady input. The healthy
// processor's commit latency (produce acknowledged → the group's committed
// offset past the record) is measured alone first, then beside the
// spinning one, in the same test; its p99 beside the spinner must stay
// within maxLatencyRatio of the baseline. Without a CPU share the spinning
// guests hold both cores of a 2-core machine (compiled guest code keeps
// its OS thread until it passes through Go) and the p99 grew 6.6 times
// with kfake, 2.3 times with Kafka; with it, 0.6-1.5 times (runner/cpushare.go).
func TestSpinningNeighbourKeepsCommitLatency(t *testing.T) {
	b := testbroker.New(t)
	sin, sout, gin, gout := b.Name(t, "spin-in"), b.Name(t, "spin-out"), b.Name(t, "steady-in"), b.Name(t, "steady-out")
	const spinParts, spinsPerPart = 8, 2
	b.CreateTopic(t, sin, spinParts, nil)
	b.CreateTopic(t, sout, 1, nil)
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second,
			Members: MembersPerProcessor},
		Processors: []ProcessorConfig{
			{Name: "spin", Plugin: engineTestdata("loop"), Inputs: []string{sin}, Outputs: map[string]OutputConfig{"out": {Topic: sout}},
				OnError: OnErrorSkip, Limits: Limits{RecordTimeout: time.Second}},
			{Name: "steady", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: gin, out: gout, cfg: cfg}
	h, stop := p.run(t)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for part := range int32(2) {
		b.ProduceTo(t, part, &kgo.Record{Topic: gin, Key: []byte("warm"), Value: []byte("v")})
	}
	p.waitProcessed(t)

	m := &latencyMeter{t: t, b: b, group: cfg.AppID, topic: gin}
	skipped := func() int64 {
		st, _ := h.Stats("spin")
		return st.Skipped
	}
	bound := maxLatencyRatio
	if testutil.Race {
		bound = maxLatencyRatioRace
	}
	// Up to latencyAttempts rounds, each its own baseline then the same
	// beside the spinner: a burst of load from outside the test (another
	// package's tests, a compiler) that falls on one beside phase fails
	// that round only, where a host without the share fails every round.
	var ratios []float64
	for round := range latencyAttempts {
		alone := m.measure(steadyRecords, nil)
		before := skipped()
		beside := m.measure(steadyRecords, func() {
			for part := range int32(spinParts) {
				recs := make([]*kgo.Record, spinsPerPart)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: sin, Partition: part, Key: []byte("spin"), Value: []byte(strconv.Itoa(round*spinsPerPart + i))}
				}
				b.ProduceTo(t, part, recs...)
			}
			// The spinning is under way: its first records timed out.
			testutil.Eventually(t, 60*time.Second, func() error {
				if n := skipped() - before; n < 2 {
					return fmt.Errorf("the spinning processor skipped %d records", n)
				}
				return nil
			})
		})
		n := skipped() - before
		a99, b99 := percentile(alone, 0.99), percentile(beside, 0.99)
		ratio := float64(b99) / float64(a99)
		ratios = append(ratios, ratio)
		t.Logf("round %d: healthy commit latency, %d records each: alone p50 %v p99 %v max %v; beside the spinner p50 %v p99 %v max %v (p99 ratio %.2f); the spinner skipped %d of %d records meanwhile",
			round+1, len(alone), percentile(alone, 0.5), a99, slices.Max(alone), percentile(beside, 0.5), b99, slices.Max(beside),
			ratio, n, spinParts*spinsPerPart)
		if n >= spinParts*spinsPerPart {
			t.Fatalf("the spinning processor ran out of records (%d skipped) before the measurement ended: it measured nothing", n)
		}
		if ratio <= bound {
			break
		}
		// The next round's baseline is measured alone: the spinner's
		// records of this round are done first.
		testutil.Eventually(t, 120*time.Second, func() error {
			if n := skipped() - before; n < spinParts*spinsPerPart {
				return fmt.Errorf("the spinning processor has skipped %d of its %d records", n, spinParts*spinsPerPart)
			}
			return nil
		})
	}
	if best := slices.Min(ratios); best > bound {
		t.Errorf("the healthy processor's commit-latency p99 beside the spinning one was %.2f times its p99 alone in the best of %d rounds (%.2f); at most %.2f allowed",
			best, len(ratios), ratios, bound)
	}
	if steady, _ := h.Stats("steady"); steady.Aborts != 0 {
		t.Errorf("the healthy processor aborted %d transactions", steady.Aborts)
	}
}

// latencyAttempts is how many rounds of baseline and measurement the
// CPU-isolation test may take to see the bound held once.
const latencyAttempts = 3

// steadyRecords is how many records a latency measurement produces, one
// every steadyEvery: 250 gives a p99 of the third worst.
const (
	steadyRecords = 250
	steadyEvery   = 20 * time.Millisecond
)

// maxLatencyRatio bounds the healthy processor's commit-latency p99 beside
// the spinning processor, as a multiple of its p99 alone (110-150 ms with
// a 100 ms commit interval on an idle machine). With the CPU share the
// ratio was 0.6-1.5 at a load average of 7-9 on 2 cores, kfake and Kafka,
// and up to 2.0 at 17, where the baseline itself moved from 340 to 560
// ms between runs; without the share, 6.6 with kfake (2.3 with Kafka,
// whose broker then shares the one free core, so there the test guards
// against worse than that).
const maxLatencyRatio = 2.5

// maxLatencyRatioRace is maxLatencyRatio under the race detector, which
// makes the healthy processor's Go code (fetch, produce, commit) several
// times slower and leaves the guests' compiled code as it is: 2.88 was
// seen there with the CPU share, at a load average of 7 on 2 cores. It
// still fails the 6.6 of no share at all.
const maxLatencyRatioRace = 4.0

// latencyMeter measures commit latencies of records produced to topic:
// from the produce's acknowledgement to the first time the group's
// committed offset of the record's partition is past it (the offsets are
// read every 5 ms, so a latency is late by at most that).
type latencyMeter struct {
	t            *testing.T
	b            *testbroker.Broker
	group, topic string
}

// measure produces n records, one every steadyEvery, after start (if
// set) returned, and returns each one's commit latency.
func (m *latencyMeter) measure(n int, start func()) []time.Duration {
	t := m.t
	if start != nil {
		start()
	}
	type sent struct {
		part   int32
		offset int64
		acked  time.Time
	}
	var mu sync.Mutex
	var pending []sent
	var lat []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := m.b.Admin(t)
	watched := make(chan error, 1)
	produced := make(chan struct{})
	go func() {
		for {
			committed, err := adm.FetchOffsets(ctx, m.group)
			now := time.Now()
			if err != nil && !errors.Is(err, kerr.GroupIDNotFound) && !kerr.IsRetriable(err) {
				watched <- fmt.Errorf("fetch offsets: %w", err)
				return
			}
			mu.Lock()
			left := pending[:0]
			for _, s := range pending {
				if c, ok := committed.Lookup(m.topic, s.part); ok && c.At > s.offset {
					lat = append(lat, now.Sub(s.acked))
				} else {
					left = append(left, s)
				}
			}
			pending = left
			mu.Unlock()
			select {
			case <-produced:
				if len(left) == 0 {
					watched <- nil
					return
				}
			default:
			}
			select {
			case <-ctx.Done():
				watched <- fmt.Errorf("%d records not committed: %w", len(left), ctx.Err())
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	cl := m.b.Client(t)
	tick := time.NewTicker(steadyEvery)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		r := &kgo.Record{Topic: m.topic, Partition: int32(i % 2), Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v")}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			acked := time.Now()
			mu.Lock()
			pending = append(pending, sent{r.Partition, r.Offset, acked})
			mu.Unlock()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(produced)
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	return lat
}
