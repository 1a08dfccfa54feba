// The word-count example, run the way its README says: its own
// pipeline.yaml, with the bundled plugins where it names them.
package wordcount_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// setup lays out a copy of the repository's relevant part: pipeline.yaml
// in examples/word-count and the built plugins in bin/plugins, where the
// pipeline names them (make plugins), and loads the config with environ.
func setup(t *testing.T, environ []string) *host.Config {
	root := t.TempDir()
	files := map[string]string{"examples/word-count/pipeline.yaml": "pipeline.yaml"}
	for _, p := range []string{"split", "wordcount"} {
		files["bin/plugins/"+p+".wasm"] = wasmbuild.Build(t, "./plugins/"+p)
	}
	for to, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to = filepath.Join(root, to)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := host.LoadConfig(filepath.Join(root, "examples/word-count/pipeline.yaml"), environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.CacheDir = "off"
	cfg.State.Dir = t.TempDir()
	return cfg
}

// lines puts every word on every partition of a 3-partition input: a
// count where the lines arrive would be wrong.
var lines = []string{
	"the cat", "the hat", "A cat, a hat, the end",
	"The end of the cat", "hat hat HAT", "a the cat end",
}

func trueCounts() map[string]int {
	want := map[string]int{}
	for _, l := range lines {
		for _, w := range strings.FieldsFunc(strings.ToLower(l), func(r rune) bool { return r < 'a' || r > 'z' }) {
			want[w]++
		}
	}
	return want
}

// runExample runs the pipeline, produces the lines, line i to partition
// i%3, and checks the counts: each word's records count 1, 2, ... its
// true count, once each.
func runExample(t *testing.T, cfg *host.Config, h *host.Host, produce func(...*kgo.Record), read func(string) []*kgo.Record) {
	in, out := cfg.Processors[0].Inputs[0], cfg.Processors[1].Outputs["counts"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var recs []*kgo.Record
	for i, l := range lines {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 3), Value: []byte(l)})
	}
	produce(recs...)
	want, total := trueCounts(), 0
	for _, n := range want {
		total += n
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string][]string{}
		n := 0
		for _, r := range read(out) {
			got[string(r.Key)] = append(got[string(r.Key)], string(r.Value))
			n++
		}
		if n >= total || time.Now().After(deadline) {
			for w, c := range want {
				var seq []string
				for i := 1; i <= c; i++ {
					seq = append(seq, strconv.Itoa(i))
				}
				if g, w2 := strings.Join(got[w], ","), strings.Join(seq, ","); g != w2 {
					t.Errorf("%s: counts %s, want %s", w, g, w2)
				}
			}
			if n != total {
				t.Errorf("%d count records for %d words", n, total)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := setup(t, nil)
	h, err := host.New(context.Background(), cfg, host.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Embedded() {
		t.Fatal("the example config should use the embedded broker")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.Brokers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(recs ...*kgo.Record) {
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	runExample(t, cfg, h, produce, func(topic string) []*kgo.Record { return readAll(t, h.Brokers(), topic) })
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := setup(t, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")})
	// A shared real broker keeps topics between runs: this run's app and
	// topics get unique names (the input with 3 partitions, as the
	// embedded broker makes it); everything else is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	in, out := b.Name(t, "lines"), b.Name(t, "word-counts")
	b.CreateTopic(t, in, 3, nil)
	b.CreateTopic(t, out, 3, nil)
	cfg.Processors[0].Inputs = []string{in}
	cfg.Processors[1].Outputs["counts"] = out
	h, err := host.New(context.Background(), cfg, host.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	produce := func(recs ...*kgo.Record) {
		for _, r := range recs {
			b.ProduceTo(t, r.Partition, r)
		}
	}
	runExample(t, cfg, h, produce, func(topic string) []*kgo.Record { return b.ReadCommitted(t, topic, 30*time.Second) })
}

// readAll reads a topic from the start to its current end.
func readAll(t *testing.T, brokers []string, topic string) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out []*kgo.Record
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
