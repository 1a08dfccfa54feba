// The word-count example, run the way its README says: its own
// pipeline.yaml, with the bundled plugins where it names them.
package wordcount_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// plugins are the bundled plugins, in bin/plugins where the pipeline
// names them (make plugins).
var plugins = map[string]string{
	"bin/plugins/split.wasm":     "./plugins/split",
	"bin/plugins/wordcount.wasm": "./plugins/wordcount",
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
	in, out := cfg.Processors[0].Inputs[0], cfg.Processors[1].Outputs["counts"].Topic
	defer exampletest.Run(t, h)()
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

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.Setup(t, "word-count", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	runExample(t, cfg, h, produce, read)
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.Setup(t, "word-count", plugins, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")})
	// A shared real broker keeps topics between runs: this run's app and
	// topics get unique names (the input with 3 partitions, as the
	// embedded broker makes it); everything else is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	in, out := b.Name(t, "lines"), b.Name(t, "word-counts")
	b.CreateTopic(t, in, 3, nil)
	b.CreateTopic(t, out, 3, nil)
	cfg.Processors[0].Inputs = []string{in}
	cfg.Processors[1].Outputs["counts"] = host.OutputConfig{Topic: out}
	h, _, read := exampletest.OnTestBroker(t, b, cfg)
	// Each line to the partition runExample gives it.
	produce := func(recs ...*kgo.Record) {
		for _, r := range recs {
			b.ProduceTo(t, r.Partition, r)
		}
	}
	runExample(t, cfg, h, produce, read)
}
