package words

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/abi"
)

// reference is Split written plainly, rune by rune with the Unicode
// tables, as the documentation says it behaves.
func reference(s []byte) []string {
	var out []string
	var w []byte
	end := func() {
		if len(w) > 0 && len(w) <= abi.MaxKeySize {
			out = append(out, string(w))
		}
		w = w[:0]
	}
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			w = utf8.AppendRune(w, unicode.ToLower(r))
		} else {
			end()
		}
		s = s[size:]
	}
	end()
	return out
}

func split(s []byte) []string {
	text, ends := Split([]byte("kept"), []int{4}, s)
	if string(text[:4]) != "kept" || ends[0] != 4 {
		panic("Split changed what it appends to")
	}
	var out []string
	start := 4
	for _, e := range ends[1:] {
		out = append(out, string(text[start:e]))
		start = e
	}
	if start != len(text) {
		panic("text past the last word")
	}
	return out
}

func TestSplitMatchesReference(t *testing.T) {
	cases := []string{
		"", " ", "a", "Hello, World! 42 times", "ÀÉÎ straße İstanbul Ⱥb 日本語",
		"x\xffy\xc3", "\xef\xbf\xbd", "MiXeD-case_words\tand\nlines",
		strings.Repeat("a", abi.MaxKeySize) + " " + strings.Repeat("b", abi.MaxKeySize+1) + " c",
	}
	alphabet := []string{"a", "Z", "0", " ", ",", "é", "Ä", "\xff", "\xe2\x82", "日", "Ⱥ", "\u0130", "-"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if got, want := split([]byte(c)), reference([]byte(c)); !slices.Equal(got, want) {
			t.Fatalf("Split(%q) = %q, want %q", c, got, want)
		}
	}
}
