// Package e2e runs the bundled word count end to end through the host in
// Go, Rust, C and TypeScript: a test that all four commit the same bytes
// (e2e_test.go) and a benchmark. It is a package of its own because it needs a Kafka
// broker (internal/testbroker): the Makefile's integration suite runs every
// such package again against real Kafka, which the conformance tests do not
// need.
package e2e

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/testbroker"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// BenchmarkWordcountEndToEnd runs the word count end to end through the
// host (Kafka in, the plugin, the state store with its changelog, Kafka
// out, exactly-once) with the Go, Rust, C and TypeScript plugins, in one run:
//
//	go test -run '^$' -bench WordcountEndToEnd -benchtime 1x -count 3 ./host/internal/conformance/e2e/
//	WASMSTREAM_TEST_BROKERS=127.0.0.1:19092 go test ...   # against a real broker
//
// The input is 50,000 lines of 10 words (wordLines: a 1,000-word
// vocabulary, the lines of the conformance package's BenchmarkPolyglot)
// on 4 partitions. One op runs each language once as a new application (own group, changelog and state directory) reading the input
// from the start, timed from Run until the group's committed offsets reach
// the input's end. It reports lines/s and cpu-us/line, the process's CPU
// per input line (with kfake that includes the broker).
//
// WASMSTREAM_BENCH_WORDCOUNT=name=path,... adds other wordcount modules to
// the same run (an earlier build of the Go plugin, say), reported by name.
func BenchmarkWordcountEndToEnd(b *testing.B) {
	const n, partitions = 50_000, 4
	br := testbroker.New(b)
	in := br.Name(b, "wc-in")
	br.CreateTopic(b, in, partitions, nil)
	lines := wordLines()
	recs := make([]*kgo.Record, 0, 10_000)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(lines[i%len(lines)].Key), Value: lines[i%len(lines)].Value})
		if len(recs) == cap(recs) {
			br.Produce(b, recs...)
			recs = recs[:0]
		}
	}
	br.Produce(b, recs...)
	plugins := map[string]string{}
	names := append([]string(nil), langs...)
	for _, lang := range langs {
		plugins[lang] = polybuild.Plugin(b, lang, "wordcount")
	}
	if extra := os.Getenv("WASMSTREAM_BENCH_WORDCOUNT"); extra != "" {
		for _, kv := range strings.Split(extra, ",") {
			name, path, ok := strings.Cut(kv, "=")
			if !ok {
				b.Fatalf("WASMSTREAM_BENCH_WORDCOUNT: %q is not name=path", kv)
			}
			names = append(names, name)
			plugins[name] = path
		}
	}
	type total struct {
		elapsed, cpu time.Duration
		lines        int
	}
	res := map[string]*total{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, lang := range names {
			el, cpu := runWordcount(b, br, plugins[lang], in, n)
			t := res[lang]
			if t == nil {
				t = &total{}
				res[lang] = t
			}
			t.elapsed += el
			t.cpu += cpu
			t.lines += n
			b.Logf("%s: %.0f lines/s, %.1f cpu-us/line", lang, float64(n)/el.Seconds(), float64(cpu.Microseconds())/float64(n))
		}
	}
	b.StopTimer()
	for _, lang := range names {
		t := res[lang]
		b.ReportMetric(float64(t.lines)/t.elapsed.Seconds(), lang+"-lines/s")
		b.ReportMetric(float64(t.cpu.Microseconds())/float64(t.lines), lang+"-cpu-us/line")
	}
}

// runWordcount runs one application over the whole input and returns the
// wall and process CPU time from Run until everything is committed.
func runWordcount(b *testing.B, br *testbroker.Broker, plugin, in string, n int) (time.Duration, time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	cfg := &host.Config{
		AppID:     br.Name(b, "wc"),
		Guarantee: host.ExactlyOnce,
		Kafka:     host.KafkaConfig{Brokers: br.Addrs(), CreateTopics: true},
		State:     host.StateConfig{Dir: b.TempDir()},
		Processors: []host.ProcessorConfig{{
			Name: "wordcount", Plugin: plugin, Inputs: []string{in},
			Outputs: map[string]host.OutputConfig{"counts": {Topic: br.Name(b, "wc-out")}}, Stores: []string{"counts"},
		}},
		Runtime: host.RuntimeConfig{CacheDir: "off"},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	h, err := host.New(context.Background(), cfg, host.WithLogger(testbroker.Logger(b, slog.LevelWarn)))
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	defer h.Close()
	adm := br.Admin(b)
	ends, err := adm.ListEndOffsets(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	cpu0, start := testutil.ProcessCPU(), time.Now()
	go func() { done <- h.Run(ctx) }()
	deadline := time.After(5 * time.Minute)
	for !testbroker.AllCommitted(b, adm, cfg.AppID, ends) {
		select {
		case err := <-done:
			b.Fatalf("Run ended early: %v", err)
		case <-deadline:
			cancel()
			b.Fatalf("%s: not all committed after 5 minutes", plugin)
		case <-time.After(10 * time.Millisecond):
		}
	}
	el, cpu := time.Since(start), testutil.ProcessCPU()-cpu0
	b.StopTimer()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatalf("Run: %v", err)
	}
	return el, cpu
}

var langs = []string{"go", "rust", "c", "ts"}

// wordLines are 1,000 lines of 10 words each from a 1,000-word vocabulary
// (words of 3 to 9 letters): the records of the conformance package's
// wordcount benchmark.
func wordLines() []*abi.Record {
	vocab := make([]string, 1000)
	for i := range vocab {
		w := make([]byte, 3+i%7)
		x := uint32(i*2654435761 + 1)
		for k := range w {
			w[k] = byte('a' + x%26)
			x = x*1103515245 + 12345
		}
		vocab[i] = string(w)
	}
	recs := make([]*abi.Record, 1000)
	for i := range recs {
		var words []string
		for k := 0; k < 10; k++ {
			words = append(words, vocab[(i*7+k*131)%len(vocab)])
		}
		recs[i] = &abi.Record{Timestamp: int64(i), Key: []byte("line"), Value: []byte(strings.Join(words, " "))}
	}
	return recs
}
