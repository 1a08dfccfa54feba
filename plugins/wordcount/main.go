// Command wordcount is a stateful wasmstream plugin: it splits each
// record's value into words, keeps a running count per word in the state
// store "counts", and emits word -> count to the output "counts": for each
// word the record contains (emit: update), or once per commit window for
// each word that changed in it (emit: commit). See README.md for the config
// and formats.
package main

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/words"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	store = sdk.Store("counts")
	out   = sdk.Output("counts")
)

var (
	// decimal is the value format of emitted counts: decimal text (true)
	// or an 8-byte big-endian integer, the format of Kafka's
	// LongSerializer (false).
	decimal bool
	// atCommit (emit: commit): a record only updates the counts and marks
	// its words (timer.Mark); committed emits each marked word's count
	// once at the end of the commit window.
	atCommit bool
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
	timer.OnCommit(committed)
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
	mode := c.String("emit", "update")
	if mode != "update" && mode != "commit" {
		c.Fail("emit", `must be "update" or "commit"; got `+strconv.Quote(mode))
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
	atCommit = mode == "commit"
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
		if atCommit {
			// Marks are staged like state writes: a record that fails
			// after this leaves none.
			_, err := timer.Mark(key)
			if err == nil {
				continue
			}
			if !errors.Is(err, abi.ErrnoLimit) {
				return err
			}
			// The window holds as many marked keys as the host allows
			// (limits.commit_marks): this word's count goes out now
			// instead, as in update mode.
		}
		if err := emit(key, total); err != nil {
			return err
		}
	}
	return nil
}

// committed is the commit callback of emit: commit, once per word marked
// in the ending window, in key order: it emits the word's count as it
// stands at the end of the window, with the timestamp of the last record
// that changed it.
func committed(c *timer.Commit) error {
	total, ok, err := count(c.Key)
	if err != nil || !ok {
		// Not found: only a time to live on the store (the processor's
		// expire) removes a count, and it expired after the record that
		// marked it; there is no count to emit.
		return err
	}
	return emit(c.Key, total)
}

// emit writes word -> total to the output in the configured format. The
// SDK stamps it with the timestamp of the call: the record's, or in
// committed the one the host kept with the mark.
func emit(word []byte, total uint64) error {
	if decimal {
		val = strconv.AppendUint(val[:0], total, 10)
	} else {
		val = binary.BigEndian.AppendUint64(val[:0], total)
	}
	return out.Emit(sdk.Out{Key: word, Value: val})
}

// add adds n to the stored count of key and returns the new count. It
// reads the count itself rather than through count: one call fewer per
// word, which a Go plugin pays for in Wasm (see "The per-record path" in
// sdk/sdk.go).
func add(key []byte, n uint64) (uint64, error) {
	var ok bool
	var err error
	stored, ok, err = store.AppendGet(stored[:0], key)
	if err != nil {
		return 0, err
	}
	if ok {
		if len(stored) != 8 {
			return 0, badCount(key)
		}
		n += binary.BigEndian.Uint64(stored)
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return n, store.Put(key, b[:])
}

// count reads the stored count of key, and whether there is one. Counts
// are stored as 8-byte big-endian unsigned integers.
func count(key []byte) (uint64, bool, error) {
	var ok bool
	var err error
	stored, ok, err = store.AppendGet(stored[:0], key)
	if err != nil || !ok {
		return 0, false, err
	}
	if len(stored) != 8 {
		return 0, false, badCount(key)
	}
	return binary.BigEndian.Uint64(stored), true, nil
}

// badCount is the error for a stored count of key that is not 8 bytes.
func badCount(key []byte) error {
	return errors.New("wordcount: store \"counts\" holds " + strconv.Itoa(len(stored)) +
		" bytes for word " + strconv.Quote(string(key)) + ", want an 8-byte count")
}

// split fills text and ends with the words of s (package words: runs of
// letters and digits, lowercased; words over abi.MaxKeySize skipped).
func split(s []byte) { text, ends = words.Split(text[:0], ends[:0], s) }

func main() {}
