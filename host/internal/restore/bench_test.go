package restore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// BenchmarkRestore measures restore (changelog -> Pebble on disk, default
// Config) against a raw franz-go consume of the same topic, in the same run:
// 200,000 records, 100-byte random values, 100,000 keys, written either in
// key order ("sequential") or scattered over the key space ("scattered").
// One op consumes the changelog once, then restores all of it into a fresh
// state database (a new machine) and closes that database. Metrics:
// raw-records/s, restore-records/s and their ratio restore/raw (the goal is
// >= 0.5), plus process CPU per record of each.
//
// Each op has a database of its own, closed before the next op: Close waits
// for the flushes and compactions running, so the raw consume never shares
// the two cores with Pebble's background work on the previous restore
// (with one database for every op it did, and the ratio moved with how much
// of its work a restore left behind). The restore's CPU includes that Close,
// so background work a restore leaves running is counted; its time does not.
func BenchmarkRestore(b *testing.B) {
	const n, nkeys = 200_000, 100_000
	br := testbroker.New(b)
	r := newRestorer(b, Config{Kafka: kclient.Config{Brokers: br.Addrs()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, c := range []struct {
		name string
		key  func(i int) int
	}{
		{"keys=sequential", func(i int) int { return i % nkeys }},
		{"keys=scattered", func(i int) int { return (i % nkeys) * 7919 % nkeys }}, // 7919 is prime: a permutation
	} {
		topic := br.Name(b, "bench")
		br.CreateTopic(b, topic, 1, nil)
		rng := rand.New(rand.NewPCG(1, 2))
		recs := make([]rec, n)
		for i := range recs {
			v := make([]byte, 100)
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			recs[i] = rec{key: fmt.Sprintf("key-%07d", c.key(i)), val: v}
		}
		produce(b, br, topic, recs)

		b.Run(c.name, func(b *testing.B) {
			var raw, restore, rawCPU, restoreCPU time.Duration
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				db, err := state.Open(dir, state.Options{})
				if err != nil {
					b.Fatal(err)
				}
				c0 := cpuTime()
				raw += rawConsume(b, br, topic, n, r.cfg)
				c1 := cpuTime()
				tk := db.Task("bench", 0, []string{"s"})
				start := time.Now()
				res, err := r.Restore(context.Background(), tk, 0, topic, 0)
				restore += time.Since(start)
				if err != nil || res.Restored != n {
					b.Fatalf("restore: %v, %+v", err, res)
				}
				tk.Close()
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				restoreCPU += cpuTime() - c1
				rawCPU += c1 - c0
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
			}
			total := float64(n * b.N)
			rawRate, restoreRate := total/raw.Seconds(), total/restore.Seconds()
			b.ReportMetric(rawRate, "raw-records/s")
			b.ReportMetric(restoreRate, "restore-records/s")
			b.ReportMetric(restoreRate/rawRate, "restore/raw")
			b.ReportMetric(float64(rawCPU.Nanoseconds())/total, "raw-cpu-ns/record")
			b.ReportMetric(float64(restoreCPU.Nanoseconds())/total, "restore-cpu-ns/record")
		})
	}
}

// cpuTime is the process's user+system CPU time (all threads: the
// in-process kfake broker and Pebble's background work count).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawConsume reads offsets [0, n) of partition 0 with a new client set up
// like the restore consumer, doing nothing with the records, and returns how
// long it took from creating the client.
func rawConsume(b *testing.B, br *testbroker.Broker, topic string, n int64, cfg Config) time.Duration {
	b.Helper()
	start := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(br.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes),
		kgo.FetchMaxBytes(2*cfg.FetchMaxPartitionBytes),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var seen, bytes int64
	for seen < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatalf("raw consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < n {
				seen++
				bytes += int64(len(r.Value))
			}
		})
	}
	return time.Since(start)
}
