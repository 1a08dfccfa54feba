// Package exampletest runs an example of examples/ the way its README says:
// its own pipeline.yaml, with the bundled plugins where it names them, on
// the host's embedded broker as shipped or on the test broker (real Kafka
// under make test).
package exampletest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/configload"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// Setup lays out examples/<name>/pipeline.yaml and each plugin (path of
// its .wasm under the repository root, where the config names it, such as
// bin/plugins/enrich.wasm or examples/<name>/processor.wasm -> Go package
// of the plugin, built for Wasm by wasmbuild) in a temporary tree shaped
// like the repository, and loads the config with environ. The plugin cache
// is off and the state directory is the test's own.
func Setup(t *testing.T, name string, plugins map[string]string, environ []string) *host.Config {
	t.Helper()
	return SetupFile(t, name, "pipeline.yaml", plugins, environ)
}

// SetupFile is Setup for another config file of the example.
func SetupFile(t *testing.T, name, file string, plugins map[string]string, environ []string) *host.Config {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{filepath.Join("examples", name, file): file}
	for bin, pkg := range plugins {
		files[bin] = wasmbuild.Build(t, pkg)
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
	cfg, err := configload.Load(filepath.Join(root, "examples", name, file), environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.CacheDir = "off"
	cfg.State.Dir = t.TempDir()
	return cfg
}

// Quiet is a logger that drops everything: an example's logs are its
// user's, not the test's.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Embedded makes a host of cfg, which must use the embedded broker (as
// shipped), and returns it with a producer and a reader on that broker.
// opts are added to the producer's client options (such as
// kgo.RecordPartitioner(kgo.ManualPartitioner()) to write each record to
// its Partition).
func Embedded(t *testing.T, cfg *host.Config, opts ...kgo.Opt) (h *host.Host, produce func(...*kgo.Record), read func(topic string) []*kgo.Record) {
	t.Helper()
	h = newHost(t, cfg)
	if !h.Embedded() {
		t.Fatal("the example config should use the embedded broker")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.Brokers()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	produce = func(recs ...*kgo.Record) {
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return h, produce, func(topic string) []*kgo.Record { return ReadAll(t, h.Brokers(), topic) }
}

// Topics opens the topic tool as the README's "wasmstream topic ... -c
// pipeline.yaml" does while h runs cfg: on the embedded broker, which it
// finds through the address file h writes.
func Topics(t *testing.T, cfg *host.Config) *host.TopicTool {
	t.Helper()
	tool, err := host.OpenTopicTool(context.Background(), cfg, Quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	return tool
}

// OnTestBroker makes a host of cfg, which must point at b, and returns it
// with b's producer and a reader of b's committed records.
func OnTestBroker(t *testing.T, b *testbroker.Broker, cfg *host.Config) (h *host.Host, produce func(...*kgo.Record), read func(topic string) []*kgo.Record) {
	t.Helper()
	return newHost(t, cfg), func(recs ...*kgo.Record) { b.Produce(t, recs...) },
		func(topic string) []*kgo.Record { return b.ReadCommitted(t, topic, 30*time.Second) }
}

// newHost makes a quiet host of cfg, closed when the test ends.
func newHost(t *testing.T, cfg *host.Config) *host.Host {
	t.Helper()
	h, err := host.New(context.Background(), cfg, host.WithLogger(Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// Run runs h until the returned stop is called; stop fails the test if Run
// returned an error.
func Run(t *testing.T, h *host.Host) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// ReadAll reads a topic's committed records from the start to its current
// end.
func ReadAll(t *testing.T, brokers []string, topic string) []*kgo.Record {
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
