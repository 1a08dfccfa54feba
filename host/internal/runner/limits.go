package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/topics"
)

// TopicLimit is what a topic the runner produces to accepts of one record.
// An emit it would refuse fails at once, as the emitting record's failure
// (the plugin sees ETOOLARGE, EINVAL or ETIMESTAMP), instead of failing the
// produce: a produce failure aborts the whole commit window. This is the
// one check of an emit for its output: the runner's Emit makes it on the
// record as it will be produced (the version header included), and the
// engine turns its errno into the record's failure. What no check can know
// (a broker's own reasons, a limit changed since it was read) is caught by
// the refusal path instead (refusal.go).
type TopicLimit struct {
	// MaxBytes is the topic's max.message.bytes (0: unknown; the
	// producer's limit still applies).
	MaxBytes int32
	// KeyRequired is set for compacted topics, which refuse records
	// without a key.
	KeyRequired bool
	// TimestampAfter and TimestampBefore are how far ahead of and behind
	// the broker's clock a record's timestamp may be (0: no limit).
	TimestampAfter, TimestampBefore time.Duration
}

// LimitSource reads the limits of topics from where they are set (the
// broker's topic configs); a topic it does not know is unlimited.
type LimitSource func(ctx context.Context, topics []string) (map[string]TopicLimit, error)

// BrokerLimits is the LimitSource of the cluster that kafka reaches: each
// topic's config, as DescribeConfigs reports it, through a client of its
// own made for the call (limits are read when a runner starts and when the
// broker refused a record, not on the record path).
func BrokerLimits(kafka kclient.Config) LimitSource {
	return func(ctx context.Context, names []string) (map[string]TopicLimit, error) {
		cl, err := kafka.NewClient()
		if err != nil {
			return nil, fmt.Errorf("kafka client: %w", err)
		}
		defer cl.Close()
		lims, err := topics.Limits(ctx, kadm.NewClient(cl), names...)
		if err != nil {
			return nil, err
		}
		out := make(map[string]TopicLimit, len(lims))
		for name, l := range lims {
			out[name] = TopicLimit{MaxBytes: l.MaxMessageBytes, KeyRequired: l.Compacted,
				TimestampAfter: l.TimestampAfter, TimestampBefore: l.TimestampBefore}
		}
		return out, nil
	}
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

// maxBytes is the largest record batch, as batchWireSize counts it, the
// topic and the producer take.
func (l TopicLimit) maxBytes() int {
	if l.MaxBytes > 0 && int(l.MaxBytes) < ProducerMaxBatchBytes {
		return int(l.MaxBytes)
	}
	return ProducerMaxBatchBytes
}

// changelogOverhead is what a changelog record adds to its entry's key and
// value: the framing of batchWireSize (produceChangelog writes no headers).
var changelogOverhead = batchWireSize(&kgo.Record{})

// maxEntry is the most bytes of key and value (as stored) one state entry
// changelogged to the topic may hold: a larger one's changelog record
// would be refused, at the commit point, aborting its window. The store
// refuses it at the write instead (state.Task.SetEntryLimit), failing the
// call that made it.
func (l TopicLimit) maxEntry() int { return l.maxBytes() - changelogOverhead }

// setEntryLimits gives each of the task's stores the entry size its
// changelog takes, from the limits last read (the producer's alone for a
// topic the runner knows nothing of). A task table's topic is written by
// others: its store has no limit. Loop only (newTask, readLimits): no call
// of the task runs.
func (t *task) setEntryLimits() {
	if t.st == nil {
		return
	}
	for i, topic := range t.proc.spec.Changelogs {
		if t.isTable(i) {
			continue
		}
		t.st.SetEntryLimit(i, t.r.lims.byTopic[topic].maxEntry())
	}
}

// check returns why the topic would refuse rec, produced about now (unix
// ms), wrapping the errno the plugin gets (abi.ErrnoTooLarge over the size
// limit, abi.ErrnoInval without a key the topic requires,
// abi.ErrnoTimestamp for a timestamp outside what it accepts), or nil. A
// record without a timestamp is stamped when produced: always accepted.
func (l TopicLimit) check(rec *kgo.Record, now int64) error {
	max := l.maxBytes()
	if size := batchWireSize(rec); size > max {
		return fmt.Errorf("a record of %d bytes as produced (key, value, headers and framing), over the %d the topic and the producer accept: %w", size, max, abi.ErrnoTooLarge)
	}
	if l.KeyRequired && rec.Key == nil {
		return fmt.Errorf("the topic is compacted and refuses a record without a key: %w", abi.ErrnoInval)
	}
	if rec.Timestamp.IsZero() {
		return nil
	}
	ts := rec.Timestamp.UnixMilli()
	if l.TimestampAfter > 0 && ts > now+l.TimestampAfter.Milliseconds() {
		return fmt.Errorf("timestamp %d is %s ahead of the clock, and the topic accepts at most %s (message.timestamp.after.max.ms): %w",
			ts, time.Duration(ts-now)*time.Millisecond, l.TimestampAfter, abi.ErrnoTimestamp)
	}
	if l.TimestampBefore > 0 && ts < now-l.TimestampBefore.Milliseconds() {
		return fmt.Errorf("timestamp %d is %s behind the clock, and the topic accepts at most %s (message.timestamp.before.max.ms): %w",
			ts, time.Duration(now-ts)*time.Millisecond, l.TimestampBefore, abi.ErrnoTimestamp)
	}
	return nil
}

// limits is what the runner knows of the topics it produces to: read when
// it starts and again when the broker refused a record it had let through
// (refusal.go). Loop only; tasks read their processor's tables while they
// process (no commit point runs then).
type limits struct {
	src LimitSource
	// byTopic holds every topic the runner produces to that src knows.
	byTopic map[string]TopicLimit
	// batch is each topic's record batch size in the client
	// (ProducerBatchMaxBytesFn): no larger than its max.message.bytes, or
	// a batch of records each of which the topic takes would be refused
	// whole. The client reads it once per partition and keeps it: a
	// smaller limit read later restarts the runner (refusal.go). Never
	// changed once the client exists (franz-go reads it on its own
	// goroutines).
	batch map[string]int32
}

// batchBytes is the client's ProducerBatchMaxBytesFn over lims.batch.
func (l *limits) batchBytes() func(string) int32 {
	batch := l.batch
	return func(topic string) int32 {
		if n, ok := batch[topic]; ok {
			return n
		}
		return ProducerMaxBatchBytes
	}
}

// batchSizes is the record batch size each topic of byTopic takes: its
// max.message.bytes, at most the producer's default and at least the
// client's smallest (512 bytes; a topic that takes less takes no record
// anyway).
func batchSizes(byTopic map[string]TopicLimit) map[string]int32 {
	out := make(map[string]int32, len(byTopic))
	for name, l := range byTopic {
		if l.MaxBytes > 0 && l.MaxBytes < ProducerMaxBatchBytes {
			out[name] = max(l.MaxBytes, 512)
		}
	}
	return out
}

// produced is every topic the runner's processors produce to: outputs,
// dead-letter topics and changelogs (task tables' are input topics, which
// the runner does not write).
func (r *Runner) produced() []string {
	var names []string
	for _, ps := range r.procs {
		names = append(names, ps.spec.Outputs...)
		if ps.spec.OnError == DeadLetter && ps.spec.DeadLetterTopic != "" {
			// Only then does the host create it (and write to it).
			names = append(names, ps.spec.DeadLetterTopic)
		}
		for i, cl := range ps.spec.Changelogs {
			if !slices.ContainsFunc(ps.spec.TaskTables, func(tt TaskTable) bool { return tt.Store == i }) {
				names = append(names, cl)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// readLimits reads the limits of every topic the runner produces to, gives
// each processor its outputs' table, and returns them.
func (r *Runner) readLimits(ctx context.Context) (map[string]TopicLimit, error) {
	if r.lims.src == nil {
		return nil, nil
	}
	byTopic, err := r.lims.src(ctx, r.produced())
	if err != nil {
		return nil, fmt.Errorf("reading the limits of the topics the runner produces to: %w", err)
	}
	r.lims.byTopic = maps.Clone(byTopic)
	for _, ps := range r.procs {
		ps.limits = make([]TopicLimit, len(ps.spec.Outputs))
		for i, name := range ps.spec.Outputs {
			ps.limits[i] = byTopic[name]
		}
		ps.deadLetterLimit = byTopic[ps.spec.DeadLetterTopic]
	}
	for _, t := range r.tasks {
		t.setEntryLimits()
	}
	return byTopic, nil
}
