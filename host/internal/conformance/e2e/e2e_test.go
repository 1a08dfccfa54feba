package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// TestWordcountSameBytesOnBroker is the conformance of the four SDKs
// through a broker (kfake, or real Kafka with WASMSTREAM_TEST_BROKERS): the
// Go, Rust, C and TypeScript word counts each run as an application of
// their own over the same input, exactly-once, and what each committed to
// its output topic (partition by partition, in order: key, value,
// timestamp and headers) is the same bytes as the Go one's. The header
// wasmstream-version names each application's plugin version, so it is
// left out. The conformance package compares the plugins' bytes in the
// engine; this checks that the host, its partitioning and Kafka keep them.
func TestWordcountSameBytesOnBroker(t *testing.T) {
	// One input partition: one task, so each output partition gets its
	// records in one order (two tasks would interleave theirs by timing).
	const lines, partitions = 300, 1
	br := testbroker.New(t)
	in := br.Name(t, "wcb-in")
	br.CreateTopic(t, in, partitions, nil)
	words := wordLines()
	// Recent timestamps: a real broker's retention would delete records
	// of long ago.
	base := time.Now().Add(-time.Minute).UnixMilli()
	recs := make([]*kgo.Record, lines)
	for i := range recs {
		w := words[i%len(words)]
		recs[i] = &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "line-%d", i%7), Value: w.Value, Timestamp: time.UnixMilli(base + int64(i))}
	}
	br.Produce(t, recs...)
	var want []string
	for _, lang := range langs {
		out := br.Name(t, "wcb-out-"+lang)
		runToEnd(t, br, polybuild.Plugin(t, lang, "wordcount"), in, out)
		got := committedRecords(t, br, out)
		if len(got) == 0 {
			t.Fatalf("%s: the word count committed nothing to %s", lang, out)
		}
		if lang == langs[0] {
			t.Logf("%s: %d records committed to %s", lang, len(got), out)
			want = got
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s committed %d records, %s %d", lang, len(got), langs[0], len(want))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: record %d is\n  %s\nwant (%s)\n  %s", lang, i, got[i], langs[0], want[i])
				break
			}
		}
	}
}

// committedRecords reads topic's committed records as text, partition by
// partition in offset order, without the wasmstream-version header.
func committedRecords(t *testing.T, br *testbroker.Broker, topic string) []string {
	t.Helper()
	// The group's offsets can be visible before the transaction's markers
	// reach every output partition, and ReadCommitted reads to the last
	// stable offset: wait until no transaction is open on the topic (its
	// last stable offsets are its ends).
	br.WaitNoOpenTransaction(t, topic, time.Minute)
	byPart := map[int32][]string{}
	var maxPart int32
	for _, r := range br.ReadCommitted(t, topic, time.Minute) {
		var h []string
		for _, hd := range r.Headers {
			if hd.Key != "wasmstream-version" {
				h = append(h, fmt.Sprintf("%q=%q", hd.Key, hd.Value))
			}
		}
		byPart[r.Partition] = append(byPart[r.Partition], fmt.Sprintf("p%d key=%q value=%q ts=%d headers=[%s]",
			r.Partition, r.Key, r.Value, r.Timestamp.UnixMilli(), strings.Join(h, " ")))
		maxPart = max(maxPart, r.Partition)
	}
	var all []string
	for p := int32(0); p <= maxPart; p++ {
		all = append(all, byPart[p]...)
	}
	return all
}

// runToEnd runs plugin as a new exactly-once application over the whole
// of in, writing its counts to out, until its group has committed in's
// end.
func runToEnd(t *testing.T, br *testbroker.Broker, plugin, in, out string) {
	t.Helper()
	cfg := &host.Config{
		AppID:     br.Name(t, "wcb"),
		Guarantee: host.ExactlyOnce,
		Kafka:     host.KafkaConfig{Brokers: br.Addrs(), CreateTopics: true},
		State:     host.StateConfig{Dir: t.TempDir()},
		Processors: []host.ProcessorConfig{{
			Name: "wordcount", Plugin: plugin, Inputs: []string{in},
			Outputs: map[string]host.OutputConfig{"counts": {Topic: out}}, Stores: []string{"counts"},
		}},
		Runtime: host.RuntimeConfig{CacheDir: "off"},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), cfg, host.WithLogger(testbroker.Logger(t, slog.LevelWarn)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer h.Close()
	adm := br.Admin(t)
	ends, err := adm.ListEndOffsets(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	testutil.Eventually(t, 3*time.Minute, func() error {
		select {
		case err := <-done:
			t.Fatalf("Run ended early: %v", err)
		default:
		}
		if !testbroker.AllCommitted(t, adm, cfg.AppID, ends) {
			return fmt.Errorf("%s: the group %s has not committed the end of %s", plugin, cfg.AppID, in)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}
