package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/shadow"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// BenchmarkShadow measures what a shadow run costs the active path: the
// counter over the same prefilled input, with no shadow, with the counter
// itself as its shadow (every record compared, all matching), and with a
// slow candidate (counterslow, ~1 ms a record) as its shadow, which must
// stop itself; the modes alternate within the run. It reports throughput
// and process CPU per record, and the commit-point latencies (p50, p99,
// max) of each. Deploys go through the control topic: it needs a real
// broker (WASMSTREAM_TEST_BROKERS).
func BenchmarkShadow(b *testing.B) {
	const n, keys, partitions = 50_000, 4_000, 4
	br := testbroker.New(b)
	br.RequireReal(b, "a shadow is started through the control topic, which deploy refuses on an embedded broker")
	counter := wasmbuild.Build(b, "./internal/testplugins/counter")
	slowPath := wasmbuild.Build(b, "./internal/testplugins/counterslow")
	same, err := os.ReadFile(counter)
	if err != nil {
		b.Fatal(err)
	}
	slow, err := os.ReadFile(slowPath)
	if err != nil {
		b.Fatal(err)
	}
	in := br.Name(b, "sh-in")
	br.CreateTopic(b, in, partitions, nil)
	pad := strings.Repeat("x", 80)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "key-%04d", i%keys), Value: fmt.Appendf(nil, "id-%08d-%s", i, pad)})
		if len(recs) == cap(recs) {
			br.Produce(b, recs...)
			recs = recs[:0]
		}
	}
	br.Produce(b, recs...)
	modes := []struct {
		name string
		wasm []byte
	}{{"none", nil}, {"same", same}, {"slow", slow}}
	res := map[string]*throughputResult{}
	for _, m := range modes {
		res[m.name] = &throughputResult{}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 1 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			r, st := runShadowed(b, br, counter, m.wasm, in, n)
			res[m.name].add(r)
			b.Logf("%s: %.0f records/s, cpu %.1f us/record, %d commit points (one every %v), commit p50 %v p99 %v max %v; shadow %+v running=%v %s",
				m.name, r.rate(), float64(r.cpu.Nanoseconds())/1000/float64(r.records), r.commits, r.elapsed/time.Duration(max(r.commits, 1)),
				r.quantile(0.5), r.quantile(0.99), r.quantile(1), st.Total, st.Running, st.Stopped)
		}
	}
	b.StopTimer()
	base := res["none"]
	for _, name := range []string{"none", "same", "slow"} {
		r := res[name]
		b.ReportMetric(r.rate(), name+"-records/s")
		b.ReportMetric(float64(r.cpu.Nanoseconds())/1000/float64(r.records), name+"-cpu-us/record")
		b.ReportMetric(float64(r.quantile(0.99).Microseconds())/1000, name+"-commit-p99-ms")
		b.ReportMetric(float64(r.quantile(1).Microseconds())/1000, name+"-commit-max-ms")
		b.ReportMetric(float64((r.elapsed/time.Duration(max(r.commits, 1))).Microseconds())/1000, name+"-commit-every-ms")
		if name != "none" {
			b.ReportMetric(r.rate()/base.rate(), name+"/none-throughput")
			b.ReportMetric(float64(r.cpu)/float64(base.cpu), name+"/none-cpu")
			b.ReportMetric(float64(r.quantile(0.99))/float64(base.quantile(0.99)), name+"/none-commit-p99")
		}
	}
}

// runShadowed runs the counter over in's n records in a new app, with
// candidate as its shadow (none when nil), and returns the run's figures
// and the shadow's status at its end.
func runShadowed(b *testing.B, br *testbroker.Broker, plugin string, candidate []byte, in string, n int64) (*throughputResult, shadow.Status) {
	b.StopTimer()
	defer b.StartTimer()
	log := testbroker.Logger(b, slog.LevelWarn)
	cfg := &Config{
		AppID:     br.Name(b, "sh"),
		Guarantee: ExactlyOnce,
		Kafka:     KafkaConfig{Brokers: br.Addrs(), CreateTopics: true, CommitRecords: 10_000},
		State:     StateConfig{Dir: b.TempDir()},
		Processors: []ProcessorConfig{{
			Name: "count", Plugin: plugin, Inputs: []string{in},
			Outputs: map[string]OutputConfig{"out": {Topic: br.Name(b, "sh-out")}}, Stores: []string{"counts"},
		}},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if candidate != nil {
		if _, err := DeployShadow(ctx, cfg, "count", candidate, "candidate", log); err != nil {
			b.Fatal(err)
		}
	}
	h, err := New(ctx, cfg, WithLogger(log))
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	defer h.Close()
	adm := br.Admin(b)
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	cpu0, start := testutil.ProcessCPU(), time.Now()
	go func() { done <- h.Run(rctx) }()
	testutil.Eventually(b, 5*time.Minute, func() error {
		if !testbroker.AllCommitted(b, adm, cfg.AppID, ends) {
			return fmt.Errorf("not all committed")
		}
		return nil
	})
	r := &throughputResult{records: n, elapsed: time.Since(start), cpu: testutil.ProcessCPU() - cpu0}
	lat, count, _ := h.runnerOf("count").CommitLatencies()
	r.commitLatency, r.latencyDropped = lat, count-len(lat)
	r.commits = h.runnerOf("count").Stats("count").Commits.Load()
	st, _ := h.runnerOf("count").ShadowStatus("count")
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("Run: %v", err)
	}
	return r, st
}
