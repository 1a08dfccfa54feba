package main

import (
	"strings"
	"testing"
	"unicode"
)

func testSpec(layout Layout) InputSpec {
	return InputSpec{Lines: 4000, Words: 8, Partitions: 4, Vocab: 2000, ZipfS: 1.0, Seed: 7, Layout: layout}
}

func drain(t *testing.T, spec InputSpec) ([]Line, *Generator) {
	t.Helper()
	g, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	var lines []Line
	for {
		l, ok := g.Next()
		if !ok {
			break
		}
		lines = append(lines, l)
	}
	if _, ok := g.Next(); ok {
		t.Fatal("Next returned a line after reporting the end")
	}
	return lines, g
}

// The harness writes each layout's input once and every run reads it: the
// same spec must give the same records, so that runs (and sessions) are
// comparable.
func TestGeneratorIsDeterministic(t *testing.T) {
	for _, l := range []Layout{LayoutKeyed, LayoutAny} {
		a, _ := drain(t, testSpec(l))
		b, _ := drain(t, testSpec(l))
		if len(a) != len(b) {
			t.Fatalf("%s: %d lines, then %d", l, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: line %d differs: %+v, then %+v", l, i, a[i], b[i])
			}
		}
		other := testSpec(l)
		other.Seed++
		c, _ := drain(t, other)
		same := 0
		for i := range a {
			if a[i] == c[i] {
				same++
			}
		}
		if same == len(a) {
			t.Fatalf("%s: seed %d and %d give the same input", l, testSpec(l).Seed, other.Seed)
		}
	}
}

// Shape: the number of lines, words per line, single spaces, lowercase
// ASCII words, and lines spread round robin over the partitions.
func TestGeneratorShape(t *testing.T) {
	for _, l := range []Layout{LayoutKeyed, LayoutAny} {
		spec := testSpec(l)
		lines, _ := drain(t, spec)
		if len(lines) != spec.Lines {
			t.Fatalf("%s: %d lines, want %d", l, len(lines), spec.Lines)
		}
		for i, line := range lines {
			if want := int32(i % spec.Partitions); line.Partition != want {
				t.Fatalf("%s: line %d on partition %d, want %d", l, i, line.Partition, want)
			}
			words := strings.Split(line.Text, " ")
			if len(words) != spec.Words {
				t.Fatalf("%s: line %d %q has %d words, want %d", l, i, line.Text, len(words), spec.Words)
			}
			for _, w := range words {
				if len(w) < 3 || len(w) > 10 || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
					t.Fatalf("%s: line %d: word %q is not 3-10 letters a-z", l, i, w)
				}
			}
		}
	}
}

// keyed: every word of a line belongs to the line's partition, so a word
// never appears on two partitions. any: the words of the most frequent
// ones appear on every partition, so counting where records arrive would
// be wrong there.
func TestGeneratorLayouts(t *testing.T) {
	wordParts := func(lines []Line) map[string]map[int32]bool {
		m := map[string]map[int32]bool{}
		for _, l := range lines {
			for _, w := range strings.Fields(l.Text) {
				if m[w] == nil {
					m[w] = map[int32]bool{}
				}
				m[w][l.Partition] = true
			}
		}
		return m
	}
	spec := testSpec(LayoutKeyed)
	keyed, _ := drain(t, spec)
	for w, parts := range wordParts(keyed) {
		if len(parts) != 1 {
			t.Fatalf("keyed: word %q on partitions %v, want one", w, parts)
		}
		for p := range parts {
			if want := wordPartition(w, spec.Partitions); int(p) != want {
				t.Fatalf("keyed: word %q on partition %d, wordPartition says %d", w, p, want)
			}
		}
	}
	anyLines, _ := drain(t, testSpec(LayoutAny))
	spread := 0
	for _, parts := range wordParts(anyLines) {
		if len(parts) == spec.Partitions {
			spread++
		}
	}
	if spread < 10 {
		t.Fatalf("any: only %d words appear on all %d partitions; the layout does not need repartitioning", spread, spec.Partitions)
	}
}

// Truth is what a correct word count must output: recounting the lines the
// way both word counts split them (runs of letters and digits) gives the
// same counts.
func TestGeneratorTruth(t *testing.T) {
	for _, l := range []Layout{LayoutKeyed, LayoutAny} {
		lines, g := drain(t, testSpec(l))
		recount := map[string]uint64{}
		var total uint64
		for _, line := range lines {
			for _, w := range strings.FieldsFunc(line.Text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
				recount[strings.ToLower(w)]++
				total++
			}
		}
		truth := g.Truth()
		if len(truth) != len(recount) {
			t.Fatalf("%s: truth has %d words, the lines %d", l, len(truth), len(recount))
		}
		for w, n := range recount {
			if truth[w] != n {
				t.Fatalf("%s: word %q: truth %d, the lines hold %d", l, w, truth[w], n)
			}
		}
		if want := uint64(testSpec(l).Lines * testSpec(l).Words); total != want {
			t.Fatalf("%s: %d words in all, want %d", l, total, want)
		}
	}
}

// Zipf-like: in the any layout the word of rank 0 is the most frequent and
// its share is near its weight 1/H(V) (H the harmonic number, s=1): about
// 12% for 2,000 words.
func TestGeneratorZipf(t *testing.T) {
	spec := testSpec(LayoutAny)
	spec.Lines = 20000
	_, g := drain(t, spec)
	top := g.vocab[0]
	truth := g.Truth()
	for w, n := range truth {
		if n > truth[top] {
			t.Fatalf("word %q (%d) is more frequent than the rank-0 word %q (%d)", w, n, top, truth[top])
		}
	}
	h := 0.0
	for k := 1; k <= spec.Vocab; k++ {
		h += 1 / float64(k)
	}
	share := float64(truth[top]) / float64(spec.Lines*spec.Words)
	if want := 1 / h; share < want*0.9 || share > want*1.1 {
		t.Fatalf("rank-0 word share %.4f, want %.4f within 10%%", share, want)
	}
}

func TestVocabularyDistinct(t *testing.T) {
	g, err := NewGenerator(InputSpec{Lines: 1, Words: 1, Partitions: 1, Vocab: 20000, ZipfS: 1, Seed: 3, Layout: LayoutAny})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, w := range g.vocab {
		if seen[w] {
			t.Fatalf("word %q twice in the vocabulary", w)
		}
		seen[w] = true
	}
	if len(seen) != 20000 {
		t.Fatalf("%d words, want 20000", len(seen))
	}
}

func TestInputSpecValidate(t *testing.T) {
	ok := testSpec(LayoutAny)
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	for name, mod := range map[string]func(*InputSpec){
		"no lines":      func(s *InputSpec) { s.Lines = 0 },
		"no words":      func(s *InputSpec) { s.Words = 0 },
		"no partitions": func(s *InputSpec) { s.Partitions = 0 },
		"tiny vocab":    func(s *InputSpec) { s.Vocab = 3 },
		"zero s":        func(s *InputSpec) { s.ZipfS = 0 },
		"layout":        func(s *InputSpec) { s.Layout = "sideways" },
	} {
		s := ok
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, s)
		}
		if _, err := NewGenerator(s); err == nil {
			t.Errorf("%s: NewGenerator accepted %+v", name, s)
		}
	}
}

// With as many partitions as words, some partition gets no word (64 words
// hashed into 64 partitions all distinct is vanishingly unlikely, and the
// seed fixes the outcome): the keyed layout cannot be drawn and says so.
func TestKeyedNeedsAWordPerPartition(t *testing.T) {
	_, err := NewGenerator(InputSpec{Lines: 10, Words: 2, Partitions: 64, Vocab: 64, ZipfS: 1, Seed: 1, Layout: LayoutKeyed})
	if err == nil || !strings.Contains(err.Error(), "no word of the 64-word vocabulary falls in partition") {
		t.Fatalf("err = %v, want a partition without words", err)
	}
	// The any layout has no such constraint.
	if _, err := NewGenerator(InputSpec{Lines: 10, Words: 2, Partitions: 64, Vocab: 64, ZipfS: 1, Seed: 1, Layout: LayoutAny}); err != nil {
		t.Fatal(err)
	}
}
