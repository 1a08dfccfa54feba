// Command wordcount is a stateful wasmstream plugin: it splits each
// record's value into words, keeps a running count per word in the state
// store "counts", and emits word -> count to the output "counts" for each
// word the record contains. See README.md for the config and formats.
package main

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/words"
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

// Per-record scratch, reused, so that a record allocates nothing in the
// plugin (every allocation is Go garbage-collector work inside Wasm): the
// lowercased words one after another in text, their ends in ends, the
// distinct ones as spans of text with their count in the record, the
// stored count and the emitted value.
var (
	text     []byte
	ends     []int
	distinct []span
	index    = map[string]int{} // distinct word -> its span, for long records only
	stored   []byte
	val      []byte
)

// span is a distinct word of the record: text[start:end], n times.
type span struct {
	start, end int
	n          uint64
}

// linearMax is the most distinct words found by comparing with each one:
// for a typical line this is cheaper than hashing every word into a map
// (which also needs a string per word); longer records use index.
const linearMax = 32

func process(r *sdk.Record) error {
	split(r.Value)
	distinct = distinct[:0]
	useIndex := false
	start := 0
	for _, end := range ends {
		w := text[start:end]
		found := -1
		if useIndex {
			if i, ok := index[string(w)]; ok {
				found = i
			}
		} else {
			for i := range distinct {
				d := &distinct[i]
				if string(text[d.start:d.end]) == string(w) {
					found = i
					break
				}
			}
		}
		switch {
		case found >= 0:
			distinct[found].n++
		default:
			distinct = append(distinct, span{start, end, 1})
			if useIndex {
				index[string(w)] = len(distinct) - 1
			} else if len(distinct) > linearMax {
				useIndex = true
				clear(index)
				for i, d := range distinct {
					index[string(text[d.start:d.end])] = i
				}
			}
		}
		start = end
	}
	for _, d := range distinct {
		key := text[d.start:d.end]
		total, err := add(key, d.n)
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
	var ok bool
	var err error
	stored, ok, err = store.AppendGet(stored[:0], key)
	if err != nil {
		return 0, err
	}
	var total uint64
	if ok {
		if len(stored) != 8 {
			return 0, errors.New("wordcount: store \"counts\" holds " + strconv.Itoa(len(stored)) +
				" bytes for word " + strconv.Quote(string(key)) + ", want an 8-byte count")
		}
		total = binary.BigEndian.Uint64(stored)
	}
	total += n
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], total)
	return total, store.Put(key, b[:])
}

// split fills text and ends with the words of s (package words: runs of
// letters and digits, lowercased; words over abi.MaxKeySize skipped).
func split(s []byte) { text, ends = words.Split(text[:0], ends[:0], s) }

func main() {}
