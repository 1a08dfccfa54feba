package restore

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// testLogger sends log lines to t.Log until the test ends.
func testLogger(t testing.TB) *slog.Logger { return testbroker.Logger(t, slog.LevelInfo) }

// testConfig is a restore configuration for tests: small fetches and
// batches so that restores take several batches, and bounded waits.
func testConfig(t testing.TB, b *testbroker.Broker) Config {
	return Config{
		Kafka:                  kclient.Config{Brokers: b.Addrs()},
		Logger:                 testLogger(t),
		BatchRecords:           1000,
		FetchMaxWait:           100 * time.Millisecond,
		FetchMaxPartitionBytes: 256 << 10,
		IdleProbe:              time.Second,
		StallTimeout:           30 * time.Second,
	}
}

func newRestorer(t testing.TB, cfg Config) *Restorer {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// memDB opens a state DB in memory; fs is returned for reopening. Every
// restored batch with data is ingested (state.Options.IngestRestoredBytes),
// the path of production-sized batches, although the tests' batches are
// small; memDBBatches keeps them in Pebble batches.
func memDB(t testing.TB) (*state.DB, vfs.FS) {
	t.Helper()
	return memDBWith(t, 1)
}

// memDBBatches is memDB with restored batches written as Pebble batches.
func memDBBatches(t testing.TB) (*state.DB, vfs.FS) {
	t.Helper()
	return memDBWith(t, -1)
}

func memDBWith(t testing.TB, ingestBytes int) (*state.DB, vfs.FS) {
	t.Helper()
	fs := vfs.NewMem()
	db, err := state.Open("state", state.Options{FS: fs, IngestRestoredBytes: ingestBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, fs
}

// rec is one changelog record as the tests produce it; a nil val is a
// tombstone.
type rec struct {
	key string
	val []byte
}

// produce writes recs to partition 0 of topic in order, in chunks.
func produce(t testing.TB, b *testbroker.Broker, topic string, recs []rec) {
	t.Helper()
	produceWith(t, func(krs []*kgo.Record) { b.ProduceTo(t, 0, krs...) }, topic, recs)
}

// produceFresh is produce with a new client (one that never saw an earlier
// topic of the same name).
func produceFresh(t testing.TB, b *testbroker.Broker, topic string, recs []rec) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceWith(t, func(krs []*kgo.Record) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}, topic, recs)
}

func produceWith(t testing.TB, send func([]*kgo.Record), topic string, recs []rec) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 5000)
		krs := make([]*kgo.Record, n)
		for i, r := range recs[:n] {
			krs[i] = &kgo.Record{Topic: topic, Partition: 0, Key: []byte(r.key), Value: r.val}
		}
		send(krs)
		recs = recs[n:]
	}
}

// genRecs makes n records: keys cycle over nkeys, every tombEvery-th record
// (if > 0) is a tombstone, values are valBytes long and name their index.
func genRecs(from, n, nkeys, tombEvery, valBytes int) []rec {
	out := make([]rec, n)
	for i := range out {
		idx := from + i
		k := fmt.Sprintf("k%06d", idx%nkeys)
		if tombEvery > 0 && idx%tombEvery == tombEvery-1 {
			out[i] = rec{key: k}
			continue
		}
		v := []byte(fmt.Sprintf("v%d|", idx))
		for len(v) < valBytes {
			v = append(v, byte('a'+idx%26))
		}
		out[i] = rec{key: k, val: v}
	}
	return out
}

// reference replays recs (a changelog in offset order) into a map.
func reference(recs []rec) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if r.val == nil {
			delete(m, r.key)
		} else {
			m[r.key] = string(r.val)
		}
	}
	return m
}

// referenceFromBroker replays what a read_committed reader sees in the
// topic now (from its log start), the ground truth for compacted or
// transactional changelogs.
func referenceFromBroker(t testing.TB, b *testbroker.Broker, topic string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range b.ReadCommitted(t, topic, 60*time.Second) {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
	return m
}

// contents reads a whole store.
func contents(t testing.TB, tk *state.Task, store int) map[string]string {
	t.Helper()
	it, err := tk.Scan(store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	m := map[string]string{}
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return m
		}
		m[string(k)] = string(v)
	}
}

func checkStore(t testing.TB, what string, tk *state.Task, store int, want map[string]string) {
	t.Helper()
	got := contents(t, tk, store)
	if maps.Equal(got, want) {
		return
	}
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diffs = append(diffs, fmt.Sprintf("%s: got %.20q (present %v), want %.20q", k, g, ok, v))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %.20q, want absent", k, g))
		}
	}
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("... %d differences in all", len(diffs)))
	}
	t.Fatalf("%s: store has %d keys, want %d:\n%s", what, len(got), len(want), strings.Join(diffs, "\n"))
}

func checkpoint(t testing.TB, tk *state.Task, store int) (int64, bool) {
	t.Helper()
	cp, ok, err := tk.Checkpoint(store)
	if err != nil {
		t.Fatal(err)
	}
	return cp, ok
}

// listOffsets returns the log start, last stable offset and high watermark
// of partition 0.
func listOffsets(t testing.TB, b *testbroker.Broker, topic string) (start, lso, hwm int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := b.Admin(t)
	get := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) int64 {
		lo, err := f(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			t.Fatalf("list offsets %s: %v", topic, err)
		}
		l, _ := lo.Lookup(topic, 0)
		return l.Offset
	}
	return get(adm.ListStartOffsets), get(adm.ListCommittedOffsets), get(adm.ListEndOffsets)
}

// recreateTopic deletes topic and creates it again (one partition), waiting
// out the real broker's asynchronous deletion.
func recreateTopic(t testing.TB, b *testbroker.Broker, topic string) {
	t.Helper()
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	// The real broker deletes asynchronously: creating fails, retriably,
	// until it is done.
	testutil.Eventually(t, 60*time.Second, func() error {
		r, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil && !kerr.IsRetriable(err) && err != kerr.TopicAlreadyExists {
			t.Fatalf("recreate topic %s: %v", topic, err)
		}
		return err
	})
	testutil.Eventually(t, 60*time.Second, func() error { // until the new partition answers ListOffsets with a leader
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return fmt.Errorf("recreated topic %s not ready: %w", topic, err)
		}
		if l, ok := lo.Lookup(topic, 0); !ok || l.Offset != 0 {
			return fmt.Errorf("recreated topic %s: end offset %+v, want 0", topic, l)
		}
		return nil
	})
}

// txnProducer returns a transactional producer for topic, closed when t
// ends.
func txnProducer(t testing.TB, b *testbroker.Broker, topic string) *kgo.Client {
	t.Helper()
	return b.Client(t,
		kgo.TransactionalID(b.Name(t, "txn")),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(60*time.Second),
	)
}

// inTxn produces recs to partition 0 in one transaction and commits or
// aborts it.
func inTxn(t testing.TB, cl *kgo.Client, recs []rec, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Key: []byte(r.key), Value: r.val, Partition: 0}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatal(err)
	}
}

func newRec(k, v string) *kgo.Record {
	return &kgo.Record{Key: []byte(k), Value: []byte(v), Partition: 0}
}
