// The payment-alerts example, run the way its README says: its own
// pipeline.yaml, its own processor built to Wasm.
package paymentalerts_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// setup puts the built processor next to a copy of pipeline.yaml, as the
// README's build command does, and loads the config with environ.
func setup(t *testing.T, environ []string) *host.Config {
	dir := t.TempDir()
	wasm, err := os.ReadFile(wasmbuild.Build(t, "./examples/payment-alerts/processor"))
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile("pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"processor.wasm": wasm, "pipeline.yaml": yaml} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := host.LoadConfig(filepath.Join(dir, "pipeline.yaml"), environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.CacheDir = "off"
	return cfg
}

var payments = map[string]string{
	"p1": "acct-1,1999",
	"p2": "acct-2,250000", // at the threshold: an alert
	"p3": "acct-3,not-a-number",
	"p4": "acct-4,9000000",
}

// runExample runs the pipeline, produces the sample payments and returns
// what reached each topic.
func runExample(t *testing.T, cfg *host.Config, read func(topic string) []*kgo.Record, produce func(...*kgo.Record), h *host.Host) map[string][]string {
	p := &cfg.Processors[0]
	in, audited, alerts, dlq := p.Inputs[0], p.Outputs["audited"], p.Outputs["alerts"], cfg.DeadLetterTopic(p)
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
	for k, v := range payments {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(v)})
	}
	produce(recs...)
	got := map[string][]string{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for name, topic := range map[string]string{"audited": audited, "alerts": alerts, "dlq": dlq} {
			got[name] = nil
			for _, r := range read(topic) {
				got[name] = append(got[name], string(r.Key))
			}
			sort.Strings(got[name])
		}
		if len(got["audited"]) == 3 && len(got["dlq"]) == 1 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("outputs so far: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func check(t *testing.T, got map[string][]string) {
	want := map[string]string{
		"audited": "p1,p2,p4",
		"alerts":  "acct-2,acct-4",
		"dlq":     "p3", // the malformed payment, dead-lettered
	}
	for topic, w := range want {
		if g := strings.Join(got[topic], ","); g != w {
			t.Errorf("%s: got %s, want %s", topic, g, w)
		}
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(recs ...*kgo.Record) {
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(topic string) []*kgo.Record { return readAll(t, h.Brokers(), topic) }
	check(t, runExample(t, cfg, read, produce, h))
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := setup(t, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ","), "WASMSTREAM_KAFKA__CREATE_TOPICS=true"})
	// A shared real broker keeps topics between runs: give this run's
	// app and topics unique names; everything else is as shipped.
	p := &cfg.Processors[0]
	cfg.AppID = b.Name(t, cfg.AppID)
	p.Inputs = []string{b.Name(t, p.Inputs[0])}
	for k, v := range p.Outputs {
		p.Outputs[k] = b.Name(t, v)
	}
	h, err := host.New(context.Background(), cfg, host.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	produce := func(recs ...*kgo.Record) { b.Produce(t, recs...) }
	read := func(topic string) []*kgo.Record { return b.ReadCommitted(t, topic, 30*time.Second) }
	check(t, runExample(t, cfg, read, produce, h))
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
