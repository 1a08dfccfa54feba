// Command wordcount is a stateful wasmstream plugin: it splits each
// record's value into words, keeps a running count per word in the state
// store "counts", and emits word -> count to the output "counts" for each
// word the record contains. See README.md for the config and formats.
package main

import (
	"encoding/binary"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/sdk"
)

var (
	store = sdk.Store("counts")
	out   = sdk.Output("counts")
)

// decimal is the value format of emitted counts: decimal text (true) or an
// 8-byte big-endian integer, the format of Kafka's LongSerializer (false).
var decimal bool

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	c, err := config.Parse("wordcount", sdk.Config())
	if err != nil {
		return err
	}
	format := c.String("value_format", "decimal")
	if format != "decimal" && format != "int64" {
		c.Fail("value_format", `must be "decimal" or "int64"; got `+strconv.Quote(format))
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := store.Check(); err != nil {
		return errors.New("wordcount: " + err.Error())
	}
	if err := out.Check(); err != nil {
		return errors.New("wordcount: " + err.Error())
	}
	decimal = format == "decimal"
	return nil
}

// Per-record scratch, reused: the lowercased words one after another in
// text, their ends in ends, and the distinct ones with their count in the
// record.
var (
	text  []byte
	ends  []int
	order []string
	seen  = map[string]int{}
	val   []byte
)

func process(r *sdk.Record) error {
	split(r.Value)
	order = order[:0]
	clear(seen)
	start := 0
	for _, end := range ends {
		w := text[start:end]
		start = end
		if n, ok := seen[string(w)]; ok {
			seen[string(w)] = n + 1
			continue
		}
		word := string(w)
		seen[word] = 1
		order = append(order, word)
	}
	for _, word := range order {
		key := []byte(word)
		total, err := add(key, uint64(seen[word]))
		if err != nil {
			return err
		}
		if decimal {
			val = strconv.AppendUint(val[:0], total, 10)
		} else {
			val = binary.BigEndian.AppendUint64(val[:0], total)
		}
		if err := out.Emit(sdk.Out{Key: key, Value: val}); err != nil {
			return err
		}
	}
	return nil
}

// add adds n to the stored count of key and returns the new count. Counts
// are stored as 8-byte big-endian unsigned integers.
func add(key []byte, n uint64) (uint64, error) {
	v, ok, err := store.Get(key)
	if err != nil {
		return 0, err
	}
	var total uint64
	if ok {
		if len(v) != 8 {
			return 0, errors.New("wordcount: store \"counts\" holds " + strconv.Itoa(len(v)) +
				" bytes for word " + strconv.Quote(string(key)) + ", want an 8-byte count")
		}
		total = binary.BigEndian.Uint64(v)
	}
	total += n
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], total)
	return total, store.Put(key, b[:])
}

// split fills text and ends with the words of s: maximal runs of Unicode
// letters and digits, lowercased. Everything else (spaces, punctuation,
// invalid UTF-8) separates words. Words longer than abi.MaxKeySize bytes
// cannot be state keys and are skipped.
func split(s []byte) {
	text, ends = text[:0], ends[:0]
	start := 0
	for i := 0; i <= len(s); {
		r, size := utf8.RuneError, 1
		if i < len(s) {
			r, size = utf8.DecodeRune(s[i:])
		}
		if i < len(s) && r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			text = utf8.AppendRune(text, unicode.ToLower(r))
		} else if len(text) > start {
			if len(text)-start > abi.MaxKeySize {
				text = text[:start]
			} else {
				ends = append(ends, len(text))
				start = len(text)
			}
		}
		i += size
	}
}

func main() {}
