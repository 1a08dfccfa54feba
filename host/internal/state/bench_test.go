package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkCounter is the DESIGN's native floor of a stateful record: read a
// counter, write it back incremented; 10,000 keys cycled; a commit point
// every 1,000 records. One op is one record.
//
//   - task: this package (record overlay, pending set, committed-value
//     cache; Dirty + Apply at each commit point, which writes only the dirty
//     keys and the checkpoint).
//   - pebble-indexed-batch: the baseline, a Pebble indexed batch per commit
//     window (Get reads the batch then the DB, Set writes every put).
//
// Both run on the same on-disk Pebble database in the same process, without
// fsync.
func BenchmarkCounter(b *testing.B) {
	const nkeys, window = 10_000, 1_000
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "counter-%05d", i)
	}
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()

	runs := int32(0)
	// task: every key of a window is new to it; task-hot: 100 keys, each
	// written ten times a window, as a counter's hot keys are (the word
	// count's Zipf words).
	for _, c := range []struct {
		name string
		keys int
	}{{"task", nkeys}, {"task-hot", 100}} {
		b.Run(c.name, func(b *testing.B) {
			runs++ // each run (the framework may run this function several times) has its own task
			tk := restored(b, db, "bench", runs, "counts")
			defer tk.Close()
			var cp int64
			val := make([]byte, 8)
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := keys[i%c.keys]
				v, found, err := tk.Get(0, k)
				if err != nil {
					b.Fatal(err)
				}
				var n uint64
				if found {
					n = binary.BigEndian.Uint64(v)
				}
				binary.BigEndian.PutUint64(val, n+1)
				if err := tk.Put(0, k, val); err != nil {
					b.Fatal(err)
				}
				tk.CommitRecord()
				if (i+1)%window == 0 {
					d := tk.Dirty() // what the runner turns into changelog records
					cp += int64(len(d))
					if err := tk.Apply(map[int]int64{0: cp}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportPerRecord(b, cpu)
		})
	}

	b.Run("pebble-indexed-batch", func(b *testing.B) {
		runs++
		prefix := storePrefix(taskPrefix("baseline", runs), kindData, "counts")
		full := make([][]byte, nkeys)
		for i, k := range keys {
			full[i] = append(append([]byte(nil), prefix...), k...)
		}
		batch := db.pdb.NewIndexedBatch()
		val := make([]byte, 8)
		b.ReportAllocs()
		cpu := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := full[i%nkeys]
			var n uint64
			v, closer, err := batch.Get(k)
			switch {
			case err == nil:
				n = binary.BigEndian.Uint64(v)
				closer.Close()
			case !errors.Is(err, pebble.ErrNotFound):
				b.Fatal(err)
			}
			binary.BigEndian.PutUint64(val, n+1)
			if err := batch.Set(k, val, nil); err != nil {
				b.Fatal(err)
			}
			if (i+1)%window == 0 {
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				batch.Close()
				batch = db.pdb.NewIndexedBatch()
			}
		}
		b.StopTimer()
		batch.Close()
		reportPerRecord(b, cpu)
	})
}

// reportPerRecord reports wall and process CPU nanoseconds per record. The
// CPU figure (all threads, so Pebble's background work counts) is steadier
// than wall time on a machine shared with other work.
func reportPerRecord(b *testing.B, cpuStart int64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	b.ReportMetric(float64(cpuTime()-cpuStart)/float64(b.N), "cpu-ns/record")
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkApplyRestored is the state side of BenchmarkRestore in package
// restore, without Kafka: 200,000 records with 100-byte random values over
// 100,000 keys, applied with ApplyRestored in batches (50,000 records: the
// restore's default), each batch sorted by key with one record per key as
// the restore's sorter hands it over, into a fresh on-disk database per op.
// Keys are written in key order ("sequential") or scattered over the key
// space. path=batch forces Pebble batches, path=ingest sstable ingestion
// (Options.IngestRestoredBytes). Wall time excludes the Close that waits for
// background flushes and compactions; cpu-ns/record includes it.
func BenchmarkApplyRestored(b *testing.B) {
	const n, nkeys = 200_000, 100_000
	for _, keys := range []struct {
		name string
		key  func(i int) int
	}{
		{"sequential", func(i int) int { return i % nkeys }},
		{"scattered", func(i int) int { return (i % nkeys) * 7919 % nkeys }},
	} {
		for _, batch := range []int{50_000, 10_000, 2_000} {
			batches := restoreBatches(n, batch, keys.key)
			for _, path := range []struct {
				name  string
				bytes int
			}{{"batch", -1}, {"ingest", 1}} {
				b.Run(fmt.Sprintf("keys=%s/batch=%d/path=%s", keys.name, batch, path.name), func(b *testing.B) {
					var wall time.Duration
					cpu := cpuTime()
					for i := 0; i < b.N; i++ {
						dir := b.TempDir()
						db, err := Open(dir, Options{IngestRestoredBytes: path.bytes})
						if err != nil {
							b.Fatal(err)
						}
						tk := db.Task("bench", 0, []string{"s"})
						start := time.Now()
						for j, recs := range batches {
							if err := tk.ApplyRestored(0, recs, int64((j+1)*batch)); err != nil {
								b.Fatal(err)
							}
						}
						wall += time.Since(start)
						if err := db.Close(); err != nil {
							b.Fatal(err)
						}
						if err := os.RemoveAll(dir); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(wall.Nanoseconds())/float64(n*b.N), "ns/record")
					b.ReportMetric(float64(cpuTime()-cpu)/float64(n*b.N), "cpu-ns/record")
				})
			}
		}
	}
}

// restoreBatches cuts records 0..n-1 (record i sets key(i) to 100 random
// bytes) into batches of batch records, each sorted by key with the last
// record of each key, as the restore's sorter makes them.
func restoreBatches(n, batch int, key func(int) int) [][]Change {
	rng := rand.New(rand.NewPCG(1, 2))
	var batches [][]Change
	for lo := 0; lo < n; lo += batch {
		recs := make([]Change, 0, batch)
		seen := map[int]int{}
		for i := lo; i < lo+batch; i++ {
			v := make([]byte, 100)
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			k := key(i)
			if at, ok := seen[k]; ok {
				recs[at].Value = v
				continue
			}
			seen[k] = len(recs)
			recs = append(recs, Change{Key: fmt.Appendf(nil, "key-%07d", k), Value: v})
		}
		slices.SortFunc(recs, compareChangeKeys)
		batches = append(batches, recs)
	}
	return batches
}
