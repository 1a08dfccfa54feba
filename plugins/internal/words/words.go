// Package words splits text into words the way the bundled word plugins
// agree on (plugins/wordcount counts them, plugins/split re-keys by them):
// maximal runs of Unicode letters and digits, lowercased. A word split
// out once splits into itself again, so the two can be chained.
package words

import (
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
	for i := 0; i <= len(s); {
		// ASCII, most text, without the Unicode tables: the same answers
		// (IsLetter and IsDigit are [A-Za-z] and [0-9] there, ToLower
		// adds 32).
		if i < len(s) && s[i] < utf8.RuneSelf {
			c := s[i]
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				text = append(text, c)
				continue
			case 'A' <= c && c <= 'Z':
				text = append(text, c+'a'-'A')
				continue
			}
			text, ends, start = endWord(text, ends, start)
			continue
		}
		r, size := utf8.RuneError, 1
		if i < len(s) {
			r, size = utf8.DecodeRune(s[i:])
		}
		if i < len(s) && r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			text = utf8.AppendRune(text, unicode.ToLower(r))
		} else {
			text, ends, start = endWord(text, ends, start)
		}
		i += size
	}
	return text, ends
}

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
