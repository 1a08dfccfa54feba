// Package words splits text into words the way the bundled word plugins
// agree on (plugins/wordcount counts them, plugins/split re-keys by them):
// maximal runs of Unicode letters and digits, lowercased. A word split
// out once splits into itself again, so the two can be chained.
package words

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/abi"
)

// Split appends the words of s to text, one after another, and the end of
// each in text to ends, and returns both (pass text[:0] and ends[:0] to
// reuse them: a record then allocates nothing). Words are lowercased rune
// by rune (unicode.ToLower); everything else (spaces, punctuation, invalid
// UTF-8) separates words. Words longer than abi.MaxKeySize bytes cannot be
// state keys and are skipped.
func Split(text []byte, ends []int, s []byte) ([]byte, []int) {
	start := len(text)
	for i := 0; i < len(s); {
		// A run of ASCII letters and digits, most text, lowercased by a
		// table lookup into room made once per run: the inner loop keeps
		// few values and takes one branch per byte, which is what costs
		// in the Wasm Go compiles to (a branch, and a value that does not
		// fit the few registers, each go through memory). An ASCII byte
		// is one byte of text, so the run fits the room.
		text = slices.Grow(text, len(s)-i)
		buf, n := text[:cap(text)], len(text)
		for ; i < len(s); i++ {
			c := asciiWord[s[i]]
			if c <= nonASCII {
				break
			}
			buf[n] = c
			n++
		}
		text = buf[:n]
		if i == len(s) {
			break
		}
		if asciiWord[s[i]] == notWord {
			text, ends, start = endWord(text, ends, start)
			i++
			continue
		}
		var word bool
		text, word, i = splitRune(text, s, i)
		if !word {
			text, ends, start = endWord(text, ends, start)
		}
	}
	text, ends, _ = endWord(text, ends, start)
	return text, ends
}

// splitRune is Split for the non-ASCII rune at s[i]: it appends the rune
// lowercased to text if it is a letter or a digit (word) and returns where
// the next rune starts. Invalid UTF-8 is not a letter. Kept out of Split,
// so that Split's loop has its registers to itself.
//
//go:noinline
func splitRune(text, s []byte, i int) ([]byte, bool, int) {
	r, size := utf8.DecodeRune(s[i:])
	if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return utf8.AppendRune(text, unicode.ToLower(r)), true, i + size
	}
	return text, false, i + size
}

// asciiWord maps a byte to what Split does with it: an ASCII letter or
// digit to itself lowercased, another ASCII byte to notWord and the
// first byte of anything else to nonASCII.
var asciiWord = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = nonASCII
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			t[c] = byte(c)
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		default:
			t[c] = notWord
		}
	}
	return t
}()

// The bytes of asciiWord that are not a word's byte (which are never 0
// or 1: no letter or digit is a control character).
const (
	notWord  = 0
	nonASCII = 1
)

// endWord ends the word text[start:] if there is one, skipping it if it is
// longer than abi.MaxKeySize, and returns where the next word starts.
func endWord(text []byte, ends []int, start int) ([]byte, []int, int) {
	if len(text) > start {
		if len(text)-start > abi.MaxKeySize {
			text = text[:start]
		} else {
			ends = append(ends, len(text))
			start = len(text)
		}
	}
	return text, ends, start
}
