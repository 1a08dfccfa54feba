package host

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// BenchmarkWindowCount measures the cost of a
// windowed count, whose timers go through the host (set, kept with the
// task's state, fired), next to the plain stateful count, in the same run
// and on the same input. The target is a windowed count with emit final at
// no more than 1.5x the plain count's CPU per input record.
//
// Configurations, each under exactly_once with the default commit
// interval (100 ms) and commit_records 10,000 (the default when the
// first figures were taken; set here so they stay comparable):
//
//   - plain: internal/testplugins/counter. Per record one Get and one Put of
//     the key's count in store "counts" and one output record: the same
//     state work per record as windowcount's (one count per key and window),
//     without timers.
//   - final: plugins/windowcount, tumbling 10 s windows, emit final. Per
//     record a Get and a Put of the window's count; per key and window one
//     event-time timer set, and at the close one firing that emits the count
//     and deletes the entry.
//   - update: the same with emit update: one output record per input record,
//     as plain, so that update/plain is the window and timer overhead at
//     the same output volume (final/plain also saves the producing of 92%
//     of plain's output records; with kfake that is broker CPU too).
//   - commit: the same with emit commit: at every commit point the plugin's
//     on_commit emits the latest count of each window that changed. The
//     commit points here come every 10,000 records (commit_records) rather
//     than every 100 ms, so out/record depends on that setting.
//
// The input is the same for all: 600,000 records of about 100 bytes with
// 4,000 keys on 4 partitions (as BenchmarkThroughput), stamped 4 per
// millisecond from an hour ago, so that the stream time crosses a window
// end every 40,000 records and the windows close during the run (each key
// has about 10 records per window; the last window stays open).
//
// One op runs each configuration once, as a new application reading the
// input from the start, timed from Run until the group's committed offsets
// reach the input's end. Reported per configuration: records/s,
// cpu-us/record (the process's CPU per input record; with kfake it
// includes the broker) and out/record (output records per input record,
// from the runner's counter: it would count records of aborted
// transactions too, and the log says when there were aborts); and the
// ratios of each windowed configuration's CPU per record to plain's.
//
// The log also gives each run's cuts: a task's share of a poll cut at the
// commit deadline, the rest fetched again after the commit point. Above
// 100,000 records/s (commit_records per commit_interval) the commit points
// come from commit_records and cuts are rare; a configuration slower than
// that reaches the deadline in mid-poll, and the fetching again is CPU
// that widens its gap to the faster ones (emit update: tens of cuts per
// run where the others have a few).
//
// There is no timed assertion: the figures are for comparing, on the same
// machine, in the same run.
func BenchmarkWindowCount(b *testing.B) {
	const n, keys, partitions = 600_000, 4_000, 4
	const perMs = 4 // records per millisecond of event time
	br := testbroker.New(b)
	counter := wasmbuild.Build(b, "./internal/testplugins/counter")
	windowcount := wasmbuild.Build(b, "./plugins/windowcount")
	in := br.Name(b, "wb-in")
	br.CreateTopic(b, in, partitions, nil)
	// A window start (a multiple of 10 s) an hour ago: a real broker's
	// retention deletes records with much older timestamps.
	t0 := (time.Now().UnixMilli()/10_000 - 360) * 10_000
	pad := strings.Repeat("x", 80)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := 0; i < n; i++ {
		// key 8 bytes + value 92 bytes
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "key-%04d", i%keys),
			Value: fmt.Appendf(nil, "id-%08d-%s", i, pad), Timestamp: time.UnixMilli(t0 + int64(i/perMs))})
		if len(recs) == cap(recs) {
			br.Produce(b, recs...)
			recs = recs[:0]
		}
	}
	br.Produce(b, recs...)

	configs := []windowBenchConfig{
		{name: "plain", proc: ProcessorConfig{Plugin: counter, Stores: []string{"counts"}}, output: "out"},
		{name: "final", proc: ProcessorConfig{Plugin: windowcount, Stores: []string{"windows"},
			Config: map[string]any{"size": "10s", "emit": "final"}}, output: "counts"},
		{name: "update", proc: ProcessorConfig{Plugin: windowcount, Stores: []string{"windows"},
			Config: map[string]any{"size": "10s", "emit": "update"}}, output: "counts"},
		{name: "commit", proc: ProcessorConfig{Plugin: windowcount, Stores: []string{"windows"},
			Config: map[string]any{"size": "10s", "emit": "commit"}}, output: "counts"},
	}
	for i := range configs {
		out := br.Name(b, "wb-out-"+configs[i].name)
		br.CreateTopic(b, out, partitions, nil)
		configs[i].proc.Name = "count"
		configs[i].proc.Inputs = []string{in}
		configs[i].proc.Outputs = map[string]OutputConfig{configs[i].output: {Topic: out}}
	}
	res := map[string]*windowBenchResult{}
	for _, c := range configs {
		res[c.name] = &windowBenchResult{}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Rotate which configuration runs first: a process's first run pays
		// for warming up (heap growth, the broker's coordinators).
		order := make([]windowBenchConfig, 0, len(configs))
		for j := range configs {
			order = append(order, configs[(windowBenchOps+j)%len(configs)])
		}
		windowBenchOps++
		for _, c := range order {
			r := runWindowBench(b, br, c, in, n)
			res[c.name].add(r)
			b.Logf("%s: %.0f records/s, %.2f cpu-us/record, %d out (%.3f/record), %d timer firings, %d commit calls, %d commits, %d aborts, %d cuts",
				c.name, float64(r.records)/r.elapsed.Seconds(), r.cpuPerRecord(), r.out, r.outPerRecord(), r.firings, r.commitCalls, r.commits, r.aborts, r.cuts)
		}
	}
	b.StopTimer()
	for _, c := range configs {
		r := res[c.name]
		b.ReportMetric(float64(r.records)/r.elapsed.Seconds(), c.name+"-records/s")
		b.ReportMetric(r.cpuPerRecord(), c.name+"-cpu-us/record")
		b.ReportMetric(r.outPerRecord(), c.name+"-out/record")
	}
	plain := res["plain"].cpuPerRecord()
	for _, c := range configs[1:] {
		b.ReportMetric(res[c.name].cpuPerRecord()/plain, c.name+"/plain-cpu")
	}
}

// windowBenchOps counts BenchmarkWindowCount's ops in this process (over
// -count runs too), to rotate the order of the configurations.
var windowBenchOps int

type windowBenchConfig struct {
	name   string
	proc   ProcessorConfig // Name, Inputs and Outputs are set by the benchmark
	output string          // the plugin's output name
}

// windowBenchResult accumulates the runs of one configuration.
type windowBenchResult struct {
	records, out, firings, commitCalls, commits, aborts, cuts int64
	elapsed, cpu                                              time.Duration
}

func (t *windowBenchResult) add(o *windowBenchResult) {
	t.records += o.records
	t.out += o.out
	t.firings += o.firings
	t.commitCalls += o.commitCalls
	t.commits += o.commits
	t.aborts += o.aborts
	t.cuts += o.cuts
	t.elapsed += o.elapsed
	t.cpu += o.cpu
}

// cpuPerRecord is in µs of process CPU per input record.
func (t *windowBenchResult) cpuPerRecord() float64 {
	return float64(t.cpu.Nanoseconds()) / 1000 / float64(t.records)
}

func (t *windowBenchResult) outPerRecord() float64 { return float64(t.out) / float64(t.records) }

// runWindowBench runs one application of configuration c over the whole
// input and measures it; the host is stopped and closed before it returns.
func runWindowBench(b *testing.B, br *testbroker.Broker, c windowBenchConfig, in string, n int64) *windowBenchResult {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	cfg := &Config{
		AppID:      br.Name(b, "wb-"+c.name),
		Kafka:      KafkaConfig{Brokers: br.Addrs(), CreateTopics: true, CommitRecords: 10_000},
		State:      StateConfig{Dir: b.TempDir()},
		Processors: []ProcessorConfig{c.proc},
		Runtime:    RuntimeConfig{CacheDir: "off"},
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
	stats := h.runnerOf("count").Stats("count")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	cpu0, start := testutil.ProcessCPU(), time.Now()
	go func() { done <- h.Run(ctx) }()
	deadline := time.After(5 * time.Minute)
	for committed := false; !committed; {
		select {
		case err := <-done:
			b.Fatalf("%s: Run ended early: %v", c.name, err)
		case <-deadline:
			cancel()
			b.Fatalf("%s: not all committed after 5 minutes (%d records in)", c.name, stats.RecordsIn.Load())
		case <-time.After(5 * time.Millisecond):
		}
		if stats.RecordsIn.Load() >= n {
			committed = testbroker.AllCommitted(b, adm, cfg.AppID, ends)
		}
	}
	r := &windowBenchResult{records: n, elapsed: time.Since(start), cpu: testutil.ProcessCPU() - cpu0}
	b.StopTimer()
	r.out, r.firings, r.commitCalls = stats.RecordsOut.Load(), stats.TimerFirings.Load(), stats.CommitCalls.Load()
	r.commits, r.aborts, r.cuts = stats.Commits.Load(), stats.Aborts.Load(), stats.Cuts.Load()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("%s: Run: %v", c.name, err)
	}
	return r
}
