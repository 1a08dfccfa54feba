package runner

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// OutputLimit is what an output topic accepts of one record. An emit it
// would refuse fails at once, as the emitting record's failure (the plugin
// sees ETOOLARGE or EINVAL), instead of failing the produce: a produce
// failure aborts the whole transaction, and the same record, processed
// again, would abort every transaction after it (a poison pill). This is
// the one check of an emit's size for its output: the runner's Emit makes
// it on the record as it will be produced (the version header included),
// and the engine turns its errno into the record's failure.
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

// check returns why the output would refuse rec, wrapping the errno the
// plugin gets (abi.ErrnoTooLarge over the size limit, abi.ErrnoInval
// without a key the output requires), or nil.
func (l OutputLimit) check(rec *kgo.Record) error {
	max := ProducerMaxBatchBytes
	if l.MaxBytes > 0 && int(l.MaxBytes) < max {
		max = int(l.MaxBytes)
	}
	if size := batchWireSize(rec); size > max {
		return fmt.Errorf("a record of %d bytes as produced (key, value, headers and framing), over the %d the topic and the producer accept: %w", size, max, abi.ErrnoTooLarge)
	}
	if l.KeyRequired && rec.Key == nil {
		return fmt.Errorf("the topic is compacted and refuses a record without a key: %w", abi.ErrnoInval)
	}
	return nil
}
