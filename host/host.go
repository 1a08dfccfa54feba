package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/driven"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/follower"
	"github.com/wasmstream/wasmstream/host/internal/globaltable"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/query"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/status"
	"github.com/wasmstream/wasmstream/host/internal/topics"
)

// Host runs the processors of one Config in this process.
type Host struct {
	cfg *Config // New's own copy, defaults applied
	log *slog.Logger
	// limits bound every module, trusted keys included (read once, at
	// New: startup and the control topic's versions check against the
	// same keys).
	limits plugin.Limits
	// state is the global tables' database, procState each stateful
	// processor's (statedb.go); nil when no processor has stores or
	// tables. stateCaches are the caches they share.
	state       *state.DB
	procState   map[string]*state.DB
	stateCaches *state.Shared
	// tables are the global tables, by topic: processors naming the same
	// topic share one (tables.go).
	tables   map[string]*globaltable.Table
	procs    []*plugin.Processor
	embedded *kfake.Cluster
	// brokerFile is where the embedded broker's address is written for
	// the topic commands ("" when it is not).
	brokerFile string
	brokers    []string
	kafka      kclient.Config // every Kafka client of the host starts from it
	vers       *runner.Versions
	pauses     *runner.Pauses // the paused processors, from the control topic
	follower   *follower.Follower
	// members are this process's consumer group members: one per
	// processor (kafka.members: per_processor) or one for all (shared).
	members []*member
	// memory is the process's account pool (runtime.memory_budget): every
	// member's runners, and the ones that replace them, share it.
	memory *account.Pool
	// memberOf indexes members by processor name.
	memberOf map[string]*member
	restarts atomic.Int64 // runners replaced after an error, all members
	// firstBackoff is the first wait before a failed runner is replaced.
	firstBackoff time.Duration
	status       status.Source
	admin        *admin.Server // nil when admin.listen is empty
	// query is the interactive-query endpoint's view of the host, querySrv
	// the endpoint and queryAddr the URL it is advertised at; nil and ""
	// when query.listen is empty (query.go).
	query     *queryHost
	querySrv  *query.Server
	queryAddr string
}

// member is one consumer group member of this process: a runner for one
// processor or for all of them. Each member has its own client, producer
// and transactional id, so its commit points wait for no other member's
// processing: a plugin that keeps timing out delays only the member that
// runs it (I9 across processors).
type member struct {
	// opts builds the member's runner: the first in New, and a new one (a
	// new client and producer, the same counters) each time Run replaces
	// a runner that stopped on an error.
	opts runner.Options
	// mu guards r, which Run replaces; grabbed by its readers.
	mu sync.Mutex
	r  *runner.Runner
}

func (m *member) runner() *runner.Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r
}

// Option changes how New builds a Host.
type Option func(*options)

type options struct {
	logger       *slog.Logger
	embeddedPort int
	onRestore    func(RestoreProgress)
	restore      restore.Config // tests tune fetch and batch sizes
	// restartBackoff, when set, is the first wait before a failed runner
	// is replaced (tests that replace many; default restartFirstBackoff).
	restartBackoff time.Duration
	// standbyInterval, when set, is how often standbys catch up (tests;
	// default runner.DefaultStandbyInterval).
	standbyInterval time.Duration
	// stateOptions, if set, changes the options each state database is
	// opened with (processor: its processor, "" for the global tables');
	// tests give one a failing file system.
	stateOptions func(processor string, o *state.Options)
	// driven connects a test driver (WithDriver).
	driven *driven.Hooks
}

// WithRestoreProgress calls fn with the progress of every state restore
// (after each applied batch and at the end), for progress bars. fn must
// return quickly.
func WithRestoreProgress(fn func(RestoreProgress)) Option {
	return func(o *options) { o.onRestore = fn }
}

// WithLogger sets the host's logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDriver runs the host for a test driver (host/testdriver): its
// runners take their wall clock from d.Clock and commit only when asked,
// and New fills the rest of d. Its type is internal: only this module's
// driver can use it.
func WithDriver(d *driven.Hooks) Option { return func(o *options) { o.driven = d } }

// WithEmbeddedPort fixes the port of the embedded development broker
// (used when kafka.brokers is empty). Default 0: any free port.
func WithEmbeddedPort(port int) Option { return func(o *options) { o.embeddedPort = port } }

// New starts a host for cfg. It works on its own copy of cfg with every
// unset field given its documented default (ApplyDefaults), and refuses
// an invalid config (Validate: the errors name the field paths), so a
// Config built in Go behaves as one the CLI loads from a file. Then it compiles and validates
// every plugin, connects to Kafka (or starts the embedded development
// broker when kafka.brokers is empty), makes sure the topics exist, and
// prepares the consumer. Nothing is consumed before Run.
func New(ctx context.Context, cfg *Config, opts ...Option) (_ *Host, err error) {
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.Clone()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, log: o.logger, firstBackoff: restartFirstBackoff}
	h.memory = h.memoryPool()
	if o.restartBackoff > 0 {
		h.firstBackoff = o.restartBackoff
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	// The admin endpoint first: a taken address fails before plugins
	// compile and Kafka is contacted, and /healthz answers during both.
	if cfg.Admin.Listen != "" {
		var opts []admin.Option
		if cfg.Admin.Debug {
			opts = append(opts, admin.Debug())
		}
		if h.admin, err = admin.New(cfg.Admin.Listen, &h.status, h.log, opts...); err != nil {
			return nil, err
		}
	}
	if h.limits, err = cfg.pluginLimits(); err != nil {
		return nil, err
	}
	h.limits.Snapshots = h.memory // the inits' snapshots are in the account too
	if err := h.loadPlugins(ctx); err != nil {
		return nil, err
	}
	h.brokers = cfg.Kafka.Brokers
	createTopics := cfg.Kafka.CreateTopics
	if len(h.brokers) == 0 {
		if err := h.startEmbedded(o.embeddedPort); err != nil {
			return nil, err
		}
		h.writeEmbeddedBroker()
		createTopics = true
	}
	if h.kafka, err = cfg.kafkaClient(h.brokers, h.log); err != nil {
		return nil, err
	}
	for _, w := range cfg.Kafka.securityWarnings() {
		h.log.Warn(w)
	}
	if h.embedded == nil {
		if err := cfg.reachKafka(ctx, h.kafka, cfg.Kafka.ConnectTimeout, h.log); err != nil {
			return nil, err
		}
	}
	if err := h.ensureTopics(ctx, createTopics); err != nil {
		return nil, err
	}
	if h.stateful() {
		if advice := cfg.oldStateDirAdvice(); advice != "" && h.embedded == nil {
			h.log.Warn("state: starting from an empty state directory; the stores are restored from their changelogs. " + advice)
		}
		if err := h.openState(o.stateOptions); err != nil {
			return nil, err
		}
	}
	// Before the follower makes the plugins' factories: they copy the
	// binding, whose TableState serves the tables.
	h.makeTables()
	h.vers = runner.NewVersions()
	h.pauses = runner.NewPauses()
	h.follower, err = follower.Load(ctx, follower.Config{
		Pauses:       h.pauses,
		OnMember:     h.onMember,
		AppID:        cfg.AppID,
		Kafka:        h.kafka,
		Processors:   h.procs,
		Limits:       h.limits,
		Versions:     h.vers,
		Canary:       cfg.Swap.canary(),
		ShadowLimits: runner.ShadowLimits{TimeCap: cfg.Kafka.CommitInterval / 2},
		Logger:       h.log,
		Timeout:      brokerTimeout,
	})
	if err != nil {
		return nil, err
	}
	for i := range cfg.Processors {
		if pc := &cfg.Processors[i]; pc.Shadow != "" {
			h.configShadow(ctx, pc)
		}
	}
	enums, err := toRunnerEnums(cfg)
	if err != nil {
		return nil, err
	}
	specs := make([]runner.ProcessorSpec, len(h.procs))
	for i, p := range h.procs {
		pc := &cfg.Processors[i]
		specs[i] = runner.ProcessorSpec{
			Name:            pc.Name,
			Inputs:          cfg.runnerInputs(pc),
			Outputs:         p.Topics,
			Internal:        cfg.internalOutputs(pc, p.Topics),
			Latest:          cfg.latestOutputs(pc, p.Binding.Outputs),
			OnError:         enums.onError[i],
			DeadLetterTopic: cfg.DeadLetterTopic(pc),
			Stores:          cfg.taskStores(pc),
			TimeStore:       len(cfg.taskStores(pc)) > 0,
			StateCache:      stateCache(pc),
			TimeLimits: runner.TimeLimits{Timers: pc.Limits.Timers, FiringsPerCommit: pc.Limits.TimerFirings,
				CommitMarks: pc.Limits.CommitMarks},
			Expiry: map[string]state.Expiry{},
			// A task table with no committed offset starts at its
			// earliest record whatever start_offset says: a table is
			// its whole topic.
			EarliestInputs: slices.Concat(cfg.repartitionInputs(pc), slices.Sorted(maps.Values(pc.TaskTables))),
			Changelogs:     cfg.changelogTopics(pc),
			State:          h.procState[pc.Name],
			StateDisk:      int64(pc.Limits.StateDisk),
			WindowBytes:    int64(pc.Limits.WindowBytes),
		}
		for st, e := range pc.Expire {
			specs[i].Expiry[st] = state.Expiry{TTL: e.After.Milliseconds(), Wall: e.Clock == ClockWall}
		}
		for j, st := range specs[i].Stores {
			if topic, ok := pc.TaskTables[st]; ok {
				specs[i].TaskTables = append(specs[i].TaskTables, runner.TaskTable{Topic: topic, Store: j})
			}
		}
	}
	var onRestore func(restore.Progress)
	if o.onRestore != nil {
		onRestore = func(p restore.Progress) { o.onRestore(restoreProgress(p)) }
	}
	stats := map[string]*runner.Stats{}
	for _, pc := range cfg.Processors {
		stats[pc.Name] = runner.NewStats()
	}
	base := runner.Options{
		AppID:          cfg.AppID,
		Kafka:          h.kafka,
		CommitInterval: cfg.Kafka.CommitInterval,
		CommitRecords:  cfg.Kafka.CommitRecords,
		StartOffset:    enums.start,
		SessionTimeout: cfg.Kafka.SessionTimeout,
		// Validate bounds both to maxFetchBytes, well inside int32.
		FetchMaxBytes:          int32(cfg.Kafka.FetchMaxBytes),
		FetchMaxPartitionBytes: int32(cfg.Kafka.FetchMaxPartitionBytes),
		GroupProtocol:          enums.protocol,
		Guarantee:              enums.guarantee,
		TransactionalID:        cfg.AppID + "-" + instanceID(),
		TransactionTimeout:     cfg.Kafka.TransactionTimeout,
		Processors:             specs,
		Versions:               h.vers,
		Pauses:                 h.pauses,
		Logger:                 h.log,
		OnRollback:             h.follower.OnRollback,
		OnRestoreProgress:      onRestore,
		Restore:                o.restore,
		StandbyReplicas:        cfg.State.StandbyReplicas,
		StandbyInterval:        o.standbyInterval,
		Stats:                  stats,
		Limits:                 runner.BrokerLimits(h.kafka),
		Memory:                 h.memory,
		// One CPU share for the process: heavy guest work of all members
		// together holds at most GOMAXPROCS-1 cores (runner/cpushare.go).
		CPU: runner.NewCPUShare(runner.DefaultCPUSlots()),
	}
	if d := o.driven; d != nil {
		base.Clock, base.ManualCommits = d.Clock, true
	}
	// Every member asks for the co-partitioning assignor when any
	// processor of the app needs it (members of one group must agree).
	for _, spec := range specs {
		if spec.Copartitioned() {
			base.Copartitioned = append(base.Copartitioned, spec.Inputs)
		}
	}
	if err := h.startMembers(ctx, base); err != nil {
		return nil, err
	}
	if cfg.Query.Listen != "" {
		if err := h.startQuery(specs); err != nil {
			return nil, err
		}
	}
	if d := o.driven; d != nil {
		h.drive(d)
	}
	return h, nil
}

// drive hands a test driver the host's runners, state and Kafka settings.
func (h *Host) drive(d *driven.Hooks) {
	d.Runners = func() []*runner.Runner {
		rs := make([]*runner.Runner, len(h.members))
		for i, m := range h.members {
			rs[i] = m.runner()
		}
		return rs
	}
	d.Members, d.DeadLetters = nil, map[string]string{}
	for _, m := range h.members {
		var dm driven.Member
		for _, spec := range m.opts.Processors {
			dm.Inputs = append(dm.Inputs, spec.Inputs...)
			dm.Outputs = append(dm.Outputs, spec.Outputs...)
		}
		d.Members = append(d.Members, dm)
	}
	for i := range h.cfg.Processors {
		if pc := &h.cfg.Processors[i]; pc.OnError == OnErrorDeadLetter {
			d.DeadLetters[pc.Name] = h.cfg.DeadLetterTopic(pc)
		}
	}
	d.State = func(processor string) *state.DB { return h.procState[processor] }
	d.Tables = map[string]*state.Table{}
	for topic := range h.tables {
		d.Tables[topic] = h.state.Table(topic)
	}
	d.Kafka = h.kafka
}

// startMembers makes the process's group members and their first runners
// from base, the options every member shares: each gets its processors,
// their counters and a transactional id of its own.
func (h *Host) startMembers(ctx context.Context, base runner.Options) error {
	var groups [][]runner.ProcessorSpec
	if h.cfg.Kafka.Members == MembersShared {
		groups = [][]runner.ProcessorSpec{base.Processors}
	} else {
		for _, spec := range base.Processors {
			groups = append(groups, []runner.ProcessorSpec{spec})
		}
	}
	h.memberOf = map[string]*member{}
	for _, specs := range groups {
		opts := base
		opts.Processors = specs
		// One set per member, kept across its runners: a runner
		// restarted for smaller limits must not find the refused records
		// again (refusal.go).
		opts.Refused = runner.NewRefused()
		opts.Stats = map[string]*runner.Stats{}
		for _, spec := range specs {
			opts.Stats[spec.Name] = base.Stats[spec.Name]
		}
		if len(groups) > 1 {
			// One producer per member: a transactional id is one
			// producer's, and the broker fences all but the latest.
			opts.TransactionalID = base.TransactionalID + "-" + specs[0].Name
		}
		r, err := runner.New(ctx, opts)
		if err != nil {
			return err
		}
		m := &member{opts: opts, r: r}
		h.members = append(h.members, m)
		for _, spec := range specs {
			h.memberOf[spec.Name] = m
		}
	}
	h.publishStatus()
	return nil
}

// runnerOf is the runner of now of processor's member (Run may replace
// it), or nil for an unknown processor.
func (h *Host) runnerOf(processor string) *runner.Runner {
	m := h.memberOf[processor]
	if m == nil {
		return nil
	}
	return m.runner()
}

// setRunner makes r m's runner and tells the admin endpoint.
func (h *Host) setRunner(m *member, r *runner.Runner) {
	m.mu.Lock()
	m.r = r
	m.mu.Unlock()
	h.publishStatus()
}

// publishStatus hands the admin endpoint the members' runners of now.
func (h *Host) publishStatus() {
	rs := make([]*runner.Runner, len(h.members))
	for i, m := range h.members {
		rs[i] = m.runner()
	}
	h.status.Start(&status.Running{Processors: h.procs, Runners: rs, Versions: h.vers, TablesLoading: h.tablesLoading,
		State: h.stateHealth, StateOpen: h.stateOpen})
}

// AdminAddr is the admin endpoint's address, or "" when it is off.
func (h *Host) AdminAddr() string {
	if h.admin == nil {
		return ""
	}
	return h.admin.Addr()
}

// Brokers returns the seed brokers in use: the configured ones, or the
// embedded broker's address.
func (h *Host) Brokers() []string { return h.brokers }

// Embedded reports whether the host runs the embedded development broker.
func (h *Host) Embedded() bool { return h.embedded != nil }

// Run processes records until ctx is canceled (a clean stop: the record in
// flight finishes, processed records are committed, the group is left) or
// a fatal error. Run may be called once. It first loads the global tables
// (tables.go) up to their topics' end offsets: no task processes a record
// before they are loaded, and a table that cannot be loaded is Run's error.
func (h *Host) Run(ctx context.Context) error {
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		// The shadows the control topic named at Load start now that
		// the runners exist (compiled here, off the record path).
		h.follower.SetShadowHost(fctx, shadowHost{h})
		h.follower.Run(fctx)
	}()
	purged := make(chan struct{})
	go func() {
		defer close(purged)
		h.purgeRepartitions(fctx)
	}()
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		h.reportShadows(fctx)
	}()
	advertised := make(chan struct{})
	go func() {
		defer close(advertised)
		if h.query != nil {
			h.advertise(fctx)
		}
	}()
	defer func() {
		stopFollow()
		<-followed
		<-purged
		<-reported
		<-advertised
	}()
	tctx, stopTables := context.WithCancel(ctx)
	tablesDone := make(chan struct{})
	err := h.loadTables(tctx, tablesDone)
	defer func() {
		stopTables()
		<-tablesDone
	}()
	if err == nil {
		err = h.runMembers(ctx)
	}
	h.status.Stopped(err)
	return err
}

// runMembers runs every member until ctx ends or one of them stops for
// good; then it stops the others (each commits what it processed and
// leaves the group) and returns the first error.
func (h *Host) runMembers(ctx context.Context) error {
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(h.members))
	for _, m := range h.members {
		go func() {
			errs <- h.runLoop(mctx, m)
			stop()
		}()
	}
	var first error
	for range h.members {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Backoff before a failed runner is replaced: the first wait, the most it
// grows to (doubling), and how long a runner must have run for the next
// failure to start from the first wait again.
const (
	restartFirstBackoff = time.Second
	restartMaxBackoff   = 30 * time.Second
	restartResetAfter   = 5 * time.Minute
)

// runLoop runs the runner and, when it stops on an error (its producer
// fenced after the process was paused past the transaction timeout, a
// transaction that could not end, outputs that kept failing), replaces it
// with a new one after a backoff instead of letting the process exit: the
// new runner rejoins the group with a new client and producer (the same
// transactional id, so the broker bumps the epoch), and its tasks continue
// from the committed offsets on the local state, which holds only
// committed changes (I2). It returns nil when ctx ends.
func (h *Host) runLoop(ctx context.Context, m *member) error {
	backoff := h.firstBackoff
	r := m.runner()
	for {
		started := time.Now()
		err := r.Run(ctx)
		if err != nil && ctx.Err() != nil && errors.Is(err, state.ErrWriteFailed) {
			// A store that could not be written as the process stops (a
			// full disk under the last commit window): the window was not
			// committed, and the next start restores the database from
			// its changelogs, as a restart here would have. Not a reason
			// for the process to fail its stop (host/smalldisk_test.go).
			h.log.Error("a state write failed as the host stopped; the next start restores from the changelogs", "err", err)
			return nil
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		if time.Since(started) > restartResetAfter {
			backoff = h.firstBackoff
		}
		for {
			h.log.Error("runner stopped; rejoining the group with a new client and producer", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, restartMaxBackoff)
			// A processor whose store could not be written (a full or
			// failing disk) starts again only on a database reopened.
			if err = h.recoverState(ctx, m); err != nil {
				continue
			}
			if r, err = runner.New(ctx, m.opts); err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		h.restarts.Add(1)
		h.setRunner(m, r)
	}
}

// Stats returns the counters of a processor in this process so far, or
// false if there is none by that name.
func (h *Host) Stats(processor string) (ProcessorStats, bool) {
	r := h.runnerOf(processor)
	if r == nil {
		return ProcessorStats{}, false
	}
	st := r.Stats(processor)
	if st == nil {
		return ProcessorStats{}, false
	}
	return ProcessorStats{
		RecordsIn:         st.RecordsIn.Load(),
		RecordsOut:        st.RecordsOut.Load(),
		Skipped:           st.Skipped.Load(),
		DeadLettered:      st.DeadLettered.Load(),
		FailedTasks:       st.FailedTasks.Load(),
		StoppedTasks:      st.StoppedTasks.Load(),
		Commits:           st.Commits.Load(),
		Aborts:            st.Aborts.Load(),
		RefusalAborts:     st.RefusalAborts.Load(),
		Swaps:             st.Swaps.Load(),
		SwapFailures:      st.SwapFailures.Load(),
		Rollbacks:         st.Rollbacks.Load(),
		Failures:          st.Failures(),
		HeldBytes:         st.HeldBytes.Load(),
		InstanceBytes:     st.InstanceBytes.Load(),
		BudgetCommits:     st.BudgetCommits.Load(),
		Migrations:        st.Migrations.Load(),
		MigrationFailures: st.MigrationFailures.Load(),
	}, true
}

// Versions reports, per processor, the version this process runs, the
// version of each of its tasks and the versions it refused. Safe for
// concurrent use.
func (h *Host) Versions() []ProcessorVersions {
	var out []ProcessorVersions
	for _, p := range h.procs {
		snap, ok := h.vers.Snapshot(p.Spec.Name)
		if !ok {
			continue
		}
		pv := ProcessorVersions{Processor: p.Spec.Name, Active: versionInfo(snap.Active), Tasks: snap.Tasks,
			Refusals: snap.Refusals}
		for _, r := range snap.Refused {
			pv.Refused = append(pv.Refused, Refusal{VersionInfo: versionInfo(r.Info), Reason: r.Reason, At: r.At})
		}
		out = append(out, pv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Processor < out[j].Processor })
	return out
}

// Ready reports whether every assigned task has finished restoring its
// state, so the process is processing all it owns.
func (h *Host) Ready() bool {
	if h.tablesLoading() > 0 {
		return false
	}
	for _, m := range h.members {
		if r := m.runner(); r == nil || r.Restoring() > 0 {
			return false
		}
	}
	return len(h.members) > 0
}

// stateful reports whether any processor has stores or tables.
func (h *Host) stateful() bool {
	for _, p := range h.cfg.Processors {
		if len(p.Stores) > 0 || len(p.Tables) > 0 || len(p.TaskTables) > 0 {
			return true
		}
	}
	return false
}

// Close releases the runtimes, the state and the embedded broker. Call it
// after Run returned.
func (h *Host) Close() error {
	ctx := context.Background()
	var errs []error
	if h.admin != nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		errs = append(errs, h.admin.Close(actx))
		cancel()
		h.admin = nil
	}
	if h.querySrv != nil {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		errs = append(errs, h.querySrv.Close(qctx))
		cancel()
		h.querySrv = nil
	}
	if h.query != nil {
		h.query.close()
	}
	for _, t := range h.tables {
		t.Close() // a no-op once Run's Follow closed it
	}
	errs = append(errs, h.closeState())
	if h.follower != nil {
		h.follower.Close()
		h.follower = nil
	}
	for _, p := range h.procs {
		errs = append(errs, p.RT.Close(ctx))
	}
	h.procs = nil
	if h.embedded != nil {
		h.removeEmbeddedBroker()
		h.embedded.Close()
		h.embedded = nil
	}
	return errors.Join(errs...)
}

// loadPlugins compiles every processor's plugin into its own runtime (the
// memory limit is a runtime setting) and checks it instantiates.
func (h *Host) loadPlugins(ctx context.Context) error {
	lim := h.limits
	for i := range h.cfg.Processors {
		pc := &h.cfg.Processors[i]
		p, err := plugin.Load(ctx, h.cfg.pluginSpec(pc), lim, h.log)
		if p != nil {
			if err != nil {
				_ = p.RT.Close(ctx)
			} else {
				h.procs = append(h.procs, p)
			}
		}
		if err != nil {
			return loadError(i, pc, err)
		}
	}
	return nil
}

// stateCache is a processor's record cache per task for the runner:
// bytes, negative for none.
func stateCache(pc *ProcessorConfig) int {
	if n := pc.StateCache.Bytes(state.DefaultRecordCacheBytes); n > 0 {
		return n
	}
	return -1
}

// loadError is the error of processors[i]'s plugin: a path that does not
// exist says so; a start that failed asking for outputs or stores the
// processor does not declare (engine.ModuleError.Undeclared) gets the
// config field to add each to.
func loadError(i int, pc *ProcessorConfig, err error) error {
	if _, serr := os.Stat(pc.Plugin); errors.Is(serr, fs.ErrNotExist) {
		return fmt.Errorf("processors[%d].plugin (%s): %s not found (build the plugin first? a relative plugin path is relative to the config file's directory)",
			i, pc.Name, pc.Plugin)
	}
	err = fmt.Errorf("processors[%d] (%s): %w", i, pc.Name, err)
	var me *engine.ModuleError
	if !errors.As(err, &me) || len(me.Undeclared) == 0 {
		return err
	}
	var fixes []string
	for _, u := range me.Undeclared {
		if u.Kind == "output" {
			fixes = append(fixes, fmt.Sprintf("add output %q to processors[%d].outputs (%s: <topic>)", u.Name, i, u.Name))
		} else {
			fixes = append(fixes, fmt.Sprintf("add store %q to processors[%d].stores", u.Name, i))
		}
	}
	return fmt.Errorf("%w\nfix: %s", err, strings.Join(fixes, "; "))
}

// ensureTopics makes sure the app's topics exist (package topics). An
// unreachable cluster is an error after brokerTimeout.
func (h *Host) ensureTopics(ctx context.Context, create bool) error {
	cl, err := h.kafka.NewClient()
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()
	procs := make([]topics.Processor, len(h.cfg.Processors))
	for i := range h.cfg.Processors {
		pc := &h.cfg.Processors[i]
		// Task tables are inputs (co-partitioned with the others) and
		// tables (created compacted); their topic is their changelog.
		outputs := map[string]string{}
		for name, o := range pc.Outputs {
			outputs[name] = o.Topic
		}
		procs[i] = topics.Processor{Name: pc.Name, Inputs: h.cfg.runnerInputs(pc), Outputs: outputs,
			Repartition: h.cfg.repartitionTopics(pc), RepartitionPartitions: int32(pc.RepartitionPartitions),
			Changelogs: map[string]string{}, Tables: map[string]string{}}
		maps.Copy(procs[i].Tables, pc.Tables)
		maps.Copy(procs[i].Tables, pc.TaskTables)
		for _, st := range h.cfg.taskStores(pc) {
			if _, ok := pc.TaskTables[st]; !ok {
				procs[i].Changelogs[st] = h.cfg.ChangelogTopic(st)
			}
		}
		if pc.OnError == OnErrorDeadLetter {
			procs[i].DeadLetter = h.cfg.DeadLetterTopic(pc)
		}
	}
	adm := kadm.NewClient(cl)
	err = topics.Ensure(ctx, adm, topics.Want{
		Processors: procs,
		Create:     create,
		Partitions: int32(h.cfg.Kafka.TopicPartitions),
		Brokers:    strings.Join(h.brokers, ","),
	}, h.log)
	if err != nil {
		return err
	}
	h.warnInstanceMemory(ctx, adm)
	return nil
}

// memoryPool is the process's account pool: runtime.memory_budget, of
// which the instances' linear memory may take all but twice the largest
// limits.window_bytes (Config.instanceRoom).
func (h *Host) memoryPool() *account.Pool {
	p := account.NewPool(int64(h.cfg.Runtime.MemoryBudget))
	p.SetInstanceRoom(h.cfg.instanceRoom())
	return p
}

// warnInstanceMemory logs, once at start, when the tasks this process may
// be assigned (every input partition) could not all grow their instances
// to limits.memory within runtime.memory_budget (Config.instanceMemoryWarning).
// A topic it cannot describe is left out: the warning is advice.
func (h *Host) warnInstanceMemory(ctx context.Context, adm *kadm.Client) {
	var inputs []string
	for i := range h.cfg.Processors {
		inputs = append(inputs, h.cfg.runnerInputs(&h.cfg.Processors[i])...)
	}
	details, err := adm.ListTopics(ctx, inputs...)
	if err != nil {
		return
	}
	parts := map[string]int32{}
	for topic, d := range details {
		if d.Err == nil {
			parts[topic] = int32(len(d.Partitions))
		}
	}
	if w := h.cfg.instanceMemoryWarning(parts); w != "" {
		h.log.Warn(w)
	}
}

// Validate checks a config's plugins without Kafka: each compiles, speaks a
// supported ABI and initializes with its config. It returns every problem.
// Like New it applies defaults to a copy of cfg and validates it first.
// It compiles through runtime.cache_dir, as Run does, so a validated
// deployment starts without compiling again.
func Validate(ctx context.Context, cfg *Config, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.Clone()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	lim, err := cfg.pluginLimits()
	if err != nil {
		return err
	}
	var errs []error
	for i := range cfg.Processors {
		pc := &cfg.Processors[i]
		p, err := plugin.Load(ctx, cfg.pluginSpec(pc), lim, log)
		if p != nil {
			_ = p.RT.Close(ctx)
		}
		if err != nil {
			errs = append(errs, loadError(i, pc, err))
		}
	}
	return errors.Join(errs...)
}

// InspectPlugin validates a module and describes it, under the default
// module limits and compile budget (runtime.module_limits).
func InspectPlugin(ctx context.Context, wasm []byte) (PluginInfo, error) {
	return InspectPluginWith(ctx, wasm, nil)
}

// InspectPluginWith is InspectPlugin under cfg's runtime.module_limits
// (the defaults for a nil cfg).
func InspectPluginWith(ctx context.Context, wasm []byte, cfg *Config) (PluginInfo, error) {
	lim := engine.ModuleLimits{Settings: budgetSettings}
	if cfg != nil {
		c := cfg.Clone()
		c.ApplyDefaults()
		lim = c.moduleLimits().Module
	}
	info, err := engine.InspectWith(ctx, wasm, lim)
	if err != nil {
		return PluginInfo{}, err
	}
	out := pluginInfo(info)
	pluginSignature(&out, wasm)
	return out, nil
}

// instanceID names this process's transactional producer. It is new at
// every start: zombie processes are fenced through the consumer group
// generation that every transactional offset commit carries (KIP-447),
// not through the transactional id.
func instanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// brokerTimeout bounds the first contact with Kafka, so an unreachable
// broker is an error, not a hang.
const brokerTimeout = 15 * time.Second
