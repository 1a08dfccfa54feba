package host

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// BenchmarkThroughput compares exactly_once with at_least_once in
// the same run: the stateful counter plugin (store "counts", one output
// record per input) over 200,000 pre-produced records of about 100 bytes
// with 4,000 keys on 4 partitions, default commit interval (100 ms) and
// commit_records 10,000 (the default when the figures were taken).
// One op runs each guarantee once, alternating, each as a new application
// (own group, changelog and state directory) reading the input from the
// start.
//
// A run is timed from Run until the group's committed offsets reach the
// input's end (everything processed and committed): records/s of each
// guarantee and their ratio eos/alo (the goal is >= 0.7). The "steady"
// figures time from the first record handed to the plugin to the last,
// leaving out the group join and the first fetch. Commit latencies are the
// durations of the runner's commit points with work (flush and offset
// commit, or the end of the transaction), pooled over the op's runs.
// cpu-us/record is the process's CPU per input record (with kfake it
// includes the broker).
//
// There is no timed assertion: the figures are for comparing, on the same
// machine, in the same run.
func BenchmarkThroughput(b *testing.B) {
	const n, keys, partitions = 200_000, 4_000, 4
	br := testbroker.New(b)
	plugin := wasmbuild.Build(b, "./internal/testplugins/counter")
	in, out := br.Name(b, "tp-in"), br.Name(b, "tp-out")
	br.CreateTopic(b, in, partitions, nil)
	br.CreateTopic(b, out, partitions, nil)
	pad := strings.Repeat("x", 80)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := 0; i < n; i++ {
		// key 8 bytes + value 92 bytes
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "key-%04d", i%keys), Value: fmt.Appendf(nil, "id-%08d-%s", i, pad)})
		if len(recs) == cap(recs) {
			br.Produce(b, recs...)
			recs = recs[:0]
		}
	}
	br.Produce(b, recs...)

	modes := []Guarantee{AtLeastOnce, ExactlyOnce}
	res := map[Guarantee]*throughputResult{}
	for _, m := range modes {
		res[m] = &throughputResult{}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which guarantee runs first: a process's first run pays
		// for warming up (heap growth, the broker's group and transaction
		// coordinators).
		throughputOps++
		if throughputOps%2 == 0 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			r := runThroughput(b, br, plugin, m, in, out, n)
			res[m].add(r)
			b.Logf("%s: %.0f records/s (steady %.0f), %d commits, %d aborts, commit p50 %v max %v",
				m, r.rate(), r.steadyRate(), r.commits, r.aborts, r.quantile(0.5), r.quantile(1))
		}
	}
	b.StopTimer()
	alo, eos := res[AtLeastOnce], res[ExactlyOnce]
	b.ReportMetric(alo.rate(), "alo-records/s")
	b.ReportMetric(eos.rate(), "eos-records/s")
	b.ReportMetric(eos.rate()/alo.rate(), "eos/alo")
	b.ReportMetric(eos.steadyRate()/alo.steadyRate(), "eos/alo-steady")
	for _, m := range []struct {
		name string
		r    *throughputResult
	}{{"alo", alo}, {"eos", eos}} {
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1}} {
			b.ReportMetric(float64(m.r.quantile(q.q).Microseconds())/1000, m.name+"-commit-"+q.name+"-ms")
		}
		b.ReportMetric(float64(m.r.cpu.Nanoseconds())/1000/float64(m.r.records), m.name+"-cpu-us/record")
		b.ReportMetric(float64(m.r.records)/float64(max(m.r.commits, 1)), m.name+"-records/commit")
	}
}

// throughputOps counts BenchmarkThroughput's ops in this process (over -count
// runs too), to alternate the order of the guarantees.
var throughputOps int

// throughputResult accumulates the runs of one guarantee.
type throughputResult struct {
	records        int64
	elapsed        time.Duration // Run to all committed
	steady         time.Duration // first record to last record processed
	cpu            time.Duration
	commits        int64
	aborts         int64
	commitLatency  []time.Duration
	latencyDropped int // commit points not in commitLatency (the runner keeps the latest 4096)
}

func (t *throughputResult) add(o *throughputResult) {
	t.records += o.records
	t.elapsed += o.elapsed
	t.steady += o.steady
	t.cpu += o.cpu
	t.commits += o.commits
	t.aborts += o.aborts
	t.commitLatency = append(t.commitLatency, o.commitLatency...)
	t.latencyDropped += o.latencyDropped
}

func (t *throughputResult) rate() float64 { return float64(t.records) / t.elapsed.Seconds() }

func (t *throughputResult) steadyRate() float64 { return float64(t.records) / t.steady.Seconds() }

// quantile is the q-quantile (nearest rank) of the commit latencies; 1 is
// the maximum.
func (t *throughputResult) quantile(q float64) time.Duration {
	if len(t.commitLatency) == 0 {
		return 0
	}
	s := slices.Clone(t.commitLatency)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// runThroughput runs one application with the given guarantee over the
// whole input and measures it; the host is stopped and closed before it
// returns.
func runThroughput(b *testing.B, br *testbroker.Broker, plugin string, guarantee Guarantee, in, out string, n int64) *throughputResult {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	cfg := &Config{
		AppID:     br.Name(b, "tp-"+strings.ReplaceAll(string(guarantee), "_", "")),
		Guarantee: guarantee,
		Kafka:     KafkaConfig{Brokers: br.Addrs(), CreateTopics: true, CommitRecords: 10_000},
		State:     StateConfig{Dir: b.TempDir()},
		Processors: []ProcessorConfig{{
			Name: "count", Plugin: plugin, Inputs: []string{in},
			Outputs: map[string]OutputConfig{"out": {Topic: out}}, Stores: []string{"counts"},
		}},
		Runtime: RuntimeConfig{CacheDir: "off"},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	h, err := New(context.Background(), cfg, WithLogger(testbroker.Logger(b, slog.LevelWarn)))
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	defer h.Close()
	adm := br.Admin(b)
	ends, err := adm.ListEndOffsets(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	stats := h.runnerOf("count").Stats("count") // the runner's atomics: polled every 5ms
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	cpu0, start := testutil.ProcessCPU(), time.Now()
	go func() { done <- h.Run(ctx) }()
	var first, last time.Time
	var seen int64
	deadline := time.After(5 * time.Minute)
	for committed := false; !committed; {
		select {
		case err := <-done:
			b.Fatalf("Run ended early: %v", err)
		case <-deadline:
			cancel()
			b.Fatalf("%s: not all committed after 5 minutes (%d records in)", guarantee, stats.RecordsIn.Load())
		case <-time.After(5 * time.Millisecond):
		}
		now, got := time.Now(), stats.RecordsIn.Load()
		if got > 0 && first.IsZero() {
			first = now
		}
		if got > seen {
			seen, last = got, now
		}
		if seen >= n {
			committed = testbroker.AllCommitted(b, adm, cfg.AppID, ends)
		}
	}
	r := &throughputResult{records: n, elapsed: time.Since(start), steady: last.Sub(first), cpu: testutil.ProcessCPU() - cpu0}
	b.StopTimer()
	// The latencies of the commit points up to here: the stop's own final
	// commit is not one of them.
	lat, count, _ := h.runnerOf("count").CommitLatencies()
	r.commitLatency, r.latencyDropped = lat, count-len(lat)
	r.commits, r.aborts = stats.Commits.Load(), stats.Aborts.Load()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("Run: %v", err)
	}
	return r
}
