// Package restore rebuilds task stores from their changelog topics, and
// always finishes (invariant I4).
//
// How a restore of one store runs:
//
//  1. Read the store's checkpoint, and the changelog partition's log start,
//     last stable offset and high watermark, once. The last stable offset is
//     the target: fixed for the whole restore, never a record that may come
//     later (nothing produces to a changelog while its task restores).
//  2. If the checkpoint is beyond the high watermark (topic deleted and
//     recreated, or truncated) or below the log start (retention or
//     DeleteRecords removed records the store never saw), wipe the task and
//     restore from the log start. Records that expired below the checkpoint,
//     after the store had them, are no reason to wipe (a store with a
//     delete-policy changelog needs its own retention, as in Kafka Streams).
//     A checkpoint between the last stable offset and the high watermark (an
//     open transaction below it) restores nothing and keeps the checkpoint.
//  3. Consume from an explicit offset with ConsumeResetOffset(NoResetOffset):
//     franz-go never jumps anywhere by itself; an out-of-range position
//     surfaces as kerr.OffsetOutOfRange (docs/design.md#seed-faust: an
//     automatic reset jumps silently). Then the offsets are listed again: if the log start passed the
//     position (or the topic was recreated), the task is wiped and restore
//     restarts from the new log start, counted and bounded by MaxRestarts.
//  4. The position advances with every record: data records, and transaction
//     markers, which KeepControlRecords makes visible, so a changelog whose
//     tail is aborted transactions completes on its abort marker. A record at
//     or past the target completes it too. Compaction gaps are skipped by
//     the fetch itself. If nothing arrives for IdleProbe while the position
//     is short of the target (a gap with nothing after it below the target),
//     one direct Fetch request at the position is decoded with
//     kgo.ProcessFetchPartition, which reports the offset after the batches
//     it read, data or not; an empty answer below the target means there is
//     nothing left to read. Restore never waits for a record that will not
//     come; StallTimeout bounds a broker that does not answer at all.
//  5. Records are applied in batches with Task.ApplyRestored, each with the
//     checkpoint "offset after the batch", so an interrupted restore resumes
//     where it stopped and a checkpoint never claims a record the store does
//     not hold. (A batch of 1 MiB or more is written as sstables that Pebble
//     ingests, data and checkpoint in one ingestion: see the state package.) The reader sorts each batch by key and keeps the last record
//     of each key (see sorter). Batches are applied in order by a second
//     goroutine, the only one using the Task while the consumer reads, so
//     that reading the next batch overlaps writing the last; everything read
//     is applied before a restore returns or restarts. Before each batch the
//     Task's wipe
//     generation is compared: if anyone wiped the task meanwhile, the batch
//     is dropped and restore starts over from the log start instead of
//     writing a checkpoint over a hole (the Kafka Streams revive bug).
//
// Aborted transactional data is never restored: the consumer reads with
// read_committed isolation.
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Errors a restore returns, besides a cancelled context and storage errors
// from the state package. Test with errors.Is.
var (
	// ErrChangelogMissing: the changelog topic, or the partition, does not
	// exist. The caller creates changelogs before restoring.
	ErrChangelogMissing = errors.New("restore: changelog topic or partition missing")
	// ErrTooManyRestarts: the log start moved past the restore position, or
	// the task was wiped, more than Config.MaxRestarts times in one call.
	ErrTooManyRestarts = errors.New("restore: too many restarts")
	// ErrStalled: the position did not move for Config.StallTimeout although
	// it is short of the target (broker unreachable or not answering).
	ErrStalled = errors.New("restore: no progress")
	// ErrFetch: the broker answered a fetch with an error that retrying
	// cannot fix (authorization, corrupt batch...).
	ErrFetch = errors.New("restore: fetch failed")
)

// Config configures a Restorer. Kafka.Brokers is required; the zero value
// of every other field picks the default given.
type Config struct {
	// Kafka is what every client the Restorer makes starts from (brokers,
	// security; its Logger defaults to Logger). Options that decide how
	// the changelog is read (offsets, isolation, reset policy, control
	// records) are set by the Restorer after these and cannot be
	// overridden; its clients name themselves wasmstream-restore and
	// wasmstream-restore-admin.
	Kafka kclient.Config
	// BatchRecords and BatchBytes bound one ApplyRestored batch (and so the
	// work lost to an interruption). Defaults 50,000 records, 8 MiB (keys and
	// values). The byte bound bounds memory.
	//
	// Bigger batches restore faster. A batch of 1 MiB or more is written as
	// an sstable and ingested (state.Options.IngestRestoredBytes), which
	// costs two files and their syncs per batch, and with keys scattered
	// over the store every batch's table overlaps the others', which
	// compactions merge: fewer, larger tables merge less. In the state
	// package's BenchmarkApplyRestored (~110-byte records), 50,000-record
	// batches take ~0.23 us/record (keys in changelog order) and ~0.40
	// (scattered), 10,000-record ones ~0.43 and ~0.68. (Before ingestion,
	// when a batch over half a memtable was flushed to level 0 as it was,
	// 50,000 instead of 20,000 took BenchmarkRestore's restore/raw on real
	// Kafka from ~0.23-0.25 to ~0.31-0.33.)
	BatchRecords int
	BatchBytes   int
	// MaxRestarts bounds how many times one call starts over after the log
	// start passed its position or the task was wiped. Default 5.
	MaxRestarts int
	// FetchMaxWait is how long the broker holds a fetch that has no data.
	// Default 250 ms.
	FetchMaxWait time.Duration
	// FetchMaxPartitionBytes bounds one fetch of the changelog partition.
	// Default 8 MiB.
	FetchMaxPartitionBytes int32
	// IdleProbe is how long the consumer may deliver nothing, short of the
	// target, before a direct fetch checks whether anything is left to read.
	// Default 1 s; must exceed FetchMaxWait.
	IdleProbe time.Duration
	// OpenTransactionWait bounds how long a restore waits, before fixing its
	// target, for transactions open on the changelog to end. A producer
	// that crashed or froze mid-transaction holds the last stable offset
	// below records other owners committed after it began; restoring to it
	// would miss them. The broker aborts such a transaction at its timeout,
	// so this should exceed kafka.transaction_timeout. Default 30 s.
	OpenTransactionWait time.Duration
	// StallTimeout bounds a restore whose position does not move. Default 2 min.
	StallTimeout time.Duration
	// ProgressLogEvery spaces the progress log lines. Default 10 s.
	ProgressLogEvery time.Duration
	// Logger receives start, wipe, progress and completion lines. nil means
	// slog.Default().
	Logger *slog.Logger
	// Progress, if set, is called after every applied batch, on the
	// goroutine that applies batches (the only one using the Task while the
	// restore reads), and once at the end (Done set) on the caller's. It
	// may call back into the Task (a wipe there makes the restore start
	// over) and must return.
	Progress func(Progress)
}

func (c *Config) defaults() {
	if c.BatchRecords <= 0 {
		c.BatchRecords = 50_000
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = 8 << 20
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 5
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 250 * time.Millisecond
	}
	if c.FetchMaxPartitionBytes <= 0 {
		c.FetchMaxPartitionBytes = 8 << 20
	}
	if c.IdleProbe <= 0 {
		c.IdleProbe = time.Second
	}
	if c.IdleProbe <= c.FetchMaxWait {
		c.IdleProbe = 2 * c.FetchMaxWait
	}
	if c.OpenTransactionWait <= 0 {
		c.OpenTransactionWait = 30 * time.Second
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 2 * time.Minute
	}
	if c.ProgressLogEvery <= 0 {
		c.ProgressLogEvery = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Kafka.Logger == nil {
		c.Kafka.Logger = c.Logger
	}
}

// Progress describes a restore in flight (or finished, when Done).
type Progress struct {
	Task      string // processor/topic/partition
	Store     string
	Topic     string
	Partition int32

	Start    int64 // where reading began: the checkpoint, or the log start
	Target   int64 // the last stable offset listed at the start; fixed
	Position int64 // the next offset to read; the store's checkpoint after each batch
	Restored int64 // changelog records applied (values and tombstones)

	Elapsed time.Duration
	Rate    float64 // Restored per second of Elapsed

	Wipes    int  // task wipes this call made (checkpoint out of range, log start moved)
	Restarts int  // times this call started over (log start moved, task wiped by someone else)
	Done     bool // Position reached Target
}

// Result is the outcome of restoring one store.
type Result struct {
	Progress
	// Wiped is set when the task was wiped during the call, by the restore
	// itself or by someone else. A wipe empties every store of the task:
	// stores restored before must be restored again (RestoreTask does).
	Wiped bool
	// Skipped counts records without a key, which cannot be applied.
	Skipped int64
	// Probes counts direct fetches made because the consumer was idle.
	Probes int
}

// Restorer restores stores from changelogs. It holds one client for listing
// offsets and metadata; every restore consumes with a client of its own (no
// consumer group), closed when it ends. Safe for concurrent use.
type Restorer struct {
	cfg   Config
	admin *kgo.Client
	adm   *kadm.Client
}

// New returns a Restorer; Close it when done.
func New(cfg Config) (*Restorer, error) {
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("restore: no brokers configured")
	}
	cfg.defaults()
	cl, err := cfg.Kafka.NewClient(kgo.ClientID("wasmstream-restore-admin"))
	if err != nil {
		return nil, fmt.Errorf("restore: admin client: %w", err)
	}
	return &Restorer{cfg: cfg, admin: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the admin client.
func (r *Restorer) Close() { r.admin.Close() }

// Restore restores one store of task from partition of the changelog topic
// with a Restorer made for the call.
func Restore(ctx context.Context, cfg Config, task *state.Task, store int, topic string, partition int32) (Result, error) {
	r, err := New(cfg)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	return r.Restore(ctx, task, store, topic, partition)
}

// RestoreTask restores every store of task, store i from topics[i] (same
// partition), and returns one Result per store, with counts summed over
// passes. A wipe during the pass (its own or anyone's) empties the stores
// already restored, so the pass is repeated until one completes without a
// wipe (bounded by MaxRestarts); stores restored after the wipe keep their
// checkpoints and finish at once.
//
// until, if not nil, gives a store a target of its own: until[i] >= 0
// restores store i only up to that offset (a table store whose changelog is
// its source topic stops at the group's committed offset: what is past it
// the task reads as input again).
func (r *Restorer) RestoreTask(ctx context.Context, task *state.Task, topics []string, until []int64, partition int32) ([]Result, error) {
	if n := len(task.Stores()); n != len(topics) {
		return nil, fmt.Errorf("restore: task %s has %d stores but %d changelog topics were given", task, n, len(topics))
	}
	results := make([]Result, len(topics))
	for pass := 0; ; pass++ {
		gen := task.WipeGeneration()
		for i, topic := range topics {
			to := int64(-1)
			if i < len(until) {
				to = until[i]
			}
			res, err := r.restoreTo(ctx, task, i, topic, partition, to)
			results[i] = merge(results[i], res)
			if err != nil {
				return results, err
			}
		}
		if task.WipeGeneration() == gen {
			return results, nil
		}
		if pass >= r.cfg.MaxRestarts {
			return results, fmt.Errorf("%w: task %s was wiped during %d passes over its stores", ErrTooManyRestarts, task, pass+1)
		}
		r.cfg.Logger.Warn("restore: the task was wiped while its stores were restoring; restoring them again",
			"task", task.String(), "pass", pass+1)
	}
}

func merge(acc, r Result) Result {
	if acc.Task == "" {
		return r
	}
	wipes, restarts, restored, skipped, probes, elapsed := acc.Wipes+r.Wipes, acc.Restarts+r.Restarts,
		acc.Restored+r.Restored, acc.Skipped+r.Skipped, acc.Probes+r.Probes, acc.Elapsed+r.Elapsed
	wiped := acc.Wiped || r.Wiped
	acc = r
	acc.Wipes, acc.Restarts, acc.Restored, acc.Skipped, acc.Probes, acc.Elapsed = wipes, restarts, restored, skipped, probes, elapsed
	acc.Wiped = wiped
	if elapsed > 0 {
		acc.Rate = float64(restored) / elapsed.Seconds()
	}
	return acc
}

// errRestart makes run start over with a new consumer at run.pos.
var errRestart = errors.New("restart")

// errWiped: the applier found the task wiped by someone else.
var errWiped = errors.New("task wiped during restore")

// fetchFailure carries a fetch error out of the poll loop so that it is
// handled after the applier has stopped (handling may wipe the task).
type fetchFailure struct{ err error }

func (f *fetchFailure) Error() string { return f.err.Error() }

// run is one Restore call. Two goroutines share it while consume runs: the
// poller (the caller's goroutine: pos, target, batch, the Result's counters)
// and the applier (cp, hasCP, Restored and the progress fields). Fields one
// side owns are written by the other only while the applier is not running.
type run struct {
	r         *Restorer
	cfg       *Config
	task      *state.Task
	store     int
	topic     string
	partition int32
	// until caps the target (-1: none): a source topic used as the
	// changelog is restored to the group's committed offset only.
	until int64
	log   *slog.Logger

	res   Result
	began time.Time

	gen     uint64       // task wipe generation our writes belong to
	topicID kadm.TopicID // the changelog's ID when the restore started

	// applier side
	cp      int64 // checkpoint as last read or written
	hasCP   bool
	lastLog time.Time

	// poller side
	pos        int64 // next offset to read
	target     int64
	submitted  int64          // position of the last batch handed to the applier
	batch      []state.Change // records read since the last submit, in changelog order
	batchBytes int
	sorter     sorter
	free       chan []state.Change // sorted batch slices the applier is done with
	lastMove   time.Time           // when pos last advanced
}

// Restore restores one store of task (store indexes task.Stores()) from
// partition of the changelog topic, to the last stable offset listed when it
// starts. See the package doc for the algorithm. On error, every batch
// applied before it stays, with a checkpoint that matches: calling Restore
// again resumes.
func (r *Restorer) Restore(ctx context.Context, task *state.Task, store int, topic string, partition int32) (Result, error) {
	return r.restoreTo(ctx, task, store, topic, partition, -1)
}

// restoreTo is Restore up to offset until at most (-1: the last stable
// offset).
func (r *Restorer) restoreTo(ctx context.Context, task *state.Task, store int, topic string, partition int32, until int64) (Result, error) {
	names := task.Stores()
	if store < 0 || store >= len(names) {
		return Result{}, fmt.Errorf("%w: task %s has %d stores, not index %d", state.ErrNoStore, task, len(names), store)
	}
	u := &run{
		r: r, cfg: &r.cfg, task: task, store: store, topic: topic, partition: partition, until: until,
		log:   r.cfg.Logger.With("task", task.String(), "store", names[store], "topic", topic, "partition", partition),
		began: time.Now(),
		free:  make(chan []state.Change, 3),
	}
	u.batch = make([]state.Change, 0, min(r.cfg.BatchRecords, 1<<16))
	u.res.Task, u.res.Store, u.res.Topic, u.res.Partition = task.String(), names[store], topic, partition
	err := u.restore(ctx)
	u.fillProgress(u.pos)
	if err != nil {
		// Stopped by its caller (a revocation, a standby's task starting
		// here, shutdown): expected, and said at Info; the caller's error
		// may be a broker call's, wrapping the cancellation its own way.
		level := slog.LevelWarn
		if ctx.Err() != nil {
			level = slog.LevelInfo
		}
		u.log.Log(ctx, level, "restore: stopped", "position", u.pos, "checkpoint", u.cp, "target", u.target, "restored", u.res.Restored, "err", err)
		return u.res, err
	}
	u.res.Done = true
	u.log.Info("restore: complete", "position", u.pos, "restored", u.res.Restored,
		"elapsed", u.res.Elapsed.Round(time.Millisecond), "records_per_s", int64(u.res.Rate),
		"wipes", u.res.Wipes, "restarts", u.res.Restarts, "probes", u.res.Probes)
	if r.cfg.Progress != nil {
		r.cfg.Progress(u.res.Progress)
	}
	return u.res, nil
}

func (u *run) restore(ctx context.Context) error {
	u.gen = u.task.WipeGeneration()
	cp, ok, err := u.task.Checkpoint(u.store)
	if err != nil {
		return err
	}
	u.cp, u.hasCP = cp, ok
	offs, err := u.r.list(ctx, u.topic, u.partition)
	if err != nil {
		return err
	}
	// A transaction still open (a crashed or stopped producer's) holds the
	// last stable offset below records committed after it began: restoring
	// to it would miss them. Wait until every transaction open now has
	// ended (the broker aborts it at its timeout at the latest).
	if offs.lso < offs.hwm && (u.until < 0 || u.until > offs.lso) {
		hwm := offs.hwm
		u.log.Info("restore: waiting for open transactions to end", "last_stable_offset", offs.lso, "high_watermark", hwm)
		deadline := time.Now().Add(u.r.cfg.OpenTransactionWait)
		for offs.lso < hwm && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			if offs, err = u.r.list(ctx, u.topic, u.partition); err != nil {
				return err
			}
		}
		if offs.lso < hwm {
			u.log.Warn("restore: a transaction is still open on the changelog; restoring to the last stable offset",
				"last_stable_offset", offs.lso, "high_watermark", hwm, "waited", u.r.cfg.OpenTransactionWait)
		}
	}
	u.target, u.topicID = offs.lso, offs.id
	if u.until >= 0 {
		// Never below the log start: nothing there to read.
		u.target = max(min(u.target, u.until), offs.start)
	}
	switch {
	case !ok:
		u.pos = offs.start
	case cp > offs.hwm:
		if err := u.wipe(fmt.Sprintf("checkpoint %d is beyond the changelog end %d: the topic was recreated or truncated, or the state directory came from another cluster (an embedded development run of the same app_id?)", cp, offs.hwm)); err != nil {
			return err
		}
		u.pos = offs.start
	case cp < offs.start:
		if err := u.wipe(fmt.Sprintf("the changelog log start %d passed the checkpoint %d (retention or DeleteRecords)", offs.start, cp)); err != nil {
			return err
		}
		u.pos = offs.start
	case cp > offs.lso:
		// Records between the last stable offset and our checkpoint belong to
		// a transaction still open below our own (committed) writes: there is
		// nothing the store lacks that restore could read now.
		u.log.Warn("restore: checkpoint is past the last stable offset (an older transaction is still open); nothing to restore",
			"checkpoint", cp, "last_stable_offset", offs.lso, "high_watermark", offs.hwm)
		u.pos, u.target = cp, cp
	default:
		u.pos = cp
	}
	u.res.Start = u.pos
	var cpAttr any = "none"
	if u.hasCP {
		cpAttr = u.cp
	}
	u.log.Info("restore: starting", "checkpoint", cpAttr, "log_start", offs.start, "from", u.pos,
		"target", u.target, "high_watermark", offs.hwm, "at_most_records", u.target-u.pos)

	u.lastMove, u.lastLog = time.Now(), time.Now()
	for {
		err := u.consume(ctx)
		if err == nil {
			// Record where the store is complete up to, even when nothing
			// was read (empty changelog, only markers, a fresh store at the
			// log start).
			err = u.apply(nil, 0, u.pos, true)
			if errors.Is(err, errWiped) {
				err = u.wipedElsewhere(ctx)
			}
		}
		if !errors.Is(err, errRestart) {
			return err
		}
		u.res.Restarts++
		if u.res.Restarts > u.cfg.MaxRestarts {
			return fmt.Errorf("%w: task %s store %q: %d restarts (limit %d, Config.MaxRestarts)",
				ErrTooManyRestarts, u.task, u.res.Store, u.res.Restarts, u.cfg.MaxRestarts)
		}
		u.log.Info("restore: restarting", "from", u.pos, "target", u.target, "restarts", u.res.Restarts)
	}
}

// consume reads from u.pos until u.target with one consumer client, handing
// full batches to an applier goroutine so that reading and writing overlap.
// Before it returns, every record read has been applied (or the applier
// failed). It returns nil when done, errRestart to start over with a new
// client (u.pos already set), or an error.
func (u *run) consume(ctx context.Context) error {
	if u.pos >= u.target {
		return nil
	}
	opts := u.cfg.Kafka.Opts(
		kgo.ClientID("wasmstream-restore"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{u.topic: {u.partition: kgo.NewOffset().At(u.pos)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), // never jump by itself (I4)
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // markers move the position past aborted data
		kgo.FetchMaxWait(u.cfg.FetchMaxWait),
		kgo.FetchMaxPartitionBytes(u.cfg.FetchMaxPartitionBytes),
		kgo.FetchMaxBytes(2*u.cfg.FetchMaxPartitionBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("restore: consumer client: %w", err)
	}
	defer cl.Close()

	u.submitted = u.pos
	a := u.startApplier()
	perr := u.poll(ctx, cl, a)
	// What was read is a valid prefix of the changelog whatever stopped
	// the loop: apply it too.
	serr := u.submit(a)
	aerr := a.stop()
	if aerr == nil {
		aerr = serr
	}
	if aerr != nil {
		if errors.Is(aerr, errWiped) {
			if ctx.Err() != nil {
				u.res.Wiped = true
				return ctx.Err()
			}
			return u.wipedElsewhere(ctx)
		}
		return aerr
	}
	var ff *fetchFailure
	if errors.As(perr, &ff) {
		return u.fetchError(ctx, ff.err)
	}
	return perr
}

// poll is the read loop of consume.
func (u *run) poll(ctx context.Context, cl *kgo.Client, a *applier) error {
	for u.pos < u.target {
		pctx, cancel := context.WithTimeout(ctx, u.cfg.IdleProbe)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return // the idle timeout of this poll
			}
			if fetchErr == nil {
				fetchErr = fmt.Errorf("topic %s partition %d: %w", t, p, err)
			}
		})
		before, got := u.pos, false
		for it := fs.RecordIter(); !it.Done(); {
			rec := it.Next()
			if rec.Topic != u.topic || rec.Partition != u.partition {
				continue
			}
			got = true
			u.take(rec)
			if err := u.maybeSubmit(ctx, a); err != nil {
				return err
			}
		}
		if u.pos > before || u.pos >= u.target {
			u.lastMove = time.Now()
		}
		if fetchErr != nil {
			if !needsHandling(fetchErr) && kerr.IsRetriable(fetchErr) {
				u.log.Debug("restore: retriable fetch error", "err", fetchErr)
			} else {
				return &fetchFailure{fetchErr}
			}
		}
		if !got && u.pos < u.target {
			if err := u.probe(ctx); err != nil {
				return err
			}
			if err := u.maybeSubmit(ctx, a); err != nil {
				return err
			}
		}
		if u.pos < u.target && time.Since(u.lastMove) > u.cfg.StallTimeout {
			return fmt.Errorf("%w: task %s store %q: position %d, target %d, nothing read for %v (Config.StallTimeout)",
				ErrStalled, u.task, u.res.Store, u.pos, u.target, u.cfg.StallTimeout)
		}
	}
	return nil
}

// take applies one fetched record to the position and the batch. Records
// are delivered in offset order; a record at or past the target proves that
// everything below the target has been seen.
func (u *run) take(rec *kgo.Record) {
	switch {
	case rec.Offset < u.pos:
		return // already taken (a probe read ahead of the consumer)
	case rec.Offset >= u.target:
		u.pos = u.target
		return
	}
	u.pos = rec.Offset + 1
	if rec.Attrs.IsControl() {
		return // a commit or abort marker: only the position moves
	}
	if rec.Key == nil {
		u.res.Skipped++
		return
	}
	u.batch = append(u.batch, state.Change{Key: rec.Key, Value: rec.Value, Delete: rec.Value == nil})
	u.batchBytes += len(rec.Key) + len(rec.Value)
}

// maybeSubmit hands the batch to the applier once it is full, and stops at
// a batch boundary when ctx is done.
func (u *run) maybeSubmit(ctx context.Context, a *applier) error {
	if len(u.batch) < u.cfg.BatchRecords && u.batchBytes < u.cfg.BatchBytes {
		return nil
	}
	if err := u.submit(a); err != nil {
		return err
	}
	return ctx.Err()
}

// submit hands the batch read so far, sorted by key with one record per key
// (see sorter), with the position after it, to the applier.
func (u *run) submit(a *applier) error {
	if len(u.batch) == 0 && u.pos == u.submitted {
		return nil
	}
	var sorted []state.Change
	select {
	case sorted = <-u.free:
	default:
		sorted = make([]state.Change, 0, min(len(u.batch), u.cfg.BatchRecords))
	}
	sorted = u.sorter.sort(sorted, u.batch)
	read := len(u.batch)
	clear(u.batch) // let the fetched records go
	u.batch, u.batchBytes = u.batch[:0], 0
	u.submitted = u.pos
	return a.submit(sorted, read, u.pos)
}

func (u *run) recycle(recs []state.Change) {
	clear(recs) // let the fetched records go
	select {
	case u.free <- recs[:0]:
	default:
	}
}

// applier applies batches on a goroutine of its own, in order, so that the
// next batch is read while the previous one is written. At most one batch
// waits while one is being applied.
type applier struct {
	u      *run
	ch     chan applyReq
	done   chan struct{}
	err    error // set by the goroutine; read after done is closed
	failed atomic.Bool
	closed bool
}

type applyReq struct {
	recs []state.Change // sorted, one per key
	read int            // records of the changelog they came from
	next int64
}

func (u *run) startApplier() *applier {
	a := &applier{u: u, ch: make(chan applyReq, 1), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *applier) loop() {
	finished := false
	defer func() {
		if !finished && a.err == nil {
			// A Progress callback ended the goroutine (runtime.Goexit,
			// as t.FailNow does).
			a.err = errors.New("restore: the Progress callback did not return")
		}
		a.failed.Store(a.err != nil)
		close(a.done)
	}()
	for req := range a.ch {
		if a.err == nil {
			if err := a.u.apply(req.recs, req.read, req.next, false); err != nil {
				a.err = err
				a.failed.Store(true)
			}
		}
		a.u.recycle(req.recs)
	}
	finished = true
}

func (a *applier) submit(recs []state.Change, read int, next int64) error {
	if a.failed.Load() {
		a.u.recycle(recs)
		return a.stop()
	}
	select {
	case a.ch <- applyReq{recs, read, next}:
		return nil
	case <-a.done: // ended early
		return a.stop()
	}
}

// stop waits until every submitted batch is applied and returns the first
// error. It is idempotent.
func (a *applier) stop() error {
	if !a.closed {
		a.closed = true
		close(a.ch)
	}
	<-a.done
	return a.err
}

// apply writes recs (the read changelog records made into a sorted batch
// with one record per key) and the checkpoint next in one state batch. With
// final set it writes the checkpoint even with no records when the store has
// none yet. If the task was wiped since our last write (by anyone), it writes
// nothing and returns errWiped: writing would make the checkpoint claim the
// records the wipe removed.
func (u *run) apply(recs []state.Change, read int, next int64, final bool) error {
	if u.task.WipeGeneration() != u.gen {
		return errWiped
	}
	switch {
	case len(recs) == 0 && u.hasCP && u.cp >= next:
		return nil // nothing new
	case len(recs) == 0 && !u.hasCP && !final:
		return nil // a fresh store: its first checkpoint comes with data or at the end
	}
	if err := u.task.ApplyRestored(u.store, recs, next); err != nil {
		return err
	}
	u.res.Restored += int64(read)
	u.cp, u.hasCP = next, true
	u.fillProgress(next)
	if time.Since(u.lastLog) >= u.cfg.ProgressLogEvery {
		u.lastLog = time.Now()
		u.log.Info("restore: progress", "position", next, "target", u.target, "restored", u.res.Restored,
			"records_per_s", int64(u.res.Rate))
	}
	if u.cfg.Progress != nil && !final {
		u.cfg.Progress(u.res.Progress)
	}
	return nil
}

func (u *run) fillProgress(pos int64) {
	u.res.Position, u.res.Target = pos, u.target
	u.res.Elapsed = time.Since(u.began)
	if s := u.res.Elapsed.Seconds(); s > 0 {
		u.res.Rate = float64(u.res.Restored) / s
	}
}

// wipedElsewhere handles a wipe someone else made during the restore: the
// records read are dropped and restore starts over from the log start.
func (u *run) wipedElsewhere(ctx context.Context) error {
	u.log.Warn("restore: the task was wiped by someone else during restore; starting over from the log start",
		"position", u.pos, "checkpoint", u.cp)
	u.res.Wiped = true
	u.gen = u.task.WipeGeneration()
	u.hasCP, u.cp = false, 0
	u.dropBatch()
	return u.restartFromLogStart(ctx)
}

func (u *run) dropBatch() {
	clear(u.batch)
	u.batch, u.batchBytes = u.batch[:0], 0
}

// wipe wipes the whole task (every store's data and checkpoint, one batch).
// The applier is not running.
func (u *run) wipe(reason string) error {
	u.log.Warn("restore: wiping the task's state and restoring from the log start", "reason", reason)
	u.dropBatch()
	if err := u.task.Wipe(); err != nil {
		return err
	}
	u.res.Wipes++
	u.res.Wiped = true
	u.gen = u.task.WipeGeneration()
	u.hasCP, u.cp = false, 0
	return nil
}

// restartFromLogStart lists the offsets again and points u.pos at the log
// start; the caller has wiped (or found wiped) the task.
func (u *run) restartFromLogStart(ctx context.Context) error {
	offs, err := u.r.list(ctx, u.topic, u.partition)
	if err != nil {
		return err
	}
	u.pos = offs.start
	if u.target < offs.start {
		u.target = offs.start // everything up to the target is gone
	}
	u.res.Start = u.pos
	return errRestart
}

// fetchError handles an error the consumer or a probe reported for the
// partition. The applier is not running.
func (u *run) fetchError(ctx context.Context, err error) error {
	if needsHandling(err) {
		return u.outOfRange(ctx, err)
	}
	return fmt.Errorf("%w: task %s store %q: %w", ErrFetch, u.task, u.res.Store, err)
}

// errBelowTarget: a probe saw the last stable offset below the fixed target.
var errBelowTarget = errors.New("last stable offset below the restore target")

// needsHandling reports fetch errors that mean the log under the position
// changed: the offsets are listed again (outOfRange).
func needsHandling(err error) bool {
	return errors.Is(err, kerr.OffsetOutOfRange) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, errBelowTarget)
}

// outOfRange lists the offsets again after the broker refused the position.
// The log start passing the position, or the position passing the end (the
// topic was recreated), wipes the task and starts over from the log start.
func (u *run) outOfRange(ctx context.Context, cause error) error {
	offs, err := u.r.list(ctx, u.topic, u.partition)
	if err != nil {
		return err
	}
	switch {
	case offs.id != u.topicID || u.pos > offs.hwm || offs.lso < u.target:
		if err := u.wipe(fmt.Sprintf("the topic was recreated or truncated during restore: topic ID %x (was %x), position %d, target %d, end %d, last stable %d (%v)",
			offs.id, u.topicID, u.pos, u.target, offs.hwm, offs.lso, cause)); err != nil {
			return err
		}
		u.topicID, u.target = offs.id, offs.lso
	case u.pos < offs.start:
		if err := u.wipe(fmt.Sprintf("the log start moved to %d, past the restore position %d, during restore (%v)", offs.start, u.pos, cause)); err != nil {
			return err
		}
	default:
		u.log.Warn("restore: fetch refused a position inside the log; retrying", "position", u.pos,
			"log_start", offs.start, "high_watermark", offs.hwm, "err", cause)
		return errRestart
	}
	u.pos = offs.start
	if u.target < offs.start {
		u.target = offs.start
	}
	u.res.Start = u.pos
	return errRestart
}

// offsets of a changelog partition, listed together.
type offsets struct {
	id              kadm.TopicID
	start, lso, hwm int64
}

// listRetryFor bounds how long list asks again after a retriable error: a
// changelog created a moment ago can have no leader known to the broker
// that answers (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE on Kafka for
// a few hundred milliseconds), and a leader can move. Failing the restore
// would stop the task for good.
const listRetryFor = 15 * time.Second

// list returns the topic's ID and the partition's log start, last stable
// offset and high watermark, listed in that order so that start <= lso <= hwm.
// A retriable error is asked again every 100ms for up to listRetryFor.
func (r *Restorer) list(ctx context.Context, topic string, partition int32) (offsets, error) {
	deadline := time.Now().Add(listRetryFor)
	for {
		o, err := r.listOnce(ctx, topic, partition)
		if err == nil || errors.Is(err, ErrChangelogMissing) || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return o, err
		}
		select {
		case <-ctx.Done():
			return o, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *Restorer) listOnce(ctx context.Context, topic string, partition int32) (offsets, error) {
	var o offsets
	meta, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return o, fmt.Errorf("restore: %s/%d: metadata: %w", topic, partition, err)
	}
	td, ok := meta[topic]
	if ok && td.Err == nil {
		_, ok = td.Partitions[partition]
	}
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return o, fmt.Errorf("%w: %s/%d", ErrChangelogMissing, topic, partition)
	}
	if td.Err != nil {
		return o, fmt.Errorf("restore: %s/%d: metadata: %w", topic, partition, td.Err)
	}
	o.id = td.ID
	get := func(what string, f func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		lo, err := f(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("restore: %s/%d: listing %s: %w", topic, partition, what, err)
		}
		l, ok := lo.Lookup(topic, partition)
		if !ok {
			return 0, fmt.Errorf("%w: %s/%d", ErrChangelogMissing, topic, partition)
		}
		if l.Err != nil {
			if errors.Is(l.Err, kerr.UnknownTopicOrPartition) {
				return 0, fmt.Errorf("%w: %s/%d: %w", ErrChangelogMissing, topic, partition, l.Err)
			}
			return 0, fmt.Errorf("restore: %s/%d: listing %s: %w", topic, partition, what, l.Err)
		}
		return l.Offset, nil
	}
	if o.start, err = get("the log start", r.adm.ListStartOffsets); err != nil {
		return o, err
	}
	if o.lso, err = get("the last stable offset", r.adm.ListCommittedOffsets); err != nil {
		return o, err
	}
	if o.hwm, err = get("the high watermark", r.adm.ListEndOffsets); err != nil {
		return o, err
	}
	return o, nil
}
