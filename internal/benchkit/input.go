package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// Layout is how the words of the input are spread over its partitions.
type Layout string

const (
	// LayoutKeyed: every word lives in one partition (wordPartition), and
	// each line holds words of its own partition only. A word count that
	// counts where records arrive, as wasmstream's plugins/wordcount does
	// (one task per input partition, no repartitioning), is correct on it.
	LayoutKeyed Layout = "keyed"
	// LayoutAny: any word on any partition. A correct word count must bring
	// each word's occurrences to one place first: Kafka Streams' groupBy
	// does it through a repartition topic, wasmstream-general through the
	// repartition output of plugins/split.
	LayoutAny Layout = "any"
)

// ParseLayout parses a layout name.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case LayoutKeyed, LayoutAny:
		return l, nil
	}
	return "", fmt.Errorf("unknown layout %q (want %q or %q)", s, LayoutKeyed, LayoutAny)
}

// InputSpec is everything that decides the generated input: the same spec
// gives the same lines on the same partitions, byte for byte.
type InputSpec struct {
	Lines      int     // number of lines (records)
	Words      int     // words per line
	Partitions int     // partitions of the input topic
	Vocab      int     // distinct words in the vocabulary
	ZipfS      float64 // exponent s: the word of rank k (0-based) has weight 1/(k+1)^s
	Seed       uint64  // seeds the vocabulary and the draws
	Layout     Layout
}

// Validate reports the first unusable field.
func (s InputSpec) Validate() error {
	switch {
	case s.Lines < 1:
		return fmt.Errorf("lines: %d, want at least 1", s.Lines)
	case s.Words < 1:
		return fmt.Errorf("words per line: %d, want at least 1", s.Words)
	case s.Partitions < 1:
		return fmt.Errorf("partitions: %d, want at least 1", s.Partitions)
	case s.Vocab < s.Partitions:
		// LayoutKeyed needs at least one word per partition; wordPartition
		// is checked for that when the vocabulary is built.
		return fmt.Errorf("vocabulary: %d words, want at least one per partition (%d)", s.Vocab, s.Partitions)
	case !(s.ZipfS > 0) || math.IsInf(s.ZipfS, 0):
		return fmt.Errorf("zipf exponent: %v, want a positive number", s.ZipfS)
	}
	_, err := ParseLayout(string(s.Layout))
	return err
}

// Line is one generated input record: its value and the partition it is
// written to.
type Line struct {
	Partition int32
	Text      string
}

// Generator draws the input of a spec. Lines go to partitions round robin
// (line i to partition i mod P), so every partition gets the same number of
// lines whatever the layout; the layout decides which words a line may hold.
type Generator struct {
	spec  InputSpec
	rng   *rand.Rand
	vocab []string // by rank: vocab[0] is the most frequent word
	// all samples a rank from the whole vocabulary; byPart[p] a rank from
	// the words of partition p only (LayoutKeyed), with the same relative
	// weights.
	all    sampler
	byPart []sampler
	counts []uint64 // occurrences drawn so far, by rank
	next   int      // index of the next line
	buf    strings.Builder
}

// NewGenerator builds the vocabulary and the samplers of spec.
func NewGenerator(spec InputSpec) (*Generator, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("input spec: %w", err)
	}
	// PCG with the seed in both halves of its state: the stream is a pure
	// function of Seed.
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	g := &Generator{spec: spec, rng: rng, vocab: vocabulary(rng, spec.Vocab), counts: make([]uint64, spec.Vocab)}
	weights := make([]float64, spec.Vocab)
	for k := range weights {
		weights[k] = math.Pow(float64(k+1), -spec.ZipfS)
	}
	g.all = newSampler(allRanks(spec.Vocab), weights)
	if spec.Layout == LayoutKeyed {
		ranks := make([][]int, spec.Partitions)
		for k, w := range g.vocab {
			p := wordPartition(w, spec.Partitions)
			ranks[p] = append(ranks[p], k)
		}
		g.byPart = make([]sampler, spec.Partitions)
		for p, rs := range ranks {
			if len(rs) == 0 {
				return nil, fmt.Errorf("input spec: no word of the %d-word vocabulary falls in partition %d of %d; use a larger vocabulary",
					spec.Vocab, p, spec.Partitions)
			}
			g.byPart[p] = newSampler(rs, weights)
		}
	}
	return g, nil
}

// Next returns the next line and false once all lines were drawn.
func (g *Generator) Next() (Line, bool) {
	if g.next >= g.spec.Lines {
		return Line{}, false
	}
	p := g.next % g.spec.Partitions
	g.next++
	s := &g.all
	if g.byPart != nil {
		s = &g.byPart[p]
	}
	g.buf.Reset()
	for i := 0; i < g.spec.Words; i++ {
		k := s.draw(g.rng)
		g.counts[k]++
		if i > 0 {
			g.buf.WriteByte(' ')
		}
		g.buf.WriteString(g.vocab[k])
	}
	return Line{Partition: int32(p), Text: g.buf.String()}, true
}

// Truth is the count of every word in the lines drawn so far (all of them
// once Next returned false): what a correct word count's latest output per
// word must be.
func (g *Generator) Truth() map[string]uint64 {
	t := make(map[string]uint64, len(g.vocab))
	for k, n := range g.counts {
		if n > 0 {
			t[g.vocab[k]] = n
		}
	}
	return t
}

// wordPartition is the partition a word belongs to in LayoutKeyed. Any
// fixed function works (each task counts only its own words); FNV-1a is
// simple and spreads the vocabulary evenly.
func wordPartition(word string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(word))
	return int(h.Sum32() % uint32(partitions))
}

// vocabulary returns n distinct words of 3 to 10 letters a-z. Both word
// counts split lines on anything that is not a letter or digit and
// lowercase, so these words are the same words to both.
func vocabulary(rng *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	b := make([]byte, 0, 10)
	for len(words) < n {
		b = b[:0]
		for l := 3 + rng.IntN(8); l > 0; l-- {
			b = append(b, byte('a'+rng.IntN(26)))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}

func allRanks(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// sampler draws one of its ranks with probability proportional to the
// rank's weight: inverse transform over the cumulative weights.
type sampler struct {
	ranks []int
	cum   []float64 // cum[i] = sum of the weights of ranks[:i+1]
}

func newSampler(ranks []int, weights []float64) sampler {
	s := sampler{ranks: ranks, cum: make([]float64, len(ranks))}
	sum := 0.0
	for i, k := range ranks {
		sum += weights[k]
		s.cum[i] = sum
	}
	return s
}

func (s *sampler) draw(rng *rand.Rand) int {
	u := rng.Float64() * s.cum[len(s.cum)-1]
	i := sort.SearchFloat64s(s.cum, u)
	if i == len(s.cum) { // u rounded up to the total
		i--
	}
	return s.ranks[i]
}
