// Package testdriver runs a whole pipeline config in this process for
// tests, with its real plugins and no Kafka of your own: records go into
// its input topics with the timestamps you give, the wall clock the
// plugins see moves only when you move it, and a commit point happens only
// when you ask. Outputs, dead letters and stores are read after commits.
//
// It is the host itself, not a model of it: host.New on the embedded
// broker (franz-go's kfake, in process), the real runners, commit points,
// transactions, timers, windows, state stores, repartition topics and
// tables. The driver adds three hooks (host/internal/driven): the runners'
// wall clock, commit points only on demand, and where each task stands on
// its inputs, so that it can wait until every record piped in has been
// processed. What it does not model (rebalances, broker failures, real
// transaction timing) is in RATIONALE.md, "The pipeline test driver".
//
// Same inputs, same outputs: every topic has one partition by default
// (Options.Partitions), so each processor runs one task and a partition's
// records come from one writer in one order.
package testdriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/host/internal/driven"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/topictool"
	"github.com/wasmstream/wasmstream/internal/configload"
)

// Record is a record piped into a topic or read from one.
type Record struct {
	// Key and Value: nil is null.
	Key, Value []byte
	Headers    []Header
	// Timestamp is the record's time. Piping, zero means the driver's
	// wall clock.
	Timestamp time.Time
	// Partition and Offset say where a record read was (ignored when
	// piping: a record goes to its key's partition, as the host's own
	// producer and `wasmstream topic produce` put it).
	Partition int32
	Offset    int64
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Entry is one key of a store, in the task of Partition.
type Entry struct {
	Partition  int32
	Key, Value []byte
}

// Options configure a Driver. The zero value is usable.
type Options struct {
	// Partitions is the partition count of every topic the pipeline uses
	// (kafka.topic_partitions). Default 1: outputs are then the same on
	// every run. With more, a partition written by several tasks (a
	// repartition topic) gets their records in the order they happen to
	// be produced in.
	Partitions int
	// Start is where the wall clock starts. Default DefaultStart.
	Start time.Time
	// Timeout bounds each step's wait for the pipeline (the group to
	// form, records to be processed, a commit point). Default 60s.
	Timeout time.Duration
	// Logger receives the host's log. Default: discarded.
	Logger *slog.Logger
}

// DefaultStart is where the wall clock starts by default.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// maxRounds bounds the commit points one Commit runs: one per hop of the
// pipeline's longest path, and one more to see nothing moved.
const maxRounds = 64

// Driver runs one pipeline. Its methods are not safe for concurrent use.
type Driver struct {
	cfg      *host.Config // the host's copy, as the driver changed it
	h        *host.Host
	hooks    *driven.Hooks
	stateDir string
	timeout  time.Duration
	order    []int // members in commit order: downstream first

	clockMu sync.Mutex
	now     time.Time

	stop    context.CancelFunc
	ran     chan struct{} // closed when Run returned, with runErr
	runErr  error
	cl      *kgo.Client // produces piped records; kadm's
	adm     *kadm.Client
	ends    *ends                      // where the inputs' records end
	topics  map[string]bool            // every topic of the pipeline
	read    map[string]map[int32]int64 // next offset to read of each topic read
	closeMu sync.Once
}

// Open loads the pipeline config at path (as `wasmstream run -c` does:
// relative paths are relative to its directory) and starts it.
func Open(ctx context.Context, path string, opts Options) (*Driver, error) {
	cfg, err := configload.Load(path, nil, nil)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, opts)
}

// New starts the pipeline cfg on an embedded broker and returns once every
// task of every processor runs. The config's Kafka settings are replaced:
// the embedded broker (no TLS or SASL), topics created with
// Options.Partitions, inputs read from their start, commit points only on
// Commit; its state lives in a temporary directory until Close.
func New(ctx context.Context, cfg *host.Config, opts Options) (_ *Driver, err error) {
	if opts.Partitions <= 0 {
		opts.Partitions = 1
	}
	if opts.Start.IsZero() {
		opts.Start = DefaultStart
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg = cfg.Clone()
	k := &cfg.Kafka
	k.Brokers, k.TLS, k.SASL = nil, host.TLSConfig{}, host.SASLConfig{}
	k.TopicPartitions = opts.Partitions
	k.StartOffset = host.StartEarliest
	// The commit interval only bounds time budgets here (commit points
	// come on Commit): long enough that no budget cuts a test's commit
	// point short, and a transaction open as long as a test waits.
	k.CommitInterval, k.TransactionTimeout = time.Minute, 10*time.Minute
	cfg.Admin.Listen = ""
	d := &Driver{timeout: opts.Timeout, now: opts.Start, read: map[string]map[int32]int64{}, ran: make(chan struct{})}
	if d.stateDir, err = os.MkdirTemp("", "wasmstream-testdriver-"); err != nil {
		return nil, err
	}
	cfg.State.Dir = d.stateDir
	d.cfg = cfg
	d.hooks = &driven.Hooks{Clock: d.wallClock}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	if d.h, err = host.New(ctx, cfg, host.WithDriver(d.hooks), host.WithLogger(opts.Logger)); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	d.stop = stop
	go func() {
		defer close(d.ran)
		d.runErr = d.h.Run(runCtx)
	}()
	if d.cl, err = d.hooks.Kafka.NewClient(kgo.RecordPartitioner(topictool.Partitioner())); err != nil {
		return nil, err
	}
	d.adm = kadm.NewClient(d.cl)
	d.order = commitOrder(d.hooks.Members)
	if err := d.listTopics(ctx); err != nil {
		return nil, err
	}
	if d.ends, err = newEnds(d.hooks.Kafka, d.inputs()); err != nil {
		return nil, err
	}
	if err := d.waitReady(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// wallClock is the runners' wall clock: the driver's.
func (d *Driver) wallClock() time.Time {
	d.clockMu.Lock()
	defer d.clockMu.Unlock()
	return d.now
}

// WallTime is the wall time the plugins see.
func (d *Driver) WallTime() time.Time { return d.wallClock() }

// AdvanceWallTime moves the wall clock the plugins see forward by dur
// (a negative dur is refused: the host's wall time never goes back).
// Processing-time timers that come due fire at the next commit point, as
// they do in production: call Commit.
func (d *Driver) AdvanceWallTime(dur time.Duration) error {
	if dur < 0 {
		return fmt.Errorf("testdriver: wall time cannot go back (advance by %s)", dur)
	}
	d.clockMu.Lock()
	d.now = d.now.Add(dur)
	d.clockMu.Unlock()
	return nil
}

// listTopics learns every topic of the pipeline (the host created them).
func (d *Driver) listTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	details, err := d.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("testdriver: listing topics: %w", err)
	}
	d.topics = map[string]bool{}
	for _, t := range details.Names() {
		d.topics[t] = true
	}
	return nil
}

// Topics lists the pipeline's topics (inputs, outputs, tables, internal
// topics), sorted.
func (d *Driver) Topics() []string {
	out := make([]string, 0, len(d.topics))
	for t := range d.topics {
		if !strings.HasPrefix(t, "__") {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Pipe writes records to topic (an input of a processor, or a table's
// topic) and returns once the pipeline has processed them: every task has
// run every record of its inputs, and every table has read its topic. What
// they emitted is in the open commit window until Commit.
func (d *Driver) Pipe(topic string, recs ...Record) error {
	if !d.topics[topic] {
		return fmt.Errorf("testdriver: %q is not a topic of the pipeline (its topics: %s)", topic, strings.Join(d.Topics(), ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	krs := make([]*kgo.Record, len(recs))
	now := d.wallClock()
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		if kr.Timestamp.IsZero() {
			kr.Timestamp = now
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[i] = kr
	}
	if err := d.cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return fmt.Errorf("testdriver: writing to %s: %w", topic, err)
	}
	return d.settle(ctx)
}

// Commit runs a commit point on every processor, downstream ones first,
// and again while records committed by one wait to be processed by
// another: when it returns, every record piped in has gone through every
// hop of the pipeline and is committed, each processor's state with it.
// Each commit point runs its due timers (event time, and processing time
// by the driver's wall clock) and on_commit calls, as in production.
func (d *Driver) Commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	for range maxRounds {
		if err := d.settle(ctx); err != nil {
			return err
		}
		runners := d.hooks.Runners()
		for _, i := range d.order {
			if err := runners[i].CommitNow(ctx); err != nil {
				return d.failed(fmt.Errorf("testdriver: commit point: %w", err))
			}
		}
		// A member may have run records an upstream one committed after
		// its own commit point of this round: they wait for the next.
		settled, err := d.settled(ctx)
		if err != nil {
			return err
		}
		for _, r := range d.hooks.Runners() {
			settled = settled && !r.Uncommitted()
		}
		if settled {
			return nil
		}
	}
	return fmt.Errorf("testdriver: the pipeline still had records to process after %d rounds of commit points: does a processor's output feed its own input?", maxRounds)
}

// failed prefers the host's own error, when it stopped, to err.
func (d *Driver) failed(err error) error {
	select {
	case <-d.ran:
		if d.runErr != nil {
			return fmt.Errorf("testdriver: the pipeline stopped: %w", d.runErr)
		}
		return fmt.Errorf("testdriver: the pipeline stopped: %w", err)
	default:
		return err
	}
}

// settle waits until the pipeline has processed every record of its
// inputs and tables.
func (d *Driver) settle(ctx context.Context) error {
	for {
		ok, err := d.settled(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return d.failed(fmt.Errorf("testdriver: the pipeline did not process its records within %s: %s", d.timeout, d.behind()))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// StoppedError is a task stopped by a failure under on_error: fail.
type StoppedError struct {
	Task string
	Err  error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("task %s stopped (on_error: fail): %v", e.Task, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// settled reports whether every task has run every record of its input
// partitions, and every table has read its topic to the end. A stopped
// task is an error.
func (d *Driver) settled(ctx context.Context) (bool, error) {
	select {
	case <-d.ran:
		return false, d.failed(errors.New("testdriver: the pipeline stopped"))
	default:
	}
	runners := d.hooks.Runners()
	// Records produced and not yet acknowledged are not in the offsets
	// listed next (at_least_once produces outside transactions).
	for _, r := range runners {
		if r.Buffered() > 0 {
			return false, nil
		}
	}
	listed, err := d.adm.ListCommittedOffsets(ctx, d.inputs()...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return false, fmt.Errorf("testdriver: listing the inputs' offsets: %w", err)
	}
	stable := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if stable[o.Topic] == nil {
			stable[o.Topic] = map[int32]int64{}
		}
		stable[o.Topic][o.Partition] = o.Offset
	})
	last, err := d.ends.upTo(ctx, stable)
	if err != nil {
		return false, fmt.Errorf("testdriver: reading the inputs: %w", err)
	}
	at := map[string]map[int32]runner.InputProgress{}
	for _, r := range runners {
		for _, p := range r.Progress() {
			if p.Stopped != nil {
				return false, &StoppedError{Task: p.Task.String(), Err: p.Stopped}
			}
			if at[p.Topic] == nil {
				at[p.Topic] = map[int32]runner.InputProgress{}
			}
			at[p.Topic][p.Partition] = p
		}
	}
	var committed kadm.OffsetResponses // read once, if needed
	for topic, ps := range last {
		for part, end := range ps {
			if t := d.hooks.Tables[topic]; t != nil {
				cps, err := t.Checkpoints()
				if err != nil || cps[part] < end {
					return false, nil
				}
				continue
			}
			p, ok := at[topic][part]
			if ok && p.Reached(end) {
				continue
			}
			if !ok || p.Holding || p.Restoring {
				return false, nil
			}
			// Nothing fetched since the task started or its window was
			// aborted: it stands at the group's committed offset.
			if committed == nil {
				if committed, err = d.adm.FetchOffsets(ctx, d.cfg.AppID); err != nil {
					return false, fmt.Errorf("testdriver: reading the committed offsets: %w", err)
				}
			}
			if c, ok := committed.Lookup(topic, part); !ok || c.At < end {
				return false, nil
			}
		}
	}
	// What the tasks produced for the records they ran is acknowledged:
	// under at_least_once it is visible to Output now.
	for _, r := range runners {
		if r.Buffered() > 0 {
			return false, nil
		}
	}
	return true, nil
}

// inputs are the topics the tasks and tables read.
func (d *Driver) inputs() []string {
	var out []string
	for _, m := range d.hooks.Members {
		out = append(out, m.Inputs...)
	}
	for topic := range d.hooks.Tables {
		out = append(out, topic)
	}
	return out
}

// behind describes the input partitions not processed to their end, for
// a timeout's error.
func (d *Driver) behind() string {
	at := map[string]runner.InputProgress{}
	for _, r := range d.hooks.Runners() {
		for _, p := range r.Progress() {
			at[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p
		}
	}
	var out []string
	for topic, ps := range d.ends.data {
		for part, end := range ps {
			name := fmt.Sprintf("%s/%d", topic, part)
			p, ok := at[name]
			switch {
			case d.hooks.Tables[topic] != nil:
			case !ok:
				out = append(out, name+": no task has it")
			case !p.Reached(end):
				out = append(out, fmt.Sprintf("%s: last record at %d, its task fetched to %d (holding %t, restoring %t)", name, end-1, p.Fetched, p.Holding, p.Restoring))
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "every task ran its inputs; a table or a producer lags"
	}
	return strings.Join(out, "; ")
}

// waitReady waits until every partition of every input has its task, its
// stores restored, and the tables are loaded.
func (d *Driver) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var inputs []string
	for _, m := range d.hooks.Members {
		inputs = append(inputs, m.Inputs...)
	}
	for {
		ends, err := d.adm.ListEndOffsets(ctx, inputs...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return d.failed(fmt.Errorf("testdriver: listing the inputs' partitions: %w", err))
		}
		held := map[string]bool{}
		for _, r := range d.hooks.Runners() {
			for _, p := range r.Progress() {
				if !p.Restoring {
					held[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = true
				}
			}
		}
		ready := d.h.Ready()
		ends.Each(func(o kadm.ListedOffset) {
			ready = ready && held[fmt.Sprintf("%s/%d", o.Topic, o.Partition)]
		})
		if ready {
			return nil
		}
		select {
		case <-d.ran:
			return d.failed(errors.New("testdriver: the pipeline stopped while starting"))
		case <-ctx.Done():
			return d.failed(fmt.Errorf("testdriver: the pipeline's tasks did not all start within %s", d.timeout))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Output returns the committed records written to topic since the last
// Output of it (the first: since the start), by partition and offset.
func (d *Driver) Output(topic string) ([]Record, error) {
	if !d.topics[topic] {
		return nil, fmt.Errorf("testdriver: %q is not a topic of the pipeline (its topics: %s)", topic, strings.Join(d.Topics(), ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	ends, err := d.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("testdriver: listing %s's offsets: %w", topic, err)
	}
	from := d.read[topic]
	if from == nil {
		from = map[int32]int64{}
		d.read[topic] = from
	}
	want := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition -> end still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > from[o.Partition] {
			want[o.Partition] = kgo.NewOffset().At(from[o.Partition])
			left[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	// Transaction markers are records too, in the offsets: keeping them
	// (and dropping them below) tells when a partition is read to its end.
	cl, err := d.hooks.Kafka.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("testdriver: reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("testdriver: reading %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			from[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			out = append(out, record(r))
		})
	}
	for p, end := range ends.Offsets()[topic] {
		from[p] = max(from[p], end.At)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}

func record(r *kgo.Record) Record {
	out := Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp,
		Partition: r.Partition, Offset: r.Offset}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	return out
}

// DeadLetters returns the committed dead letters of processor since the
// last call (on_error: dead_letter; each carries the headers naming the
// error, docs/operations.md).
func (d *Driver) DeadLetters(processor string) ([]Record, error) {
	topic, ok := d.hooks.DeadLetters[processor]
	if !ok {
		return nil, fmt.Errorf("testdriver: processor %q has no dead-letter topic (on_error: dead_letter)", processor)
	}
	return d.Output(topic)
}

// Store returns the committed contents of a store of processor, every
// task's, by partition and key: what the plugin reads after the last
// commit point. An entry of a store with a time to live that has expired
// by the task's clock (its stream time as of that commit point, or the
// driver's wall clock) is left out, as the plugin no longer sees it.
func (d *Driver) Store(processor, store string) ([]Entry, error) {
	pc := d.processor(processor)
	if pc == nil {
		return nil, fmt.Errorf("testdriver: no processor %q in the config", processor)
	}
	if !slices.Contains(pc.Stores, store) {
		return nil, fmt.Errorf("testdriver: processor %q has no store %q (its stores: %s)", processor, store, strings.Join(pc.Stores, ", "))
	}
	db := d.hooks.State(processor)
	if db == nil {
		return nil, fmt.Errorf("testdriver: processor %q keeps no state", processor)
	}
	exp, ttl := pc.Expire[store]
	e := state.Expiry{TTL: exp.After.Milliseconds(), Wall: exp.Clock == host.ClockWall}
	stream := map[int32]int64{}
	for _, r := range d.hooks.Runners() {
		for id, tt := range r.TaskTimes(processor) {
			stream[id.Partition] = tt.StreamTime
		}
	}
	wall := d.wallClock().UnixMilli()
	var out []Entry
	err := db.ScanCommitted(processor, store, func(p int32, key, value []byte) error {
		if ttl {
			now := wall
			if !e.Wall {
				var ok bool
				if now, ok = stream[p]; !ok {
					now = -1 << 63 // no stream time: nothing expired
				}
			}
			v, expired, ok := e.Live(value, now)
			if !ok {
				return fmt.Errorf("testdriver: store %q of %s/%d: a value without its expiry stamp", store, processor, p)
			}
			if expired {
				return nil
			}
			value = v
		}
		out = append(out, Entry{Partition: p, Key: bytes.Clone(key), Value: bytes.Clone(value)})
		return nil
	})
	return out, err
}

func (d *Driver) processor(name string) *host.ProcessorConfig {
	for i := range d.cfg.Processors {
		if d.cfg.Processors[i].Name == name {
			return &d.cfg.Processors[i]
		}
	}
	return nil
}

// Close stops the pipeline (without a last commit point's outputs being
// read: what was not committed is dropped with the broker) and removes its
// state. It returns the error the pipeline stopped with, if any.
func (d *Driver) Close() error {
	var errs []error
	d.closeMu.Do(func() {
		if d.stop != nil {
			d.stop()
			<-d.ran
			errs = append(errs, d.runErr)
		}
		if d.cl != nil {
			d.cl.Close()
		}
		if d.ends != nil {
			d.ends.close()
		}
		if d.h != nil {
			errs = append(errs, d.h.Close())
		}
		if d.stateDir != "" {
			errs = append(errs, os.RemoveAll(d.stateDir))
		}
	})
	return errors.Join(errs...)
}

// commitOrder is the members in the order their commit points run in one
// round: a member before those it reads from (downstream first), so that
// no commit window takes part of what an upstream one just committed;
// records an upstream member commits are processed in the next round.
// Members in a cycle keep their config order.
func commitOrder(members []driven.Member) []int {
	writes := map[string][]int{}
	for i, m := range members {
		for _, t := range m.Outputs {
			writes[t] = append(writes[t], i)
		}
	}
	// depth[i] is the length of the longest chain of writers into i.
	depth := make([]int, len(members))
	for range members {
		for i, m := range members {
			for _, in := range m.Inputs {
				for _, w := range writes[in] {
					if w != i {
						depth[i] = max(depth[i], min(depth[w]+1, len(members)))
					}
				}
			}
		}
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return depth[order[a]] > depth[order[b]] })
	return order
}
