package control

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newTopic makes a control topic with EnsureTopic and returns the Config
// to reach it. On the real broker the topic is deleted when a passing test
// ends.
func newTopic(t testing.TB, b *testbroker.Broker) Config {
	t.Helper()
	topic := b.Name(t, "plugins")
	adm := kadm.NewClient(b.Client(t))
	if err := EnsureTopic(testCtx(t, 30*time.Second), kclient.Config{Brokers: b.Addrs()}, topic); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, b, adm, topic)
	return Config{Kafka: kclient.Config{Brokers: b.Addrs()}, Topic: topic}
}

// deleteAtEnd deletes topic when a passing test ends on the real broker, so
// runs do not pile up topics. It runs before adm's client is closed (t's
// cleanups run last-registered first).
func deleteAtEnd(t testing.TB, b *testbroker.Broker, adm *kadm.Client, topic string) {
	if !b.Real() {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping topic %s of a failed test", topic)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if resp, err := adm.DeleteTopics(ctx, topic); err != nil || resp.Error() != nil {
			t.Logf("deleting topic %s: %v %v", topic, err, resp.Error())
		}
	})
}

func openPublisher(t testing.TB, cfg Config) *Publisher {
	t.Helper()
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func openReader(t testing.TB, cfg Config) *Reader {
	t.Helper()
	r, err := NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// load reads the topic with a new Reader.
func load(t testing.TB, cfg Config) *State {
	t.Helper()
	st, err := openReader(t, cfg).Load(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fakeModule returns size deterministic pseudo-random bytes (incompressible,
// so chunking is tested at full size).
func fakeModule(seed uint64, size int) []byte {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	b := make([]byte, size)
	rand.NewChaCha8(s).Read(b)
	return b
}

// endOffset lists the end offset of partition 0 of cfg.Topic.
func endOffset(t testing.TB, b *testbroker.Broker, cfg Config) int64 {
	t.Helper()
	ends, err := kadm.NewClient(b.Client(t)).ListEndOffsets(testCtx(t, 10*time.Second), cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(cfg.Topic, 0)
	return o.Offset
}

// keysWithPrefix returns the keys of the records in cfg.Topic that begin
// with prefix, in topic order.
func keysWithPrefix(t testing.TB, b *testbroker.Broker, cfg Config, prefix string) []string {
	t.Helper()
	var keys []string
	for _, r := range b.ReadCommitted(t, cfg.Topic, 30*time.Second) {
		if k := string(r.Key); len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			keys = append(keys, k)
		}
	}
	return keys
}

// event is one Follow callback.
type event struct {
	m      Manifest
	module []byte
	err    error
}

// follow runs r.Follow until the test ends and returns its callbacks.
func follow(t testing.TB, r *Reader) <-chan event {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan event, 100)
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(ctx, func(m Manifest, load Load, err error) {
			var module []byte
			if err == nil {
				module, err = load(ctx)
			}
			ch <- event{m, module, err}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	return ch
}

// next returns the next Follow callback, failing t after 20 s.
func next(t testing.TB, ch <-chan event) event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no Follow callback within 20 s")
		return event{}
	}
}

// raw returns a record for cfg.Topic partition 0 (value nil is a
// tombstone).
func raw(cfg Config, key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: cfg.Topic, Key: []byte(key), Value: value}
}
