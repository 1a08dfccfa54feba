package globaltable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

func rec(topic, k, v string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(k), Timestamp: time.Now()}
	if v != "" {
		r.Value = []byte(v)
	}
	return r
}

func open(t *testing.T, dir string) *state.DB {
	t.Helper()
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newTable(t *testing.T, b *testbroker.Broker, db *state.DB, topic string) *Table {
	return New(Config{
		Kafka:        kclient.Config{Brokers: b.Addrs()},
		Topic:        topic,
		Store:        db.Table(topic),
		Logger:       testbroker.Logger(t, slog.LevelInfo),
		FetchMaxWait: 100 * time.Millisecond,
		IdleDone:     time.Second,
	})
}

func get(t *testing.T, tb *Table, k string) (string, bool) {
	t.Helper()
	v, ok, err := tb.Get([]byte(k))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// eventually waits until key k has value want ("" = absent).
func eventually(t *testing.T, tb *Table, k, want string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		if v, ok := get(t, tb, k); !((want == "" && !ok) || (ok && v == want)) {
			return fmt.Errorf("key %s: got %q (found %v), want %q", k, v, ok, want)
		}
		return nil
	})
}

// TestBootstrapFollowReopen: bootstrap loads every partition; updates and
// tombstones arrive through Follow; a restart on the same state applies only
// the tail; an empty state rebuilds the whole table.
func TestBootstrapFollowReopen(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "customers")
	b.CreateTopic(t, topic, 3, map[string]string{"cleanup.policy": "compact"})
	for i := 0; i < 30; i++ {
		b.Produce(t, rec(topic, "c"+string(rune('a'+i%26))+string(rune('0'+i/26)), "v1"))
	}
	b.Produce(t, rec(topic, "ca0", "v2"))

	dir := filepath.Join(t.TempDir(), "state")
	db := open(t, dir)
	tb := newTable(t, b, db, topic)
	ctx, cancel := context.WithCancel(context.Background())
	if err := tb.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if !tb.Ready() || tb.Applied() != 31 {
		t.Fatalf("after bootstrap: ready %v, applied %d, want 31", tb.Ready(), tb.Applied())
	}
	if v, _ := get(t, tb, "ca0"); v != "v2" {
		t.Fatalf("ca0 = %q, want v2 (latest value)", v)
	}
	followed := make(chan error, 1)
	go func() { followed <- tb.Follow(ctx) }()
	b.Produce(t, rec(topic, "cb0", "v3"), rec(topic, "cc0", ""))
	eventually(t, tb, "cb0", "v3")
	eventually(t, tb, "cc0", "")

	// A scan sees the whole table in key order.
	it, err := tb.Scan([]byte("ca"), []byte("cc"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for {
		k, _, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		keys = append(keys, string(k))
	}
	_ = it.Close()
	if fmt.Sprint(keys) != "[ca0 ca1 cb0 cb1]" {
		t.Fatalf("scan [ca, cc) = %q, want [ca0 ca1 cb0 cb1]", keys)
	}
	cancel()
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart on the same state: only the two records produced after the
	// checkpoint are read.
	b.Produce(t, rec(topic, "cd0", "v4"), rec(topic, "ca0", ""))
	db = open(t, dir)
	tb = newTable(t, b, db, topic)
	if err := tb.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	if tb.Applied() != 2 {
		t.Fatalf("restart applied %d records, want the 2 of the tail", tb.Applied())
	}
	if v, _ := get(t, tb, "cd0"); v != "v4" {
		t.Fatalf("cd0 = %q, want v4", v)
	}
	if _, ok := get(t, tb, "ca0"); ok {
		t.Fatal("ca0 still there after its tombstone")
	}
	if v, _ := get(t, tb, "cb0"); v != "v3" {
		t.Fatalf("cb0 = %q, want v3 (kept across the restart)", v)
	}
	cps, err := db.Table(topic).Checkpoints()
	if err != nil || len(cps) != 3 {
		t.Fatalf("checkpoints %v, %v: want one per partition", cps, err)
	}
	var sum int64
	for _, o := range cps {
		sum += o
	}
	if sum != 35 {
		t.Fatalf("checkpoints %v add up to %d, want the 35 records produced", cps, sum)
	}
	_ = db.Close()

	// An empty state directory rebuilds the whole table.
	db = open(t, filepath.Join(t.TempDir(), "fresh"))
	defer db.Close()
	tb = newTable(t, b, db, topic)
	if err := tb.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	if tb.Applied() != 35 {
		t.Fatalf("rebuild applied %d, want all 35 records", tb.Applied())
	}
	if v, _ := get(t, tb, "cd0"); v != "v4" {
		t.Fatalf("rebuilt cd0 = %q, want v4", v)
	}
}

// TestBootstrapEmptyTopic: an empty topic is loaded at once.
func TestBootstrapEmptyTopic(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "empty")
	b.CreateTopic(t, topic, 2, nil)
	db := open(t, filepath.Join(t.TempDir(), "s"))
	defer db.Close()
	tb := newTable(t, b, db, topic)
	start := time.Now()
	if err := tb.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("bootstrap of an empty topic took %s", d)
	}
}

// TestMissingTopic: a table whose topic is missing fails to bootstrap
// with the topic named.
func TestMissingTopic(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "missing")
	db := open(t, filepath.Join(t.TempDir(), "s"))
	defer db.Close()
	tb := newTable(t, b, db, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := tb.Bootstrap(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bootstrap of a missing topic: %v", err)
	}
	t.Log(err)
}

// A checkpoint below the log start (DeleteRecords removed records the
// table never read, which may have deleted keys it holds) wipes the table,
// which is read again from the new log start.
func TestCheckpointBelowLogStartRebuilds(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "trimmed")
	b.CreateTopic(t, topic, 1, nil) // DeleteRecords needs delete retention
	for _, k := range []string{"a", "b", "c"} {
		b.ProduceTo(t, 0, rec(topic, k, "v1"))
	}
	dir := filepath.Join(t.TempDir(), "state")
	db := open(t, dir)
	tb := newTable(t, b, db, topic)
	if err := tb.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	_ = db.Close()

	b.ProduceTo(t, 0, rec(topic, "a", ""), rec(topic, "d", "v1")) // offsets 3, 4
	b.DeleteRecords(t, topic, 0, 4)                               // the tombstone of a is gone unread
	db = open(t, dir)
	defer db.Close()
	tb = newTable(t, b, db, topic)
	if err := tb.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	if tb.Applied() != 1 {
		t.Fatalf("applied %d, want 1 (only d, from the new log start)", tb.Applied())
	}
	for k, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true} {
		if _, ok := get(t, tb, k); ok != want {
			t.Errorf("key %s found %v, want %v", k, ok, want)
		}
	}
	cps, err := db.Table(topic).Checkpoints()
	if err != nil || cps[0] != 5 {
		t.Fatalf("checkpoints %v, %v: want partition 0 at 5", cps, err)
	}
}
