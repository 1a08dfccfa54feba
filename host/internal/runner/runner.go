// Package runner moves records between Kafka and processor instances: one
// consumer group member per process, one task per input partition, commit
// points that never pass a record whose effects are not acknowledged.
//
// It knows Kafka and nothing of Wasm: a processor instance is anything with
// Process and Close (the engine's Instance is one).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Processor is one plugin instance serving one task. Process must not keep
// rec or anything it points to after it returns. A Processor is used by one
// goroutine at a time.
type Processor interface {
	Process(ctx context.Context, rec *abi.Record) error
	Close(ctx context.Context) error
}

// Sink receives a processor's emits. rec aliases plugin memory: Emit copies
// what it keeps before returning.
type Sink interface {
	Emit(output int, rec *abi.Record) error
}

// Plugin makes a Processor for a task. st is the task's state, nil for a
// processor without stores; the processor reads and writes it during
// Process only.
type Plugin interface {
	Instantiate(ctx context.Context, task TaskID, sink Sink, st *state.Task) (Processor, error)
}

// TaskID names a task: a processor and one of its input partitions.
type TaskID struct {
	Processor string
	Topic     string
	Partition int32
}

func (t TaskID) String() string {
	return t.Processor + "/" + t.Topic + "/" + strconv.Itoa(int(t.Partition))
}

// ProcessorSpec is one processor as the runner sees it.
type ProcessorSpec struct {
	Name    string
	Inputs  []string
	Outputs []string // output index -> topic
	// OnError is "fail", "skip" or "dead_letter".
	OnError         string
	DeadLetterTopic string
	// Plugin is the initial version, named Version (default "initial");
	// Swap changes it while the runner runs.
	Plugin  Plugin
	Version string
	// Stores are the processor's state stores; Changelogs[i] is the
	// changelog topic of Stores[i]. A processor with stores has one input.
	Stores     []string
	Changelogs []string
}

// Options configure a Runner.
type Options struct {
	AppID          string
	Brokers        []string
	ClientID       string
	CommitInterval time.Duration
	CommitRecords  int
	StartOffset    string // "earliest" or "latest"
	SessionTimeout time.Duration
	// GroupProtocol is ProtocolAuto (default), ProtocolConsumer or
	// ProtocolClassic.
	GroupProtocol string
	// ExactlyOnce makes every commit point one Kafka transaction holding
	// the outputs, changelog records, dead letters and input offsets of
	// the work since the last one (I2). TransactionalID must then be
	// unique per live process.
	ExactlyOnce        bool
	TransactionalID    string
	TransactionTimeout time.Duration
	Processors         []ProcessorSpec
	// State holds the stores of stateful processors; required if any
	// processor has stores.
	State *state.DB
	// Restore configures changelog restores (Brokers is filled in).
	Restore restore.Config
	// MaxRestores bounds the restores running at once (the others wait
	// for a slot). Default DefaultMaxRestores.
	MaxRestores int
	// OnRestoreProgress, if set, sees every restore's progress (for
	// progress bars); it must return quickly.
	OnRestoreProgress func(restore.Progress)
	Logger            *slog.Logger
	// MaxPoll bounds the records of one poll. Default DefaultMaxPoll.
	MaxPoll int
	// OnRollback, if set, is told of every automatic rollback (a swapped
	// version that failed its Canary), on its own goroutine.
	OnRollback func(RollbackEvent)
	// ExtraOpts are appended to the client options (tests use them).
	ExtraOpts []kgo.Opt
}

// Runner runs the processors of one process as one consumer group member.
type Runner struct {
	opts  Options
	log   *slog.Logger
	cl    *kgo.Client
	sess  *kgo.GroupTransactSession // exactly_once only; cl is its client
	inTxn bool                      // a transaction is open (exactly_once)
	// aborts counts consecutive aborted transactions whose produce failed;
	// past maxProduceAborts the runner gives up instead of spinning.
	produceAborts int
	// rebalanceWanted is set (from a kgo goroutine) when a rebalance waits
	// for this member; the loop then ends its transaction before allowing it.
	rebalanceWanted atomic.Bool
	// callbackBlocked is set while a group callback waits for
	// AllowRebalance (set by the blocked signal, cleared when a callback
	// runs); endTxn's watchdog reads it.
	callbackBlocked atomic.Bool
	byTopic         map[string]*procState // input topic -> processor
	procs           []*procState

	// mu guards everything the poll loop and the group callbacks share:
	// tasks, the commit bookkeeping, the transaction state. The loop holds
	// it except while it polls; callbacks take it.
	mu sync.Mutex
	// closing is set when the client is being closed; callbacks then do
	// nothing (the tasks are already closed).
	closing bool
	tasks   map[TaskID]*task
	// protocol is the group protocol in use (ProtocolConsumer or
	// ProtocolClassic).
	protocol string

	// cbMu guards ending and queued: group callbacks that arrive while a
	// transaction ends are queued instead of waiting for r.mu (endTxn).
	cbMu   sync.Mutex
	ending bool
	queued []callback

	restorer     *restore.Restorer // nil without stateful processors
	restoreSlots chan struct{}     // one per running restore (MaxRestores)
	progress     restoreProgress
	wake         chan struct{} // a restore finished; buffered 1

	produceErr atomic.Pointer[error] // first produce failure since the last commit point
	// broken is set when outputs failed: the work since the last commit
	// point can never be committed by this runner (I1). Run stops; a new
	// runner restarts from the committed offsets.
	broken      error
	sinceCommit int
	lastCommit  time.Time
	commits     commitSamples // durations of commit points that had work
}

type procState struct {
	spec       ProcessorSpec
	inputIndex map[string]uint32
	Stats      *Stats
	// active is the version new tasks start with and every task moves
	// to (loop only).
	active *version
	stalls stallSamples
	// gaps are the same measure across commit points without a swap:
	// the pause every commit point makes, the baseline of stalls.
	gaps stallSamples

	// mu guards what Swap and ActiveVersion share with the loop.
	mu           sync.Mutex
	want         *swapRequest // a Swap not yet taken in by the loop
	activeID     string
	taskVersions map[TaskID]string // version ID by task
	// lag is each task's consumer lag as of its latest fetch: the end of
	// its partition (the last stable offset: the host reads committed)
	// minus the offset of its next record.
	lag map[TaskID]int64
}

// New validates opts and connects a client. It does not join the group
// until Run. ctx bounds the brokers' answer on the group protocols they
// support.
func New(ctx context.Context, opts Options) (*Runner, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxPoll <= 0 {
		opts.MaxPoll = DefaultMaxPoll
	}
	if opts.MaxRestores <= 0 {
		opts.MaxRestores = DefaultMaxRestores
	}
	r := &Runner{
		opts:    opts,
		log:     opts.Logger,
		byTopic: map[string]*procState{},
		tasks:   map[TaskID]*task{},
		wake:    make(chan struct{}, 1),

		restoreSlots: make(chan struct{}, opts.MaxRestores),
	}
	var topics []string
	for _, spec := range opts.Processors {
		ps := &procState{spec: spec, inputIndex: map[string]uint32{}, Stats: newStats(),
			taskVersions: map[TaskID]string{}, lag: map[TaskID]int64{}}
		if spec.Version == "" {
			spec.Version = "initial"
			ps.spec.Version = spec.Version
		}
		ps.active = newVersion(Version{ID: spec.Version, Plugin: spec.Plugin}, nil, Canary{})
		ps.activeID = spec.Version
		for i, in := range spec.Inputs {
			if other, dup := r.byTopic[in]; dup {
				return nil, fmt.Errorf("runner: topic %q is an input of both %q and %q", in, other.spec.Name, spec.Name)
			}
			r.byTopic[in] = ps
			ps.inputIndex[in] = uint32(i)
			topics = append(topics, in)
		}
		r.procs = append(r.procs, ps)
	}
	// The restorer exists before the client: the client may join the
	// group, and a task start its restore, as soon as it is created.
	for _, ps := range r.procs {
		if len(ps.spec.Stores) == 0 {
			continue
		}
		if opts.State == nil {
			return nil, fmt.Errorf("runner: processor %q has stores but no state database was given", ps.spec.Name)
		}
		if r.restorer == nil {
			rc := opts.Restore
			rc.Brokers = opts.Brokers
			if rc.Logger == nil {
				rc.Logger = opts.Logger
			}
			user := rc.Progress
			rc.Progress = func(p restore.Progress) {
				r.progress.update(p)
				if user != nil {
					user(p)
				}
				if opts.OnRestoreProgress != nil {
					opts.OnRestoreProgress(p)
				}
			}
			restorer, err := restore.New(rc)
			if err != nil {
				return nil, fmt.Errorf("runner: %w", err)
			}
			r.restorer = restorer
		}
	}
	start := kgo.NewOffset().AtStart()
	if opts.StartOffset == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ClientID(opts.ClientID),
		kgo.ConsumerGroup(opts.AppID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		// Rebalance callbacks run only between polls, when every fetched
		// record has been processed: the host never holds a record across
		// a rebalance (invariant I5).
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
		kgo.RecordPartitioner(outputPartitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerLinger(5 * time.Millisecond),
		// A partition resumed after its restore joins the next fetch only
		// when the one in flight returns; the default 5 s wait would delay
		// every task start by up to that.
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithLogger(kgoLogger{opts.Logger}),
	}
	if opts.SessionTimeout > 0 {
		kopts = append(kopts, kgo.SessionTimeout(opts.SessionTimeout))
	}
	gopts, protocol, err := groupOpts(ctx, opts.Brokers, opts.GroupProtocol, opts.ExtraOpts)
	if err != nil {
		if r.restorer != nil {
			r.restorer.Close()
		}
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.protocol = protocol
	kopts = append(kopts, gopts...)
	txnTimeout := opts.TransactionTimeout
	if opts.ExactlyOnce && protocol == ProtocolClassic && opts.SessionTimeout > 0 && txnTimeout < opts.SessionTimeout+10*time.Second {
		// A classic rebalance is a barrier that can wait a whole session
		// timeout for a dead member, and a transaction open when it starts
		// can only end after it (End needs a heartbeat): it must outlive
		// the wait, or the broker aborts it and fences the producer.
		txnTimeout = opts.SessionTimeout + 10*time.Second
		opts.Logger.Warn("classic group protocol: transaction timeout raised above the session timeout",
			"transaction_timeout", txnTimeout, "session_timeout", opts.SessionTimeout)
	}
	opts.Logger.Info("consumer group protocol", "protocol", protocol)
	var cl *kgo.Client
	if opts.ExactlyOnce {
		if opts.TransactionalID == "" {
			return nil, errors.New("runner: exactly_once needs a transactional id")
		}
		kopts = append(kopts,
			kgo.TransactionalID(opts.TransactionalID),
			kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
				r.callbackBlocked.Store(true)
				r.rebalanceWanted.Store(true)
			}),
		)
		if txnTimeout > 0 {
			kopts = append(kopts, kgo.TransactionTimeout(txnTimeout))
		}
		kopts = append(kopts, opts.ExtraOpts...)
		r.sess, err = kgo.NewGroupTransactSession(kopts...)
		if err == nil {
			cl = r.sess.Client()
		}
	} else {
		kopts = append(kopts, opts.ExtraOpts...)
		cl, err = kgo.NewClient(kopts...)
	}
	if err != nil {
		if r.restorer != nil {
			r.restorer.Close()
		}
		return nil, fmt.Errorf("runner: kafka client: %w", err)
	}
	r.cl = cl
	return r, nil
}

// Protocol is the consumer group protocol in use: ProtocolConsumer or
// ProtocolClassic.
func (r *Runner) Protocol() string { return r.protocol }

// Restoring reports how many tasks are restoring their stores. A process
// is ready when none is. Safe for concurrent use.
func (r *Runner) Restoring() int { return r.progress.active() }

// RestoreProgress returns the latest progress of every restore this runner
// ran, by task and store. Safe for concurrent use.
func (r *Runner) RestoreProgress() []restore.Progress { return r.progress.snapshot() }

// CommitLatencies returns the durations of the latest commit points that
// had work to commit (at most 4096), how many there were in all, and their
// total duration. Safe for concurrent use.
func (r *Runner) CommitLatencies() (latest []time.Duration, count int, total time.Duration) {
	return r.commits.snapshot()
}

// CommitHistogram returns the durations of every commit point that had
// work, as counts per CommitBounds bucket (the last: above the last bound)
// and their total. Safe for concurrent use.
func (r *Runner) CommitHistogram() (counts []uint64, total time.Duration) {
	return r.commits.histogram()
}

// Stats returns the counters of the named processor, or nil.
func (r *Runner) Stats(processor string) *Stats {
	for _, p := range r.procs {
		if p.spec.Name == processor {
			return p.Stats
		}
	}
	return nil
}

// commitTimeout bounds one commit point (flush, offset commit or
// transaction end).
const commitTimeout = 30 * time.Second

// DefaultMaxRestores is how many task restores run at once by default.
const DefaultMaxRestores = 4

// DefaultMaxPoll bounds the records taken in one poll: the work done
// between two chances to rebalance, since rebalances wait for the poll's
// records to be processed.
const DefaultMaxPoll = 1000

// Run consumes, processes and commits until ctx is canceled or a fatal
// error happens. On cancel it finishes the record in flight, commits what
// was processed and leaves the group. A nil return means a clean stop.
func (r *Runner) Run(ctx context.Context) (err error) {
	defer func() {
		cerr := r.shutdown()
		if err == nil {
			err = cerr
		}
	}()
	r.mu.Lock()
	r.lastCommit = time.Now()
	r.mu.Unlock()
	for {
		done, err := r.iterate(ctx)
		if done || err != nil {
			return err
		}
	}
}

// iterate is one poll and what follows it. Everything but the poll itself
// runs under r.mu, which the group callbacks also take: BlockRebalanceOnPoll
// holds callbacks back only until AllowRebalance, so without the lock a
// callback could run between AllowRebalance and the next poll, alongside
// the loop's own bookkeeping.
func (r *Runner) iterate(ctx context.Context) (done bool, err error) {
	r.mu.Lock()
	if ctx.Err() != nil {
		r.mu.Unlock()
		return true, nil
	}
	r.finishRestores()
	r.advanceSwaps(ctx)
	pollCtx, cancel := r.pollContext(ctx)
	r.mu.Unlock()

	fetches := r.cl.PollRecords(pollCtx, r.opts.MaxPoll)
	cancel()
	if fetches.IsClientClosed() {
		return true, nil
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var fatal error
	fetches.EachError(func(topic string, p int32, ferr error) {
		if errors.Is(ferr, context.DeadlineExceeded) || errors.Is(ferr, context.Canceled) {
			return
		}
		r.log.Warn("fetch error", "topic", topic, "partition", p, "err", ferr)
	})
	if err := r.beginIfNeeded(fetches); err != nil {
		fatal = err
	} else if err := r.processFetches(ctx, fetches); err != nil {
		fatal = err
	}
	// A waiting rebalance is let in with no open transaction, so it
	// does not abort processed work.
	if fatal == nil && (r.commitDue() || r.rebalanceWanted.Swap(false)) {
		// A stop (ctx canceled) must not cut a commit point in half: it
		// gets its own bounded context.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		start := time.Now()
		fatal = r.commit(cctx)
		r.commits.add(time.Since(start))
		if fatal == nil {
			r.advanceSwaps(cctx)
		}
		cancel()
	}
	r.cl.AllowRebalance()
	return false, fatal
}

// pollContext bounds a poll by the next commit point while processed
// records wait for their commit, so an idle input does not hold offsets back.
//
// A finished restore also ends the poll (through r.wake): its partition
// is paused until the loop resumes it, so with every partition restoring
// the poll would otherwise wait forever.
func (r *Runner) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var pctx context.Context
	var cancel context.CancelFunc
	if r.sinceCommit == 0 {
		pctx, cancel = context.WithCancel(ctx)
	} else {
		wait := r.opts.CommitInterval - time.Since(r.lastCommit)
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		pctx, cancel = context.WithTimeout(ctx, wait)
	}
	// Tasks can be assigned, and their restores or a swap's instances
	// finish, during this very poll: listen even when nothing is pending.
	stop := make(chan struct{})
	go func() {
		select {
		case <-r.wake:
			cancel()
		case <-stop:
		case <-pctx.Done():
		}
	}()
	return pctx, func() { close(stop); cancel() }
}

func (r *Runner) commitDue() bool {
	if r.sinceCommit == 0 {
		return false
	}
	return r.sinceCommit >= r.opts.CommitRecords || time.Since(r.lastCommit) >= r.opts.CommitInterval
}

// processFetches runs every task's share of the poll, tasks in parallel.
func (r *Runner) processFetches(ctx context.Context, fetches kgo.Fetches) error {
	type work struct {
		t    *task
		recs []*kgo.Record
	}
	var batch []work
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			if t := r.tasks[r.taskID(ftp.Topic, ftp.Partition)]; t != nil {
				t.setLag(ftp.LastStableOffset, -1)
			}
			return
		}
		t, err := r.taskFor(ctx, ftp.Topic, ftp.Partition)
		if err != nil {
			r.log.Error("task unavailable; its records are not processed", "topic", ftp.Topic, "partition", ftp.Partition, "err", err)
			return
		}
		if ftp.LastStableOffset >= 0 {
			t.end = ftp.LastStableOffset
		}
		batch = append(batch, work{t, ftp.Records})
	})
	if len(batch) == 0 {
		return nil
	}
	errs := make([]error, len(batch))
	processed := make([]int, len(batch))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, w := range batch {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			processed[i], errs[i] = w.t.processBatch(ctx, w.recs)
		}()
		w.t.fetchEnd = w.recs[len(w.recs)-1].Offset + 1
	}
	wg.Wait()
	for i, n := range processed {
		r.sinceCommit += n
		batch[i].t.setLag(-1, batch[i].t.fetchEnd)
		// A task that stopped before the end of its records (failed under
		// on_error: fail, or shutting down) must not have the rest counted
		// as consumed: fetch them again from where it stopped.
		if t := batch[i].t; t.stoppedAt >= 0 {
			r.rewind(t, t.stoppedAt)
			t.stoppedAt = -1
		}
	}
	return errors.Join(errs...)
}

// taskID names the task of an input partition (an empty processor for a
// topic no processor reads).
func (r *Runner) taskID(topic string, partition int32) TaskID {
	ps := r.byTopic[topic]
	if ps == nil {
		return TaskID{}
	}
	return TaskID{Processor: ps.spec.Name, Topic: topic, Partition: partition}
}

// Lag returns the consumer lag of every task of the named processor, in
// records, as of each task's latest fetch. Safe for concurrent use.
func (r *Runner) Lag(processor string) map[TaskID]int64 {
	for _, ps := range r.procs {
		if ps.spec.Name == processor {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			out := make(map[TaskID]int64, len(ps.lag))
			for id, l := range ps.lag {
				out[id] = l
			}
			return out
		}
	}
	return nil
}

// taskFor returns the task of an input partition, creating it if the
// assignment callback has not (records can arrive for a partition whose
// instance failed to start earlier).
func (r *Runner) taskFor(ctx context.Context, topic string, partition int32) (*task, error) {
	ps := r.byTopic[topic]
	if ps == nil {
		return nil, fmt.Errorf("topic %q is no processor's input", topic)
	}
	id := TaskID{Processor: ps.spec.Name, Topic: topic, Partition: partition}
	if t := r.tasks[id]; t != nil {
		return t, nil
	}
	t, err := newTask(ctx, r, ps, id)
	if err != nil {
		return nil, err
	}
	r.tasks[id] = t
	return t, nil
}

func (r *Runner) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	if r.deferCallback("assigned", assigned) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	r.assign(ctx, assigned)
}

// assign starts the tasks of newly assigned partitions; the caller holds r.mu.
func (r *Runner) assign(ctx context.Context, assigned map[string][]int32) {
	for topic, parts := range assigned {
		for _, p := range parts {
			if _, err := r.taskFor(ctx, topic, p); err != nil {
				r.log.Error("starting task", "topic", topic, "partition", p, "err", err)
			}
		}
	}
	r.log.Info("partitions assigned", "partitions", assigned)
}

// onRevoked ends the revoked tasks' work before their partitions are
// released (I5). Because of BlockRebalanceOnPoll this runs between polls,
// when nothing is in flight. Under at_least_once everything processed is
// flushed and committed. Under exactly_once the loop has already committed
// if it saw the rebalance coming; otherwise the open transaction is
// aborted by the session and every task rewinds to its committed offsets.
func (r *Runner) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if r.deferCallback("revoked", revoked) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	if r.sess != nil {
		r.closeTasks(ctx, revoked)
		r.log.Info("partitions revoked", "partitions", revoked)
		return
	}
	if err := r.commit(ctx); err != nil {
		// The new owner re-reads from the last committed offset: duplicates
		// are possible under at-least-once, loss is not.
		r.log.Error("commit on revoke failed; the records since the last commit will be processed again", "err", err)
	}
	r.closeTasks(ctx, revoked)
	r.log.Info("partitions revoked", "partitions", revoked)
}

// onLost drops the tasks without committing: another member may already own
// the partitions, so nothing of ours may be committed for them.
func (r *Runner) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	if r.deferCallback("lost", lost) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	r.closeTasks(ctx, lost)
	r.sinceCommit = 0
	r.log.Warn("partitions lost; uncommitted work for them is dropped", "partitions", lost)
}

func (r *Runner) closeTasks(ctx context.Context, parts map[string][]int32) {
	for topic, ps := range parts {
		proc := r.byTopic[topic]
		if proc == nil {
			continue
		}
		for _, p := range ps {
			id := TaskID{Processor: proc.spec.Name, Topic: topic, Partition: p}
			if t := r.tasks[id]; t != nil {
				t.close(ctx)
				delete(r.tasks, id)
			}
		}
	}
}

// commit is a commit point: wait until every produced record is
// acknowledged, then commit the input offsets of the processed records. An
// offset is never committed before the outputs of the records below it are
// acknowledged (I1).
func (r *Runner) commit(ctx context.Context) error {
	if r.broken != nil {
		return r.broken
	}
	if r.sess != nil {
		return r.commitTxn(ctx)
	}
	if failed := r.failedCanaries(); len(failed) > 0 {
		return r.rollBackALO(ctx, failed)
	}
	for _, t := range r.tasks {
		t.produceChangelog()
	}
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing outputs: %w", err)
	}
	if perr := r.produceErr.Load(); perr != nil {
		r.broken = fmt.Errorf("producing outputs failed, offsets not committed past the failed records: %w", *perr)
		return r.broken
	}
	// Outputs and changelog records are acknowledged: the state can be
	// applied, and only then the input offsets move (a crash in between
	// reprocesses records on top of applied state: at-least-once).
	for _, t := range r.tasks {
		if err := t.applyState(); err != nil {
			r.broken = err
			return err
		}
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for id, t := range r.tasks {
		if !t.dirty {
			continue
		}
		if offsets[id.Topic] == nil {
			offsets[id.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[id.Topic][id.Partition] = kgo.EpochOffset{Epoch: t.epoch, Offset: t.next}
	}
	if len(offsets) > 0 {
		var cerr error
		r.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsgCommitReq, resp *kmsgCommitResp, err error) {
			cerr = commitError(resp, err)
		})
		if cerr != nil {
			if retriableCommitErr(cerr) {
				// The group moved on (a rebalance, a newer member epoch):
				// the offsets stay uncommitted and go with the next commit
				// point, or the next owner processes the records again
				// (at-least-once). The outputs are already acknowledged.
				r.log.Info("offset commit refused by the group; retrying at the next commit point", "err", cerr)
				r.sinceCommit = 0
				r.lastCommit = time.Now()
				return nil
			}
			return fmt.Errorf("committing offsets: %w", cerr)
		}
		for _, t := range r.tasks {
			t.dirty = false
		}
		for _, p := range r.procs {
			p.Stats.Commits.Add(1)
		}
	}
	for _, t := range r.tasks {
		t.windowStart = -1
	}
	r.sinceCommit = 0
	r.lastCommit = time.Now()
	return nil
}

// rollBackALO is the at_least_once commit point at which a swapped version
// failed its canary. What it produced cannot be taken back (its outputs
// stand: at-least-once), but nothing since the last commit point is
// committed: every task drops its pending state and rewinds to the first
// record it processed since then, and the previous version processes those
// records again, the failed ones included.
func (r *Runner) rollBackALO(ctx context.Context, failed []*task) error {
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing outputs: %w", err)
	}
	for _, t := range r.tasks {
		if t.windowStart < 0 {
			continue
		}
		if t.st != nil {
			t.st.Discard()
		}
		r.rewind(t, t.windowStart)
		t.windowStart = -1
		t.next = -1
		t.dirty = false
	}
	r.sinceCommit = 0
	r.lastCommit = time.Now()
	r.rollBack(ctx, failed)
	return nil
}

// rewind makes the consumer fetch a partition again from offset, and
// (under exactly_once) makes that the offset the next transaction commits.
// Only the poll loop calls it, before AllowRebalance.
func (r *Runner) rewind(t *task, offset int64) {
	r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		t.id.Topic: {t.id.Partition: {Epoch: -1, Offset: offset}},
	})
}

func (r *Runner) produce(rec *kgo.Record) {
	r.cl.Produce(context.Background(), rec, r.onProduced)
}

func (r *Runner) onProduced(rec *kgo.Record, err error) {
	if err != nil {
		werr := fmt.Errorf("topic %s: %w", rec.Topic, err)
		r.produceErr.CompareAndSwap(nil, &werr)
	}
}

// shutdown commits what was processed, closes every task and leaves the group.
func (r *Runner) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	defer func() {
		r.closing = true
		r.mu.Unlock()
		r.cl.Close() // leaves the group; callbacks it triggers see closing
		if r.restorer != nil {
			r.restorer.Close()
		}
	}()
	var err error
	if (r.sinceCommit > 0 || r.inTxn) && r.broken == nil {
		if err = r.commit(ctx); err != nil {
			err = fmt.Errorf("final commit: %w", err)
		}
	}
	for id, t := range r.tasks {
		t.close(ctx)
		delete(r.tasks, id)
	}
	return err
}

// outputPartitioner honours an explicit partition on an emitted record and
// otherwise partitions like Kafka's default (murmur2 of the key; sticky for
// null keys). Records the host produces carry Partition -1 unless the plugin
// chose one.
type outputPartitioner struct{ byKey kgo.Partitioner }

func (p outputPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &outputTopicPartitioner{byKey: p.byKey.ForTopic(topic)}
}

type outputTopicPartitioner struct{ byKey kgo.TopicPartitioner }

func (p *outputTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.byKey.RequiresConsistency(r)
}

func (p *outputTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		if int(r.Partition) < n {
			return int(r.Partition)
		}
		return int(r.Partition) % n
	}
	return p.byKey.Partition(r, n)
}

func (p *outputTopicPartitioner) OnNewBatch() {
	if nb, ok := p.byKey.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
