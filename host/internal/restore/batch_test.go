package restore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/state"
)

// The sorter's result is what ApplyRestored makes of the unsorted batch:
// key order, the last record of each key. Keys are chosen to hit the
// integer prefix's edge cases: a shared prefix longer and shorter than 8
// bytes, keys that are prefixes of others, zero bytes (which the padding of
// short keys also produces), empty keys, and repeats.
func TestSorterMatchesLastWins(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func() []byte{
		"short-random": func() []byte { return []byte(fmt.Sprint(rng.IntN(50))) },
		"long-prefix":  func() []byte { return fmt.Appendf(nil, "processor-store-key-%04d", rng.IntN(300)) },
		"zeros": func() []byte {
			b := make([]byte, rng.IntN(12))
			for i := range b {
				if rng.IntN(3) == 0 {
					b[i] = byte(rng.IntN(3))
				}
			}
			return b
		},
		"nested-prefixes": func() []byte { return bytes.Repeat([]byte{'a'}, rng.IntN(20)) },
		"one-key":         func() []byte { return []byte("same") },
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			var s sorter
			var dst []state.Change
			for round := 0; round < 50; round++ {
				recs := make([]state.Change, rng.IntN(500))
				for i := range recs {
					recs[i] = state.Change{Key: gen(), Value: fmt.Appendf(nil, "v%d", i)}
					if rng.IntN(5) == 0 {
						recs[i].Value, recs[i].Delete = nil, true
					}
				}
				orig := slices.Clone(recs)
				dst = s.sort(dst, recs)
				if !slices.EqualFunc(orig, recs, func(a, b state.Change) bool {
					return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
				}) {
					t.Fatal("sort modified its input")
				}
				want := lastWins(recs)
				if len(dst) != len(want) {
					t.Fatalf("round %d: %d records, want %d", round, len(dst), len(want))
				}
				for i := range want {
					if !bytes.Equal(dst[i].Key, want[i].Key) || !bytes.Equal(dst[i].Value, want[i].Value) || dst[i].Delete != want[i].Delete {
						t.Fatalf("round %d, record %d: %q=%q (delete %v), want %q=%q (delete %v)", round, i,
							dst[i].Key, dst[i].Value, dst[i].Delete, want[i].Key, want[i].Value, want[i].Delete)
					}
				}
			}
		})
	}
}

// lastWins is the reference: a stable sort by key, then the last of each key.
func lastWins(recs []state.Change) []state.Change {
	s := slices.Clone(recs)
	slices.SortStableFunc(s, func(a, b state.Change) int { return bytes.Compare(a.Key, b.Key) })
	var out []state.Change
	for i := range s {
		if i+1 < len(s) && bytes.Equal(s[i].Key, s[i+1].Key) {
			continue
		}
		out = append(out, s[i])
	}
	return out
}

// BenchmarkSortBatch compares the sorter with the index sort ApplyRestored
// does on a batch that is not sorted (bytes.Compare through an index), for a
// default-sized batch of scattered keys like BenchmarkRestore's.
func BenchmarkSortBatch(b *testing.B) {
	const n = 20_000
	recs := make([]state.Change, n)
	for i := range recs {
		recs[i] = state.Change{Key: fmt.Appendf(nil, "key-%07d", i*7919%100_000), Value: []byte("v")}
	}
	b.Run("sorter", func(b *testing.B) {
		var s sorter
		var dst []state.Change
		for b.Loop() {
			dst = s.sort(dst, recs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	})
	b.Run("index-bytes.Compare", func(b *testing.B) {
		order := make([]int32, n)
		for b.Loop() {
			for i := range order {
				order[i] = int32(i)
			}
			slices.SortFunc(order, func(x, y int32) int {
				if c := bytes.Compare(recs[x].Key, recs[y].Key); c != 0 {
					return c
				}
				return int(x - y)
			})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	})
}
