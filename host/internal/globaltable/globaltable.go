// Package globaltable keeps a whole topic materialized in the local state
// of every process: a global table (Kafka Streams' GlobalKTable). One Table
// reads every partition of its topic with read_committed isolation and
// applies each polled batch to its state.Table, the latest value per key (a
// null value deletes the key), with every partition's next offset written
// in the same batch (I3): a restart reads only the topic's tail.
//
// Lifecycle: Bootstrap reads the topic up to the end offsets (last stable
// offsets) listed when it starts and returns; Follow then keeps applying
// what arrives until its context ends. Get and Scan may be called from any
// goroutine at any time; they see the table as of the moment of the read.
//
// Reads are not synchronized with any stream position: a task's lookup sees
// whatever the table holds when it reads, so a record processed again after
// an abort may see a newer value than the first time.
//
// Limits of this first version: the partitions are those listed at
// Bootstrap (partitions added to the topic later are read after a
// restart); a position short of the target with nothing left to fetch (a
// compaction gap at the tail) ends Bootstrap after Config.IdleDone rather
// than by probing the broker as package restore does; a position below the
// log start while following wipes the table and reads it again, during
// which lookups miss.
package globaltable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Config configures a Table.
type Config struct {
	Kafka kclient.Config
	Topic string
	// Store is where the table lives (DB.Table(Topic)).
	Store  *state.Table
	Logger *slog.Logger
	// FetchMaxWait is how long a fetch waits for records. Default 500ms.
	FetchMaxWait time.Duration
	// IdleDone ends Bootstrap when nothing was fetched for this long while
	// a partition is still short of its target: what is left below the
	// target is then no record (a compaction gap, or a transaction marker
	// the fetch did not return). Default 3s.
	IdleDone time.Duration
}

// Table is one global table: its consumer and its local store.
type Table struct {
	cfg Config
	log *slog.Logger
	cl  *kgo.Client
	pos map[int32]int64 // next offset to read per partition; owned by the consuming goroutine

	ready   atomic.Bool
	applied atomic.Int64 // data records (values and tombstones) applied since New
}

// New makes a table; nothing is read before Bootstrap.
func New(cfg Config) *Table {
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.IdleDone <= 0 {
		cfg.IdleDone = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Table{cfg: cfg, log: cfg.Logger.With("table", cfg.Topic)}
}

// Topic is the table's topic.
func (t *Table) Topic() string { return t.cfg.Topic }

// Ready reports whether Bootstrap has finished.
func (t *Table) Ready() bool { return t.ready.Load() }

// Applied counts the data records applied since New (a restart on a kept
// state directory applies only the tail).
func (t *Table) Applied() int64 { return t.applied.Load() }

// Get returns key's value in the table.
func (t *Table) Get(key []byte) ([]byte, bool, error) { return t.cfg.Store.Get(key) }

// Scan iterates keys start <= k < end (empty end: no bound).
func (t *Table) Scan(start, end []byte) (state.Iterator, error) { return t.cfg.Store.Scan(start, end) }

// offsets are a partition's log start, last stable offset and high
// watermark.
type offsets struct{ start, lso, hwm int64 }

func (t *Table) list(ctx context.Context) (map[int32]offsets, error) {
	cl, err := t.cfg.Kafka.NewClient(kgo.ClientID("wasmstream-table-admin"))
	if err != nil {
		return nil, fmt.Errorf("table %s: kafka client: %w", t.cfg.Topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := map[int32]offsets{}
	for _, l := range []struct {
		what string
		f    func(context.Context, ...string) (kadm.ListedOffsets, error)
		set  func(*offsets, int64)
	}{
		{"log start", adm.ListStartOffsets, func(o *offsets, v int64) { o.start = v }},
		{"last stable offset", adm.ListCommittedOffsets, func(o *offsets, v int64) { o.lso = v }},
		{"high watermark", adm.ListEndOffsets, func(o *offsets, v int64) { o.hwm = v }},
	} {
		lo, err := l.f(ctx, t.cfg.Topic)
		if err != nil {
			return nil, fmt.Errorf("table %s: listing the %s: %w", t.cfg.Topic, l.what, err)
		}
		parts := lo[t.cfg.Topic]
		if len(parts) == 0 {
			return nil, fmt.Errorf("table %s: the topic does not exist or has no partitions", t.cfg.Topic)
		}
		for p, o := range parts {
			if o.Err != nil {
				return nil, fmt.Errorf("table %s partition %d: listing the %s: %w", t.cfg.Topic, p, l.what, o.Err)
			}
			v := out[p]
			l.set(&v, o.Offset)
			out[p] = v
		}
	}
	return out, nil
}

// Bootstrap reads the table up to the last stable offsets of its
// partitions as listed when it starts. A checkpoint beyond a partition's
// high watermark (the topic was recreated) or below its log start (records
// the table never saw were deleted) wipes the table, which is then rebuilt
// from the log start.
func (t *Table) Bootstrap(ctx context.Context) error {
	start := time.Now()
	offs, err := t.list(ctx)
	if err != nil {
		return err
	}
	cps, err := t.cfg.Store.Checkpoints()
	if err != nil {
		return err
	}
	for p, cp := range cps {
		o, ok := offs[p]
		if ok && cp >= o.start && cp <= o.hwm {
			continue
		}
		t.log.Warn("table checkpoint out of the topic's range; rebuilding the table from the log start",
			"partition", p, "checkpoint", cp, "log_start", o.start, "high_watermark", o.hwm)
		if err := t.cfg.Store.Wipe(); err != nil {
			return err
		}
		cps = map[int32]int64{}
		break
	}
	t.pos = map[int32]int64{}
	target := map[int32]int64{}
	var behind int64
	for p, o := range offs {
		t.pos[p] = o.start
		if cp, ok := cps[p]; ok {
			t.pos[p] = cp
		}
		target[p] = o.lso
		behind += max(0, o.lso-t.pos[p])
	}
	t.log.Info("loading global table", "partitions", len(offs), "offsets_behind", behind)
	if err := t.consumeFrom(); err != nil {
		return err
	}
	last := time.Now()
	lastLog := time.Now()
	for !t.caughtUp(target) {
		n, err := t.poll(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		if n > 0 {
			last = now
		} else if now.Sub(last) > t.cfg.IdleDone {
			t.log.Info("global table: nothing left to fetch below the target; loaded", "short", t.short(target))
			break
		}
		if now.Sub(lastLog) > 5*time.Second {
			lastLog = now
			t.log.Info("loading global table", "short", t.short(target), "applied", t.Applied())
		}
	}
	t.ready.Store(true)
	t.log.Info("global table loaded", "applied", t.Applied(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (t *Table) caughtUp(target map[int32]int64) bool {
	for p, o := range target {
		if t.pos[p] < o {
			return false
		}
	}
	return true
}

// short lists the partitions short of their target, for logs.
func (t *Table) short(target map[int32]int64) string {
	var ps []int32
	for p, o := range target {
		if t.pos[p] < o {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return fmt.Sprint(ps)
}

// consumeFrom (re)makes the consumer at t.pos.
func (t *Table) consumeFrom() error {
	if t.cl != nil {
		t.cl.Close()
	}
	parts := map[int32]kgo.Offset{}
	for p, o := range t.pos {
		parts[p] = kgo.NewOffset().At(o)
	}
	cl, err := t.cfg.Kafka.NewClient(
		kgo.ClientID("wasmstream-table"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.cfg.Topic: parts}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), // never jump by itself (I4)
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // markers move the position past aborted data
		kgo.FetchMaxWait(t.cfg.FetchMaxWait),
	)
	if err != nil {
		return fmt.Errorf("table %s: kafka client: %w", t.cfg.Topic, err)
	}
	t.cl = cl
	return nil
}

// poll fetches once and applies what came, with the checkpoints of the
// partitions it touched, in one batch. It returns the records seen
// (markers included).
func (t *Table) poll(ctx context.Context) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*t.cfg.FetchMaxWait)
	fs := t.cl.PollFetches(pctx)
	cancel()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var outOfRange bool
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.DeadlineExceeded), errors.Is(fe.Err, context.Canceled):
		case errors.Is(fe.Err, kerr.OffsetOutOfRange):
			outOfRange = true
		default:
			t.log.Warn("global table fetch error", "partition", fe.Partition, "err", fe.Err)
		}
	}
	if outOfRange {
		// The log start passed the table's position (DeleteRecords or
		// retention): keys deleted in the gap would linger, so rebuild.
		t.log.Warn("global table position below the log start; rebuilding the table from the log start")
		return 0, t.rebuild(ctx)
	}
	var changes []state.Change
	cps := map[int32]int64{}
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		n++
		if next := r.Offset + 1; next > t.pos[r.Partition] {
			t.pos[r.Partition] = next
			cps[r.Partition] = next
		}
		if r.Attrs.IsControl() || r.Key == nil {
			return // a marker, or a record no key can look up
		}
		changes = append(changes, state.Change{Key: r.Key, Value: r.Value})
	})
	if len(cps) == 0 {
		return n, nil
	}
	if err := t.cfg.Store.Apply(changes, cps); err != nil {
		return n, err
	}
	t.applied.Add(int64(len(changes)))
	return n, nil
}

// rebuild wipes the table and reads it again from the log start. Until it
// has read the topic again, lookups miss keys the table had.
func (t *Table) rebuild(ctx context.Context) error {
	if err := t.cfg.Store.Wipe(); err != nil {
		return err
	}
	offs, err := t.list(ctx)
	if err != nil {
		return err
	}
	t.pos = map[int32]int64{}
	for p, o := range offs {
		t.pos[p] = o.start
	}
	return t.consumeFrom()
}

// Follow applies what arrives after Bootstrap until ctx ends; it returns
// ctx's error or a storage error. It closes the consumer.
func (t *Table) Follow(ctx context.Context) error {
	defer t.Close()
	for {
		if _, err := t.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Close closes the consumer (Follow does, when it returns).
func (t *Table) Close() {
	if t.cl != nil {
		t.cl.Close()
		t.cl = nil
	}
}
