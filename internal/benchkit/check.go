package main

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// Output is what a run left in its output topic, read with read_committed:
// the number of records and the latest count of every word.
type Output struct {
	Records int64
	Latest  map[string]uint64
	// BadValues counts records whose value is not an 8-byte count; the
	// first few are described in BadSamples.
	BadValues  int64
	BadSamples []string
}

// NewOutput returns an empty Output.
func NewOutput() *Output { return &Output{Latest: map[string]uint64{}} }

// maxSamples bounds the examples a failed check lists.
const maxSamples = 5

// Add takes one output record, in offset order within its partition. Both
// word counts write the word as the key and the count as an 8-byte
// big-endian integer (Kafka's LongSerializer; wordcount's value_format
// int64). A word lives in one output partition (the key decides it), so
// the record read last for a word is its latest count.
func (o *Output) Add(key, value []byte) {
	o.Records++
	if len(value) != 8 {
		o.BadValues++
		if len(o.BadSamples) < maxSamples {
			o.BadSamples = append(o.BadSamples, fmt.Sprintf("key %q: %d-byte value %q", key, len(value), value))
		}
		return
	}
	o.Latest[string(key)] = binary.BigEndian.Uint64(value)
}

// Check compares the latest counts with the true ones: every word of the
// input must have its true count, and no other key may appear. It returns
// nil on a match, otherwise an error naming how many words differ and the
// first few (sorted, so a report is reproducible).
func (o *Output) Check(truth map[string]uint64) error {
	var wrong, missing, extra []string
	for w, want := range truth {
		got, ok := o.Latest[w]
		switch {
		case !ok:
			missing = append(missing, w)
		case got != want:
			wrong = append(wrong, fmt.Sprintf("%s: %d, want %d", w, got, want))
		}
	}
	for w, got := range o.Latest {
		if _, ok := truth[w]; !ok {
			extra = append(extra, fmt.Sprintf("%q: %d", w, got))
		}
	}
	if len(wrong)+len(missing)+len(extra) == 0 && o.BadValues == 0 {
		return nil
	}
	var parts []string
	add := func(what string, n int, items []string) {
		if n == 0 {
			return
		}
		sort.Strings(items)
		if len(items) > maxSamples {
			items = items[:maxSamples]
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", n, what, strings.Join(items, "; ")))
	}
	add("words with a wrong count", len(wrong), wrong)
	add("words missing", len(missing), missing)
	add("keys that are not input words", len(extra), extra)
	add("records with a value that is not an 8-byte count", int(o.BadValues), o.BadSamples)
	return fmt.Errorf("output differs from the true counts of %d words: %s", len(truth), strings.Join(parts, "; "))
}
