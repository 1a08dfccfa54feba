package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/copartition"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Processor is one plugin instance serving one task. Process must not keep
// rec or anything it points to after it returns. A Processor is used by one
// goroutine at a time. One that is also a BatchProcessor gets the task's
// records in batches.
type Processor interface {
	Process(ctx context.Context, rec *abi.Record) error
	Close(ctx context.Context) error
}

// Call is one call into a processor instance: a record, or (later) a
// trigger.
type Call struct {
	Record  *abi.Record
	Trigger *abi.Trigger
}

// CallHooks are the task's side of a batch of calls (calls.go): where each
// call begins (before its state, time and sink calls) and ends.
type CallHooks interface {
	// Begin is called once per call that runs, before anything it does.
	Begin(k int)
	// End is called once per call that ran, after its emits reached the
	// Sink: err is nil when it succeeded. true runs no call after k.
	End(k int, err error) (stop bool)
}

// BatchProcessor is a Processor that takes many calls at once, each with
// the outcome, limits and time budget it would have alone (the engine's
// Instance.ProcessBatch). It returns how many calls ended through Begin
// and End; the rest did not run and are handed again. From yieldAt on it
// returns once the call in progress ends; the first call always runs.
type BatchProcessor interface {
	Processor
	ProcessBatch(ctx context.Context, calls []Call, h CallHooks, yieldAt time.Time) int
}

// Sink receives a processor's emits. rec aliases plugin memory: Emit copies
// what it keeps before returning.
type Sink interface {
	Emit(output int, rec *abi.Record) error
}

// Plugin is one version of a processor's plugin: it makes a Processor for
// a task. Close releases what the version holds (its compiled module);
// the version registry calls it once, when the version is in no role and
// no task runs it (see package versions). Processors made before keep
// working until they are closed.
type Plugin interface {
	Instantiate(ctx context.Context, task TaskID, env Env) (Processor, error)
	Close(ctx context.Context) error
}

// Env is what a task gives the instances of its processor.
type Env struct {
	// Sink receives the instance's emits.
	Sink Sink
	// State is the task's state, nil for a processor without stores; the
	// instance reads and writes it during its calls only. Its last store
	// is the task's time store when the spec says TimeStore: not the
	// plugin's (Plugin implementations bind only the user's stores).
	State *state.Task
	// Overlay, if set, is what the instance's state calls go to instead
	// of State: a shadow's overlay over it (shadow.go). State still serves
	// the task tables, which are read-only.
	Overlay StateView
	// Time serves the time imports (ABI.md section 8) during the
	// instance's calls: the task's clocks, timers and commit marks.
	Time Time
	// Memory is the task's account, charged the linear memory of every
	// instance made for the task (its current one, a newer version's
	// made in the background, the previous version's kept for a canary)
	// until the instance closes; nil charges nothing.
	Memory *account.Account
	// Ahead is set for an instance made ahead of its use (a new version's,
	// for a switch): when Memory cannot take its initial memory,
	// Instantiate fails. Otherwise (a task's start) the instance is
	// returned unstarted and each record tries to start it, failing
	// (FailureMemoryLimit) while the budget has no room.
	Ahead bool
}

// Time is a task's clocks, timers and commit marks as the instance's calls
// see them (ABI.md section 8). Timer changes and marks are staged with the
// call's state writes: kept if the call succeeds, dropped if it fails. Keys
// alias the caller's memory: implementations copy what they keep.
type Time interface {
	// Now is the task's stream time (abi.NoTime if it has none) and the
	// wall time of the current call, in ms since the Unix epoch.
	Now() (stream, wall int64)
	// SetTimer stages the timer (kind, ts, key); added is false when it
	// was already pending. ErrTimerLimit when the task has its limit of
	// pending timers; ErrNoTimers when the task keeps no timers.
	SetTimer(kind abi.TimerKind, ts int64, key []byte) (added bool, err error)
	// CancelTimer stages the removal of a pending timer; removed is false
	// when there was none.
	CancelTimer(kind abi.TimerKind, ts int64, key []byte) (removed bool, err error)
	// Mark asks for one commit-point call for key in this commit window,
	// remembering ts (the last marking call's); added is false when the
	// key was already marked. ErrMarkLimit when the window has its limit
	// of marked keys.
	Mark(key []byte, ts int64) (added bool, err error)
}

// TimeProcessor is a Processor whose module takes timer firings and
// commit-point calls (ABI.md section 8.3). A callback fails like a record:
// its emits and staged changes are dropped and the processor's on_error
// policy applies.
type TimeProcessor interface {
	Processor
	// TimeCallbacks reports which callbacks the module exports.
	TimeCallbacks() (onTimer, onCommit bool)
	OnTimer(ctx context.Context, trig *abi.Trigger) error
	OnCommit(ctx context.Context, trig *abi.Trigger) error
}

// Migrator is a Processor whose module may migrate a task's state from
// the layout of another version (ABI.md section 13). A migration fails
// like a record (a *KindError); the task stages its state writes around
// it and keeps them only when it succeeds.
type Migrator interface {
	Processor
	// Migrates reports whether the module exports the migration.
	Migrates() bool
	// Migrate migrates the task's stores, last written by version from.
	Migrate(ctx context.Context, from string) error
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
	// Internal[i] says Outputs[i] is an internal topic of the app (a
	// repartition topic): only the app's own processors read it, so its
	// records carry no HeaderVersion (on the word count's repartition
	// hop the header was ~38 of a record's ~58 bytes; RATIONALE.md).
	Internal []bool
	// Latest[i] says Outputs[i] takes only the last record emitted for each
	// key in a commit window, produced at its commit point (latest.go);
	// nil: every output takes every record.
	Latest []bool
	// OnError is what a failed record does to its task.
	OnError         ErrorPolicy
	DeadLetterTopic string
	// Plugin is the initial version, named Version (default "initial"),
	// unless Options.Versions already has the processor; proposals to
	// the registry change it while the runner runs.
	Plugin  Plugin
	Version string
	// Stores are the processor's state stores; Changelogs[i] is the
	// changelog topic of Stores[i]. A processor with stores and several
	// inputs is co-partitioned: its task p reads partition p of every
	// input (copartition.go); the inputs have equal partition counts.
	Stores     []string
	Changelogs []string
	// StateDisk bounds the bytes each task's stores (its time store
	// included) hold on disk (state.Task.SetDiskBudget); 0: no bound.
	StateDisk int64
	// State is the database of the processor's stores; nil: Options.State.
	// The host gives each stateful processor a database of its own, so a
	// disk failure of one (state.WriteError) stops no other (RATIONALE.md,
	// "State").
	State *state.DB
	// StateCache is each task's record cache of committed values, in
	// bytes (state.Task.SetCacheBudget): 0 is the state database's
	// default, negative none.
	StateCache int
	// WindowBytes is each task's budget of bytes held per commit window
	// (host/internal/account): at it the commit point comes forward; a
	// call that would take the task past twice it fails with ELIMIT.
	// 0: DefaultWindowBytes.
	WindowBytes int64
	// TimeStore says the last of Stores is the tasks' time store: their
	// pending timers and stream time, kept, changelogged and restored
	// like any store but never visible to the plugin.
	TimeStore bool
	// TimeLimits bound the tasks' timers and commit marks; zero fields
	// take the ABI's defaults.
	TimeLimits TimeLimits
	// Expiry gives stores (by name) a time to live (abi/ABI.md section
	// 8.7); needs TimeStore.
	Expiry map[string]state.Expiry
	// TaskTables are the processor's task tables: inputs whose records the
	// runner writes into a store of the task (the latest value per key, a
	// null value deleting it) instead of handing them to the plugin, so
	// task p holds partition p of each. A task table's changelog is its
	// topic (Changelogs[Store] == Topic): nothing is produced for it, its
	// checkpoint is the topic offset after the last record written, and it
	// is restored from the topic up to the group's committed offset.
	TaskTables []TaskTable
	// EarliestInputs are the inputs the app itself writes (repartition
	// topics): a partition of one with no committed offset starts at its
	// earliest offset whatever Options.StartOffset says, so the reader
	// misses nothing its writer wrote before the reader first joined.
	EarliestInputs []string
}

// TaskTable is a task table: an input (Topic) written into Stores[Store].
type TaskTable struct {
	Topic string
	Store int
}

// TimeLimits bound what a task's plugin can ask of time (ABI.md 8.6).
type TimeLimits struct {
	// Timers is the most timers one task may have pending.
	Timers int
	// FiringsPerCommit is the most timers fired in one commit window; the
	// due timers beyond it wait, in order, for the next window.
	FiringsPerCommit int
	// CommitMarks is the most keys one commit window may mark.
	CommitMarks int
}

func (l TimeLimits) withDefaults() TimeLimits {
	if l.Timers <= 0 {
		l.Timers = abi.DefaultMaxTimers
	}
	if l.FiringsPerCommit <= 0 {
		l.FiringsPerCommit = abi.DefaultMaxFiringsPerCommit
	}
	if l.CommitMarks <= 0 {
		l.CommitMarks = abi.DefaultMaxCommitMarks
	}
	return l
}

// Options configure a Runner.
type Options struct {
	AppID string
	// Kafka is what every client of the runner starts from (brokers,
	// client id, security); its Logger defaults to Logger.
	Kafka          kclient.Config
	CommitInterval time.Duration
	CommitRecords  int
	StartOffset    StartOffset
	SessionTimeout time.Duration
	GroupProtocol  GroupProtocol
	// Guarantee ExactlyOnce makes every commit point one Kafka transaction
	// holding the outputs, changelog records, dead letters and input
	// offsets of the work since the last one (I2). TransactionalID must
	// then be unique per live process.
	Guarantee          Guarantee
	TransactionalID    string
	TransactionTimeout time.Duration
	Processors         []ProcessorSpec
	// State holds the stores of the stateful processors whose spec names
	// no database of its own; required if any of them has stores.
	State *state.DB
	// Restore configures changelog restores (its Kafka is Options.Kafka
	// unless it names brokers of its own).
	Restore restore.Config
	// MaxRestores bounds the restores running at once (the others wait
	// for a slot). Default DefaultMaxRestores.
	MaxRestores int
	// StandbyReplicas is how many other members keep a warm copy of each
	// stateful task (standby.go); 0: none. StandbyInterval is how often a
	// member brings its copies up to date; default DefaultStandbyInterval.
	StandbyReplicas int
	StandbyInterval time.Duration
	// OnRestoreProgress, if set, sees every restore's progress (for
	// progress bars); it must return quickly.
	OnRestoreProgress func(restore.Progress)
	Logger            *slog.Logger
	// MaxPoll bounds the records of one poll. Default 0: everything the
	// client has buffered (pollLimit).
	MaxPoll int
	// FetchMaxBytes and FetchMaxPartitionBytes bound one fetch response
	// and its share of one partition, in bytes (0: franz-go's defaults).
	FetchMaxBytes          int32
	FetchMaxPartitionBytes int32
	// Stats, if set, holds the counters each processor continues (by
	// name): a host that replaces a failed runner keeps its counters
	// monotonic. Processors without an entry start at zero.
	Stats map[string]*Stats
	// Versions is the registry of the processors' versions, shared with
	// the control-topic follower. Default: a registry of the specs'
	// versions.
	Versions *Versions
	// OnRollback, if set, is told of every automatic rollback (a swapped
	// version that failed its Canary), on its own goroutine.
	OnRollback func(RollbackEvent)
	// Copartitioned are the input lists of every co-partitioned processor
	// of the app, this runner's or not (copartition.go): every member of
	// the group must ask for the same assignor, and a group whose members
	// differ falls back to one that does not co-partition. The runner adds
	// its own processors' lists.
	Copartitioned [][]string
	// ExtraOpts are appended to the client options (tests use them).
	ExtraOpts []kgo.Opt
	// Limits reads what the topics the runner produces to accept of one
	// record (BrokerLimits), when it starts and when the broker refused a
	// record (limits.go); nil: the producer's own limits only.
	Limits LimitSource
	// Memory is the process's budget of bytes held for plugins, shared by
	// every runner of the process (host/internal/account); nil: none but
	// each task's own.
	Memory *account.Pool
	// Refused are the calls whose outputs the broker refused, to fail on
	// their next pass (refusal.go); a host that replaces a runner passes
	// the same set on. Default: a set of the runner's own.
	Refused *Refused
	// CPU is the process's share of slots for heavy guest work
	// (cpushare.go), shared by every runner of the process. Default: a
	// share of the runner's own with DefaultCPUSlots.
	CPU *CPUShare
	// Clock is the wall clock of what the plugins see (ABI.md section 8):
	// the wall time of their calls, processing-time timers and wall-clock
	// store expiry. Default time.Now; a test driver (host/testdriver)
	// gives one it moves by hand. The schedule of commit points, time
	// budgets, the canary window and latencies always use the real clock.
	Clock func() time.Time
	// Pauses are the processors the operator paused (pause.go), shared
	// with the control topic's follower. Default: none ever paused.
	Pauses *Pauses
	// ManualCommits turns the schedule of commit points off: they come
	// only when CommitNow asks (drive.go), at a rebalance and when the
	// runner stops. For a test driver, which decides where every commit
	// window ends; CommitInterval still bounds the time budgets.
	ManualCommits bool
}

// Runner runs the processors of one process as one consumer group member.
type Runner struct {
	opts Options
	log  *slog.Logger
	// stopping ends when Run's context does, or Run returns: a task's
	// start stops with it (untilStop). Made in New, not in Run: the client
	// joins the group from New on, so an assignment callback can start a
	// task (holding mu, which Run then waits for) before Run begins.
	stopping context.Context
	stop     context.CancelFunc
	vers     *Versions // the one record of active versions (opts.Versions)
	pauses   *Pauses   // the processors to pause (opts.Pauses)
	cl       *kgo.Client
	// cp is the commit point: the open commit window of every task and the
	// one way to end it (commitpoint.go; the locks: docs/locks.md).
	cp *commitPoint
	// pollStats counts the polls that brought records and the input
	// partitions each brought them for (processFetches): how many tasks a
	// poll can keep busy at once (pollLimit).
	pollStats struct{ polls, partitions atomic.Int64 }
	// timeNext names the first task the last commit point's calls did not
	// reach (timers.go: timePoint); "" when it reached every one.
	timeNext string
	byTopic  map[string]*procState // input topic -> processor
	procs    []*procState

	// mu guards everything the poll loop and the group callbacks share:
	// tasks, their windows, the commit point. Grabbed by the loop except
	// while it polls, and by group callbacks (docs/locks.md).
	mu sync.Mutex
	// closing is set when the client is being closed; callbacks then do
	// nothing (the tasks are already closed).
	closing bool
	tasks   map[TaskID]*task
	// protocol is the group protocol in use (ProtocolConsumer or
	// ProtocolClassic).
	protocol GroupProtocol

	// lims is what the topics it produces to accept (limits.go); refused
	// the calls that fail on their next pass, and prober, if set, what
	// finds them (refusal.go; tests set it, the runner otherwise probes
	// with a client of its own).
	lims    limits
	refused *Refused
	cpu     *CPUShare
	// cpuTicket is the runner's request for a slot of cpu not granted
	// yet, kept across polls so the runner keeps its place (cpushare.go);
	// loop only.
	cpuTicket *ticket
	prober    prober

	// serving is the tasks as interactive queries see them (serving.go).
	serving servingOf

	restorer     *restore.Restorer // nil without stateful processors
	standby      *standbys         // nil without StandbyReplicas or stateful processors
	restoreSlots chan struct{}     // one per running restore (MaxRestores)
	progress     restoreProgress
	wake         chan struct{} // a restore finished; buffered 1

}

type procState struct {
	spec       ProcessorSpec
	inputIndex map[string]uint32
	Stats      *Stats
	// heavy is set once a task of the processor was measured heavy
	// (heavyTask): its tasks not measured yet count as heavy too.
	heavy  atomic.Bool
	stalls stallSamples
	// gaps are the same measure across commit points without a swap:
	// the pause every commit point makes, the baseline of stalls.
	gaps stallSamples

	// mu guards lag and times, which the loop writes (under Runner.mu)
	// and Lag and TaskTimes read (docs/locks.md).
	mu sync.Mutex
	// lag is each task's consumer lag as of its latest fetch: the end of
	// its partition (the last stable offset: the host reads committed)
	// minus the offset of its next record.
	lag map[TaskID]int64
	// times is each task's time as of its latest commit point.
	times map[TaskID]TaskTime

	// tableStore maps each task table's topic to its store.
	tableStore map[string]int

	// limits[i] is what Outputs[i] accepts of one record, deadLetterLimit
	// what the dead-letter topic does (limits.go). Written by the loop
	// while no task runs.
	limits          []TopicLimit
	deadLetterLimit TopicLimit

	// paused is set while the runner holds the processor paused
	// (pause.go): written by the loop under Runner.mu at a commit point,
	// read by the loop and by Paused.
	paused atomic.Bool

	// shadow is the processor's latest shadow run (shadow.go); nil if it
	// never had one. Set by StartShadow on any goroutine; its tasks read
	// it at each batch.
	shadow atomic.Pointer[shadowRun]

	// held is, for a co-partitioned processor, the partitions of each input
	// this member is assigned (copartition.go). Loop and callbacks, under
	// Runner.mu.
	held map[string]map[int32]bool
}

// TaskTime is a task's time as of its latest commit point (metrics).
type TaskTime struct {
	// PendingTimers counts the task's pending timers.
	PendingTimers int
	// StreamTime is the task's stream time in ms since the epoch, or
	// abi.NoTime when it has seen no record with a timestamp.
	StreamTime int64
}

// New validates opts and connects a client. It does not join the group
// until Run. ctx bounds the brokers' answer on the group protocols they
// support.
func New(ctx context.Context, opts Options) (_ *Runner, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Kafka.Logger == nil {
		opts.Kafka.Logger = opts.Logger
	}
	if opts.MaxRestores <= 0 {
		opts.MaxRestores = DefaultMaxRestores
	}
	if opts.Guarantee == ExactlyOnce && opts.TransactionalID == "" {
		return nil, errors.New("runner: exactly_once needs a transactional id")
	}
	if opts.Versions == nil {
		opts.Versions = NewVersions()
	}
	if opts.Pauses == nil {
		opts.Pauses = NewPauses()
	}
	r := &Runner{
		opts:    opts,
		log:     opts.Logger,
		vers:    opts.Versions,
		pauses:  opts.Pauses,
		byTopic: map[string]*procState{},
		tasks:   map[TaskID]*task{},
		wake:    make(chan struct{}, 1),

		restoreSlots: make(chan struct{}, opts.MaxRestores),
	}
	r.stopping, r.stop = context.WithCancel(context.Background())
	topics, err := r.addProcessors()
	if err != nil {
		return nil, err
	}
	r.cpu = opts.CPU
	if r.cpu == nil {
		r.cpu = NewCPUShare(DefaultCPUSlots())
	}
	r.refused = opts.Refused
	if r.refused == nil {
		r.refused = NewRefused()
	}
	r.lims.src = opts.Limits
	byTopic, err := r.readLimits(ctx)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.lims.batch = batchSizes(byTopic)
	for _, ps := range r.procs {
		r.vers.OnPropose(ps.spec.Name, r.wakeLoop)
		r.pauses.onChange(ps.spec.Name, r.wakeLoop)
	}
	// The restorer exists before the client: the client may join the
	// group, and a task start its restore, as soon as it is created. From
	// here on every error return closes it.
	if err := r.newRestorer(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && r.restorer != nil {
			r.restorer.Close()
		}
		if err != nil && r.standby != nil {
			r.standby.restorer.Close()
		}
	}()
	copartitioned := slices.Clone(opts.Copartitioned)
	for _, ps := range r.procs {
		if ps.copartitioned() {
			copartitioned = append(copartitioned, ps.spec.Inputs)
		}
	}
	if err := copartition.Validate(copartitioned); err != nil {
		return nil, fmt.Errorf("runner: co-partitioned inputs: %w", err)
	}
	gopts, protocol, err := groupOpts(ctx, opts.Kafka, opts.GroupProtocol, copartitioned, r.standby != nil, opts.ExtraOpts)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.protocol = protocol
	opts.Logger.Info("consumer group protocol", "protocol", protocol.String())
	// The client may join the group, and run a group callback, as soon as
	// it exists: the callbacks wait for r.mu until r.cl is set.
	r.mu.Lock()
	defer r.mu.Unlock()
	if opts.Guarantee == ExactlyOnce {
		eos := &exactlyOnce{r: r, endStarts: make(chan struct{})}
		r.cp = &commitPoint{r: r, g: eos}
		kopts := r.clientOpts(topics, gopts, eos, transactionTimeout(opts, protocol))
		if eos.sess, err = kgo.NewGroupTransactSession(kopts...); err != nil {
			return nil, fmt.Errorf("runner: kafka client: %w", err)
		}
		r.cl = eos.sess.Client()
		r.applyPauses()
		return r, nil
	}
	r.cp = &commitPoint{r: r, g: &atLeastOnce{r: r}}
	if r.cl, err = kgo.NewClient(r.clientOpts(topics, gopts, nil, 0)...); err != nil {
		return nil, fmt.Errorf("runner: kafka client: %w", err)
	}
	// Before the first poll: a paused processor (read from the control
	// topic at startup) fetches nothing of its inputs, however the
	// partitions are assigned.
	r.applyPauses()
	return r, nil
}

// addProcessors indexes the processors by input topic and returns every
// input topic.
func (r *Runner) addProcessors() ([]string, error) {
	var topics []string
	for _, spec := range r.opts.Processors {
		stats := r.opts.Stats[spec.Name]
		if stats == nil {
			stats = newStats()
		}
		ps := &procState{spec: spec, inputIndex: map[string]uint32{}, Stats: stats,
			lag: map[TaskID]int64{}, times: map[TaskID]TaskTime{}, held: map[string]map[int32]bool{},
			tableStore: map[string]int{}}
		for _, tt := range spec.TaskTables {
			if !slices.Contains(spec.Inputs, tt.Topic) || tt.Store < 0 || tt.Store >= len(spec.Stores) ||
				len(spec.Changelogs) != len(spec.Stores) || spec.Changelogs[tt.Store] != tt.Topic {
				return nil, fmt.Errorf("runner: processor %q: task table %s is not one of its inputs with a store whose changelog it is", spec.Name, tt.Topic)
			}
			ps.tableStore[tt.Topic] = tt.Store
		}
		if spec.Version == "" {
			spec.Version = "initial"
			ps.spec.Version = spec.Version
		}
		r.vers.Start(spec.Name, versions.Info{ID: spec.Version}, spec.Plugin)
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
	return topics, nil
}

// newRestorer makes the restorer of the stateful processors' tasks, if
// there is one. It makes nothing on error.
func (r *Runner) newRestorer() error {
	opts := r.opts
	for _, ps := range r.procs {
		if len(ps.spec.Stores) == 0 {
			continue
		}
		if ps.spec.State == nil && opts.State == nil {
			return fmt.Errorf("runner: processor %q has stores but no state database was given", ps.spec.Name)
		}
	}
	for _, ps := range r.procs {
		if len(ps.spec.Stores) == 0 {
			continue
		}
		rc := opts.Restore
		if len(rc.Kafka.Brokers) == 0 {
			rc.Kafka = opts.Kafka
		}
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
			return fmt.Errorf("runner: %w", err)
		}
		r.restorer = restorer
		if opts.StandbyReplicas > 0 {
			// Standbys restore with a restorer of their own, whose
			// progress goes nowhere: a standby catching up is not a
			// task restoring (readiness, restore metrics).
			rc.Progress = nil
			sr, err := restore.New(rc)
			if err != nil {
				restorer.Close()
				return fmt.Errorf("runner: %w", err)
			}
			r.standby = newStandbys(r, opts.StandbyReplicas, opts.StandbyInterval, sr)
		}
		return nil
	}
	return nil
}

// clientOpts is every option of the runner's Kafka client, in one list.
// eos is the exactly_once committer (nil under at_least_once), txnTimeout
// its transaction timeout (0: the client's default).
func (r *Runner) clientOpts(topics []string, group []kgo.Opt, eos *exactlyOnce, txnTimeout time.Duration) []kgo.Opt {
	opts := r.opts
	start := kgo.NewOffset().AtStart()
	if opts.StartOffset == Latest {
		start = kgo.NewOffset().AtEnd()
	}
	kopts := opts.Kafka.Opts(
		kgo.ConsumerGroup(opts.AppID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come with the records (and are dropped
		// before any task sees them, dropMarkers): a marker is the last
		// offset of a transactional input after its records, and without
		// it a task of several inputs could not tell an input it has
		// read to the end from one with records still on the broker
		// (franz-go hands over no fetch that has neither records nor
		// errors), so it waited maxInputWait on every such input.
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		// Rebalance callbacks run only between polls, when every fetched
		// record has been processed: the host never holds a record across
		// a rebalance (invariant I5).
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.groupCallback(cbAssigned, r.assign)),
		kgo.OnPartitionsRevoked(r.groupCallback(cbRevoked, r.revoke)),
		kgo.OnPartitionsLost(r.groupCallback(cbLost, r.lose)),
		kgo.RecordPartitioner(outputPartitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytesFn(r.lims.batchBytes()),
		// A partition resumed after its restore joins the next fetch only
		// when the one in flight returns; the default 5 s wait would delay
		// every task start by up to that.
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if opts.SessionTimeout > 0 {
		kopts = append(kopts, kgo.SessionTimeout(opts.SessionTimeout))
	}
	if opts.FetchMaxBytes > 0 {
		kopts = append(kopts, kgo.FetchMaxBytes(opts.FetchMaxBytes))
	}
	if opts.FetchMaxPartitionBytes > 0 {
		kopts = append(kopts, kgo.FetchMaxPartitionBytes(opts.FetchMaxPartitionBytes))
	}
	if adjust := r.earliestInputs(); adjust != nil {
		kopts = append(kopts, kgo.AdjustFetchOffsetsFn(adjust))
	}
	kopts = append(kopts, group...)
	if eos != nil {
		kopts = append(kopts,
			kgo.TransactionalID(opts.TransactionalID),
			kgo.OnPartitionsCallbackBlocked(eos.onCallbackBlocked),
		)
		if txnTimeout > 0 {
			kopts = append(kopts, kgo.TransactionTimeout(txnTimeout))
		}
	}
	return append(kopts, opts.ExtraOpts...)
}

// Protocol is the consumer group protocol in use: ProtocolConsumer or
// ProtocolClassic.
func (r *Runner) Protocol() GroupProtocol { return r.protocol }

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
	return r.cp.samples.snapshot()
}

// CommitHistogram returns the durations of every commit point that had
// work, as counts per CommitBounds bucket (the last: above the last bound)
// and their total. Safe for concurrent use.
func (r *Runner) CommitHistogram() (counts []uint64, total time.Duration) {
	return r.cp.samples.histogram()
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

// DefaultMaxRestores is how many task restores run at once by default.
const DefaultMaxRestores = 4

// DefaultWindowBytes is ProcessorSpec.WindowBytes's default: a task's
// commit window holds this many bytes for its plugin before its commit
// point comes forward (abi/ABI.md section 7).
const DefaultWindowBytes = 64 << 20

// maxPollWork bounds the work of one poll when the commit point is further
// away (a long kafka.commit_interval): a rebalance waits until the poll's
// records are processed (BlockRebalanceOnPoll), and the records a task did
// not reach by then wait in its window for the next poll, as at a commit
// point.
const maxPollWork = 100 * time.Millisecond

// pollLimit is the most records the next poll takes: everything the
// client has buffered (one fetch response per broker: kafka.fetch_max_bytes,
// kafka.fetch_max_partition_bytes per partition), within Options.MaxPoll
// if set and within what the window has left before kafka.commit_records
// (a commit point comes as soon as a window processed that many).
//
// A poll takes the buffered records partition by partition, in order, so
// a cap of 1,000 records (what polls took before) brought nearly every
// poll one partition's records: a runner's tasks, which run a poll's
// records in parallel, ran one at a time (1.04 partitions a poll on the
// benchmark's word count, 4 partitions). What a poll brings is held by the
// tasks' windows, within their bounds (maxHeld, maxHeldBytes), and its
// work ends by the commit point or maxPollWork.
func (r *Runner) pollLimit() int {
	limit := -1 // franz-go: no cap
	if r.opts.MaxPoll > 0 {
		limit = r.opts.MaxPoll
	}
	if r.opts.CommitRecords > 0 && !r.opts.ManualCommits {
		left := max(r.opts.CommitRecords-r.cp.sinceCommit, 1)
		if limit < 0 || left < limit {
			limit = left
		}
	}
	return limit
}

// Run consumes, processes and commits until ctx is canceled or a fatal
// error happens. On cancel it finishes the record in flight, commits what
// was processed and leaves the group. A nil return means a clean stop.
func (r *Runner) Run(ctx context.Context) (err error) {
	defer func() {
		if r.cpuTicket != nil {
			r.cpu.cancel(r.cpuTicket)
			r.cpuTicket = nil
		}
		cerr := r.shutdown()
		if err == nil {
			err = cerr
		}
	}()
	// Before mu: a task start in an assignment callback may hold it.
	unwatch := context.AfterFunc(ctx, r.stop)
	defer unwatch()
	defer r.stop()
	r.mu.Lock()
	r.cp.restart()
	r.mu.Unlock()
	if r.standby != nil {
		// Stopped before shutdown closes the client and the tasks
		// (deferred later, so run first).
		sctx, stopStandbys := context.WithCancel(ctx)
		standbysDone := make(chan struct{})
		go func() {
			defer close(standbysDone)
			r.standby.run(sctx)
		}()
		defer func() {
			stopStandbys()
			<-standbysDone
			r.standby.restorer.Close()
		}()
	}
	for {
		done, err := r.iterate(ctx)
		if done || err != nil {
			return err
		}
	}
}

// iterate is one turn of the loop: finish restores, advance swaps, poll,
// process, commit point. Everything but the poll itself runs under r.mu,
// which the group callbacks also take: BlockRebalanceOnPoll holds callbacks
// back only until AllowRebalance, so without the lock a callback could run
// between AllowRebalance and the next poll, alongside the loop's own
// bookkeeping.
func (r *Runner) iterate(ctx context.Context) (done bool, err error) {
	r.mu.Lock()
	if ctx.Err() != nil {
		r.mu.Unlock()
		return true, nil
	}
	r.cp.g.rearm(ctx)
	r.finishRestores()
	r.advanceSwaps(ctx)
	r.applyPauses()
	r.refill()
	var fetches kgo.Fetches
	limit := r.pollLimit()
	if r.holdsWork() {
		// Records wait in the tasks' windows: take what the client has
		// buffered, without waiting for more.
		r.mu.Unlock()
		//lint:ignore SA1012 a nil context is franz-go's way to return what is buffered without waiting
		fetches = r.cl.PollRecords(nil, limit)
	} else {
		pollCtx, cancel := r.pollContext(ctx)
		r.mu.Unlock()
		fetches = r.cl.PollRecords(pollCtx, limit)
		cancel()
	}
	if fetches.IsClientClosed() {
		return true, nil
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.cl.AllowRebalance() // before the unlock: callbacks then wait for r.mu
	defer r.publishServing(nil)
	if err := r.process(ctx, fetches); err != nil {
		return false, err
	}
	return false, r.cp.run(ctx)
}

// process runs a poll's records through their tasks.
func (r *Runner) process(ctx context.Context, fetches kgo.Fetches) error {
	fetches.EachError(func(topic string, p int32, ferr error) {
		if errors.Is(ferr, context.DeadlineExceeded) || errors.Is(ferr, context.Canceled) {
			return
		}
		r.log.Warn("fetch error", "topic", topic, "partition", p, "err", ferr)
	})
	return r.processFetches(ctx, fetches)
}

// pollContext bounds a poll by the next commit point while processed
// records wait for their commit, so an idle input does not hold offsets
// back, and by one commit interval otherwise: a quiet task's timers are
// checked at least that often, and a poll never waits without bound (seen
// once in about a hundred rollback runs on kfake: after a rollback's
// rewinds the client had no fetch running, and only a new poll started
// one).
//
// A finished restore also ends the poll (through r.wake): its partition
// is paused until the loop resumes it, so with every partition restoring
// the poll would otherwise wait forever.
func (r *Runner) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wait := max(time.Until(r.cp.deadline()), time.Millisecond)
	pctx, cancel := context.WithTimeout(ctx, wait)
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

// dropMarkers removes the transaction markers (control records) from a
// partition's fetched records, in place, and returns the offset after the
// last one (-1: none). No plugin ever sees a marker.
func dropMarkers(recs []*kgo.Record) ([]*kgo.Record, int64) {
	end := int64(-1)
	n := 0
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			end = rec.Offset + 1
			continue
		}
		recs[n] = rec
		n++
	}
	clear(recs[n:])
	return recs[:n], end
}

// processFetches hands a poll's records to their tasks, which hold them
// (window.go), and runs every task that holds records, tasks in parallel.
func (r *Runner) processFetches(ctx context.Context, fetches kgo.Fetches) error {
	parts := int64(0)
	defer func() {
		if parts > 0 {
			r.pollStats.polls.Add(1)
			r.pollStats.partitions.Add(parts)
		}
	}()
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		var markersEnd int64
		ftp.Records, markersEnd = dropMarkers(ftp.Records)
		if len(ftp.Records) == 0 {
			if t := r.tasks[r.taskID(ftp.Topic, ftp.Partition)]; t != nil {
				if i := t.inputOf(ftp.Topic); i >= 0 {
					t.win.in(i).sawEmpty()
					t.setLag(i, ftp.LastStableOffset, -1)
				}
			}
			return
		}
		parts++
		t, err := r.taskFor(ctx, ftp.Topic, ftp.Partition)
		if err != nil {
			r.log.Error("task unavailable; its records are not processed", "topic", ftp.Topic, "partition", ftp.Partition, "err", err)
			return
		}
		if t == nil {
			// A co-partitioned task waiting for the rest of its partitions:
			// its partitions are paused; these were fetched before.
			// Fetch them again once the task runs.
			r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
				ftp.Topic: {ftp.Partition: {Epoch: -1, Offset: ftp.Records[0].Offset}},
			})
			return
		}
		i := t.inputOf(ftp.Topic)
		c := t.win.in(i)
		c.sawRecords()
		c.sawEnd(ftp.LastStableOffset)
		// One fetch can bring far more than maxHeldBytes of a partition
		// (a broker returns whole batches, and the client hands over
		// what it buffered): what does not fit is fetched again once the
		// task has room.
		recs, cut := ftp.Records, false
		if n := c.room(recs); n < len(recs) {
			recs, cut = recs[:n], true
		}
		c.hold(recs)
		if !cut {
			c.sawMarkers(markersEnd) // (after a cut, they are fetched again)
		}
		t.proc.Stats.Fetched.Add(int64(len(recs)))
		t.waitingInput = false
		granted := t.acct.SetInput(t.win.heldBytes())
		if cut || len(c.held) >= maxHeld || c.heldBytes >= maxHeldBytes || !granted {
			// The task is slower than its input, or the process holds
			// half its budget: stop fetching the partition until the task
			// has worked through what it holds (again if something else
			// resumed it meanwhile: a finished restore).
			c.heldFull = true
			r.cl.PauseFetchPartitions(map[string][]int32{ftp.Topic: {ftp.Partition}})
		}
		if cut {
			r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
				ftp.Topic: {ftp.Partition: {Epoch: -1, Offset: ftp.Records[len(recs)].Offset}},
			})
		}
	})
	var batch []*task
	for _, t := range r.tasks {
		if t.runs() && t.win.holding() {
			batch = append(batch, t)
		}
	}
	if r.cpuTicket != nil && !slices.ContainsFunc(batch, heavyTask) {
		// Its heavy work is gone (processed, revoked, paused): a slot
		// granted to the ticket later would be held by nobody.
		r.cpu.cancel(r.cpuTicket)
		r.cpuTicket = nil
	}
	if len(batch) == 0 {
		return nil
	}
	if err := r.cp.opened(); err != nil {
		return err
	}
	// Time isolation (I9): the work of one poll ends by the commit point it
	// is due at (or maxPollWork after it began), whatever a plugin does.
	// Each task stops at the first record boundary past the deadline (the
	// records it did not reach wait in its window for the next one), and a
	// task that would start past it waits for the next poll, so a commit
	// point comes at most one record's time (limits.record_timeout) late
	// and a transaction never nears its timeout. The cheapest tasks take
	// the processing slots first, so a slow or looping processor delays
	// the others by at most one of its records; tasks of about the same
	// cost take turns (slotOrder), so the ones left for the next poll go
	// first then.
	deadline := r.cp.deadline()
	if bound := time.Now().Add(maxPollWork); bound.Before(deadline) {
		deadline = bound
	}
	slices.SortStableFunc(batch, slotOrder)
	errs := make([]error, len(batch))
	processed := make([]int, len(batch))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, t := range batch {
		sem <- struct{}{}
		heavy := heavyTask(t)
		if (i >= cap(sem) && !time.Now().Before(deadline)) || (heavy && !r.takeCPU(deadline)) {
			// The first slots' worth of tasks always start, so every
			// poll moves; past the deadline, a task that had to wait for
			// a slot would hold the commit point for a record or more
			// (with 8 spinning tasks on 2 slots, four record timeouts per
			// poll, starving every other processor of a shared member).
			// A heavy task that got no slot of the process's CPU share
			// by the deadline waits for the next poll, its runner's
			// ticket kept (the heavy tasks come last: slotOrder).
			<-sem
			for _, left := range batch[i:] {
				left.proc.Stats.Deferred.Add(1)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer func() {
				if heavy {
					r.cpu.release()
				}
				<-sem
				wg.Done()
			}()
			processed[i], errs[i] = t.processBatch(ctx, deadline)
		}()
	}
	wg.Wait()
	for i, n := range processed {
		r.cp.processed(n)
		t := batch[i]
		for in := range t.topics {
			c := t.win.in(in)
			t.setLag(in, -1, c.fetchedEnd())
			// A task that stopped at a failure (on_error: fail) must not
			// have the records after it counted as consumed: fetch them
			// again from where it stopped.
			if at, stopped := c.takeStop(); stopped {
				r.rewind(t, in, at)
			}
		}
	}
	return errors.Join(errs...)
}

// takeCPU waits until the runner's ticket for a slot of the CPU share is
// granted (true; the caller releases the slot) or until deadline (false;
// the ticket is kept for the next poll). Heavy tasks beyond the slots of
// the share that a single runner could use wait here, too.
func (r *Runner) takeCPU(deadline time.Time) bool {
	if r.cpuTicket == nil {
		r.cpuTicket = r.cpu.request()
	}
	// A granted ticket is taken even past the deadline (a select with
	// both ready would choose at random, and leave the slot idle a poll).
	select {
	case <-r.cpuTicket.granted:
		r.cpuTicket = nil
		return true
	default:
	}
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-r.cpuTicket.granted:
		r.cpuTicket = nil
		return true
	case <-wait.C:
		return false
	}
}

// heavyTask says whether t's batch needs a slot of the CPU share: its
// records cost more than heavyCost of plugin time, or it has none
// measured yet and another task of its processor was measured heavy. A
// new task of a processor not known heavy runs without a slot: at most
// one record of a spinning processor per runner slot, once per runner,
// where counting every new task as heavy made the first batches of a
// cheap processor's tasks (after every rebalance) wait for the slot one
// after another.
func heavyTask(t *task) bool {
	if t.recordCost <= 0 {
		return t.proc.heavy.Load()
	}
	return t.recordCost > heavyCost
}

// heavyCost is the plugin time per record above which a task's batches
// run under the CPU share: a passthrough or a counter costs microseconds,
// a spinning record its record_timeout. The cost is wall time averaged
// over a batch (calls.go), so a cheap task's single-record batch that the
// OS or the GC held up for a few milliseconds raises it; at 5 ms that
// takes a stall of about 20 ms, rare enough that a cheap task is hardly
// ever made to wait for a slot (with 1 ms, one BenchmarkThroughput run
// of 5 lost half its rate so).
const heavyCost = 5 * time.Millisecond

// slotOrder orders the tasks of a poll for the processing slots: by cost
// class (a factor of two of recordCost, so the healthy tasks, microseconds
// a record, go before the slow ones, milliseconds to seconds), then the
// least recently run first, so tasks of one class take turns and none
// waits for slots more than a few polls.
func slotOrder(a, b *task) int {
	if ca, cb := costClass(a.recordCost), costClass(b.recordCost); ca != cb {
		return ca - cb
	}
	return a.lastProcessed.Compare(b.lastProcessed)
}

// costClass is the binary order of magnitude of cost in microseconds. A
// task not measured yet (no record run) counts as unmeasuredCost.
func costClass(cost time.Duration) int {
	if cost <= 0 {
		cost = unmeasuredCost
	}
	return bits.Len64(uint64(cost / time.Microsecond))
}

// unmeasuredCost is the cost a task is given until its first records ran:
// after the tasks known to be cheap (a passthrough costs microseconds), so
// a burst of new tasks that spin does not take their slots, and before
// the ones known to be slow, so a new task is not left behind them.
const unmeasuredCost = time.Millisecond

// refill brings each task's account up to the input it holds, and
// resumes the partitions paused for holding too much once their task is
// down to half of maxHeld and maxHeldBytes and its account granted what it
// holds (or it holds nothing of the partition: it must be able to move):
// after processing, or after an abort or a rewind dropped what they held.
// A task that stopped or is restoring keeps its partitions paused for that
// reason instead.
func (r *Runner) refill() {
	for _, t := range r.tasks {
		granted := t.acct.SetInput(t.win.heldBytes())
		for in := range t.topics {
			c := t.win.in(in)
			if c.heldFull && len(c.held) < maxHeld/2 && c.heldBytes < maxHeldBytes/2 && (granted || len(c.held) == 0) &&
				t.failed == nil && t.restoring == nil {
				c.heldFull = false
				r.cl.ResumeFetchPartitions(map[string][]int32{t.topics[in]: {t.id.Partition}})
			}
		}
	}
}

// maxHeld is how many fetched records a task's input partition may hold
// unprocessed (window.go) before it is paused; it is resumed at half. The
// resumed partition's next fetch must come back before its task runs
// out of records, or the runner waits in poll while the broker has its
// records: at 1,000 (Kafka Streams' buffered.records.per.partition), the
// benchmark's word count waited that way 25-35 % of its running time, as
// the 500 records left at a resume took about a millisecond to process
// and a fetch round trip tens of them on a busy machine (RATIONALE.md,
// "Kafka I/O"). One fetch of a partition (kafka.fetch_max_partition_bytes,
// 128 KiB by default: some 12,000 of those records) must fit with room
// for the next, or the partition is paused after every fetch again. The
// memory is bounded by maxHeldBytes and the account.
const maxHeld = 20000

// maxHeldBytes bounds the bytes of those records (heldRecordBytes): a
// thousand records of a megabyte each would otherwise be a gigabyte per
// partition. A fetch's records past it are not held but fetched again
// (cursor.room), so an input partition holds at most maxHeldBytes, or one
// record when that record alone is larger. They are charged to the task's
// account too (account.SetInput), which stops fetching when the process
// holds half its runtime.memory_budget.
const maxHeldBytes = 16 << 20

// holdsWork reports whether a task holds records it can process now, so
// the next poll must not wait for new ones.
func (r *Runner) holdsWork() bool {
	for _, t := range r.tasks {
		if t.runs() && !t.waitingInput && t.win.holding() {
			return true
		}
	}
	return false
}

// taskID names the task of an input partition (an empty processor for a
// topic no processor reads). The tasks of a co-partitioned processor are
// named by its first input: one task reads partition p of every input.
func (r *Runner) taskID(topic string, partition int32) TaskID {
	ps := r.byTopic[topic]
	if ps == nil {
		return TaskID{}
	}
	if ps.copartitioned() {
		topic = ps.spec.Inputs[0]
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

// TaskTimes returns the time of every task of the named processor that
// keeps timers, as of each one's latest commit point.
func (r *Runner) TaskTimes(processor string) map[TaskID]TaskTime {
	for _, ps := range r.procs {
		if ps.spec.Name == processor {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			return maps.Clone(ps.times)
		}
	}
	return nil
}

// untilStop is ctx, ended also when the runner stops (Run's context ends):
// a task starting in a group callback (whose context is the client's) must
// not hold a stopping runner for as long as its plugin's init may run. The
// caller holds mu and calls done when the start is over.
func (r *Runner) untilStop(ctx context.Context) (_ context.Context, done func()) {
	if r.stopping == nil {
		return ctx, func() {} // a runner not made by New (unit tests)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// taskFor returns the task of an input partition, creating it if the
// assignment callback has not (records can arrive for a partition whose
// instance failed to start earlier). It returns nil, nil for a partition
// of a co-partitioned task this member does not hold every partition of:
// that task runs only once it does (see copartition.go).
func (r *Runner) taskFor(ctx context.Context, topic string, partition int32) (*task, error) {
	ps := r.byTopic[topic]
	if ps == nil {
		return nil, fmt.Errorf("topic %q is no processor's input", topic)
	}
	id := r.taskID(topic, partition)
	if t := r.tasks[id]; t != nil {
		return t, nil
	}
	if !ps.holdsAll(partition) {
		return nil, nil
	}
	t, err := newTask(ctx, r, ps, id)
	if err != nil {
		return nil, err
	}
	r.tasks[id] = t
	return t, nil
}

// groupCallback is the client's callback for kind: run under r.mu, or
// queued by the committer while a transaction ends (it cannot take r.mu
// then), or nothing once the runner is closing (the tasks are closed).
func (r *Runner) groupCallback(kind callbackKind, run func(context.Context, map[string][]int32)) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
		if !r.cp.g.lockForCallback(kind, parts) {
			// Queued behind a transaction's end (eos.go).
			if kind != cbAssigned {
				r.serving.withdraw(r, parts)
			}
			return
		}
		defer r.mu.Unlock()
		if r.closing {
			return
		}
		if kind != cbAssigned {
			// Before the revoke's commit point: a query must not read a
			// task the next owner may already be restoring.
			r.publishServing(r.leaving(parts))
		}
		run(ctx, parts)
		r.publishServing(nil)
	}
}

// assign starts the tasks of newly assigned partitions; the caller holds r.mu.
func (r *Runner) assign(ctx context.Context, assigned map[string][]int32) {
	r.dropStale(ctx, assigned)
	r.hold(assigned)
	for topic, parts := range assigned {
		for _, p := range parts {
			if _, err := r.taskFor(ctx, topic, p); err != nil {
				r.log.Error("starting task", "topic", topic, "partition", p, "err", err)
			}
		}
	}
	r.log.Info("partitions assigned", "partitions", assigned)
}

// revoke ends the revoked tasks' work before their partitions are
// released (I5). Because of BlockRebalanceOnPoll this runs between polls,
// when nothing is in flight. Under at_least_once everything processed is
// flushed and committed. Under exactly_once the loop has already committed
// if it saw the rebalance coming; otherwise the open transaction is
// aborted by the session and every task rewinds to its committed offsets.
func (r *Runner) revoke(ctx context.Context, revoked map[string][]int32) {
	r.cp.g.beforeRevoke(ctx)
	r.closeTasks(ctx, revoked)
	r.log.Info("partitions revoked", "partitions", revoked)
}

// lose drops the tasks without committing: another member may already own
// the partitions, so nothing of ours may be committed for them.
func (r *Runner) lose(ctx context.Context, lost map[string][]int32) {
	r.cp.g.beforeLose()
	r.closeTasks(ctx, lost)
	r.cp.lost()
	r.log.Warn("partitions lost; uncommitted work for them is dropped", "partitions", lost)
}

// dropStale closes the tasks of newly assigned partitions that this member
// still runs: a partition is assigned only to a member that does not hold
// it, so the member lost it meanwhile without hearing of it (see
// exactlyOnce.rearm), and the task's state may miss what another owner
// committed. The new task restores from the changelog.
func (r *Runner) dropStale(ctx context.Context, assigned map[string][]int32) {
	for topic, parts := range assigned {
		for _, p := range parts {
			id := r.taskID(topic, p)
			t := r.tasks[id]
			if t == nil {
				continue
			}
			r.log.Warn("assigned a partition whose task this member still ran: its revoke was not seen; the task restarts from its committed state",
				"task", id.String(), "topic", topic, "partition", p)
			t.close(ctx) // drops what the task staged
			delete(r.tasks, id)
		}
	}
}

// closeTasks closes the tasks of partitions leaving this member. A
// co-partitioned task closes when any one of its partitions leaves; the
// ones that stay are paused until the task holds every one again.
func (r *Runner) closeTasks(ctx context.Context, parts map[string][]int32) {
	for topic, ps := range parts {
		proc := r.byTopic[topic]
		if proc == nil {
			continue
		}
		for _, p := range ps {
			id := r.taskID(topic, p)
			if t := r.tasks[id]; t != nil {
				t.close(ctx)
				delete(r.tasks, id)
				if proc.copartitioned() {
					r.cl.PauseFetchPartitions(t.partitions())
				}
			}
		}
	}
	r.release(parts)
}

// shutdown commits what was processed, closes every task and leaves the group.
func (r *Runner) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	defer func() {
		r.closing = true
		r.cp.answerAsks(r.cp.asks, ErrStopped)
		r.cp.asks = nil
		r.mu.Unlock()
		r.cl.Close() // leaves the group; callbacks it triggers see closing
		if r.restorer != nil {
			r.restorer.Close()
		}
	}()
	r.serving.cur.Store(&Serving{Gen: r.Serving().Gen + 1, Tasks: map[TaskID]bool{}})
	err := r.cp.final(ctx)
	for id, t := range r.tasks {
		t.close(ctx)
		delete(r.tasks, id)
	}
	return err
}

// earliestInputs returns, when StartOffset is Latest and a processor has
// EarliestInputs, the group hook that starts their partitions without a
// committed offset at the earliest offset; nil otherwise (nothing to
// change: Earliest is every partition's start already).
func (r *Runner) earliestInputs() func(context.Context, map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	if r.opts.StartOffset != Latest {
		return nil
	}
	earliest := map[string]bool{}
	for _, spec := range r.opts.Processors {
		for _, t := range spec.EarliestInputs {
			earliest[t] = true
		}
	}
	if len(earliest) == 0 {
		return nil
	}
	return func(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
		for t, ps := range offsets {
			if !earliest[t] {
				continue
			}
			for p, o := range ps {
				// A committed offset is >= 0; a partition without one
				// has the reset offset, AtEnd (-1) here.
				if o.EpochOffset().Offset < 0 {
					ps[p] = kgo.NewOffset().AtStart()
				}
			}
		}
		return offsets, nil
	}
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
