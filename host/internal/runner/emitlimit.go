package runner

import "github.com/twmb/franz-go/pkg/kgo"

// OutputLimit is what an output topic accepts of one record. An emit it
// would refuse fails at once, as the emitting record's failure (the plugin
// sees ETOOLARGE or EINVAL), instead of failing the produce: a produce
// failure aborts the whole transaction, and the same record, processed
// again, would abort every transaction after it (a poison pill).
type OutputLimit struct {
	// MaxBytes is the topic's max.message.bytes (0: unknown; the
	// producer's limit still applies).
	MaxBytes int32
	// KeyRequired is set for compacted topics, which refuse records
	// without a key.
	KeyRequired bool
}

// ProducerMaxBatchBytes is franz-go's default max record batch size: a
// record whose batch would be larger is refused by the client whatever the
// topic takes.
const ProducerMaxBatchBytes = 1000012

// batchWireSize bounds from above the size of a record batch holding only
// rec, as the client and the broker count it (uncompressed): the batch
// header plus the record with every varint at its widest.
func batchWireSize(rec *kgo.Record) int {
	const (
		batchOverhead = 61 // record batch header, as in franz-go's recordBatchOverhead
		varint        = 5  // widest int32 varint
		varlong       = 10 // widest int64 varint (timestamp delta)
	)
	n := batchOverhead + varint + 1 + varlong + varint // length, attributes, timestamp and offset deltas
	n += varint + len(rec.Key) + varint + len(rec.Value) + varint
	for _, h := range rec.Headers {
		n += varint + len(h.Key) + varint + len(h.Value)
	}
	return n
}

// check reports whether rec is over the output's size limit, and whether
// it lacks a key the output requires.
func (l OutputLimit) check(rec *kgo.Record) (tooLarge, needsKey bool) {
	max := ProducerMaxBatchBytes
	if l.MaxBytes > 0 && int(l.MaxBytes) < max {
		max = int(l.MaxBytes)
	}
	return batchWireSize(rec) > max, l.KeyRequired && rec.Key == nil
}
