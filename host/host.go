// Package host is wasmstream's embedding API: load a Config, New, Run, Close.
// The host owns everything that must be correct (Kafka I/O, the consumer
// group, commits, plugin lifecycle and limits); plugins only process records.
package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/kafkasec"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Host runs the processors of one Config in this process.
type Host struct {
	cfg      *Config
	log      *slog.Logger
	state    *state.DB // nil when no processor has stores
	runtimes []*engine.Runtime
	procs    []*loadedProcessor
	embedded *kfake.Cluster
	brokers  []string
	// kafkaOpts start every Kafka client's options: client id, TLS, SASL
	// (Config.clientOpts).
	kafkaOpts []kgo.Opt
	runner    *runner.Runner
	admin     *admin.Server         // nil when admin.listen is empty
	started   atomic.Bool           // New finished: the fields above are set
	runErr    atomic.Pointer[error] // Run's error, for /healthz

	// The control topic: the plugin versions deployed to the app.
	ctlTopic  string
	ctlReader *control.Reader
	versions  map[string]*procVersions // by processor
	pubMu     sync.Mutex
	publisher *control.Publisher // made on the first automatic rollback
}

type loadedProcessor struct {
	cfg     *ProcessorConfig
	rt      *engine.Runtime
	module  *engine.Module // the version the host starts with
	binding engine.Binding // Sink is set per task
	topics  []string       // output topics in output-index order
	// configVersion is the config file's plugin; version the one the host
	// starts with (the control topic's, when it has one).
	configVersion control.Version
	version       control.Version
}

// Option changes how New builds a Host.
type Option func(*options)

type options struct {
	logger       *slog.Logger
	embeddedPort int
	onRestore    func(RestoreProgress)
	restore      restore.Config // tests tune fetch and batch sizes
}

// RestoreProgress is the progress of one store's restore.
type RestoreProgress = restore.Progress

// WithRestoreProgress calls fn with the progress of every state restore
// (after each applied batch and at the end), for progress bars. fn must
// return quickly.
func WithRestoreProgress(fn func(RestoreProgress)) Option {
	return func(o *options) { o.onRestore = fn }
}

// WithLogger sets the host's logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithEmbeddedPort fixes the port of the embedded development broker
// (used when kafka.brokers is empty). Default 0: any free port.
func WithEmbeddedPort(port int) Option { return func(o *options) { o.embeddedPort = port } }

// New compiles and validates every plugin, connects to Kafka (or starts the
// embedded development broker when kafka.brokers is empty), makes sure the
// topics exist, and prepares the consumer. Nothing is consumed before Run.
func New(ctx context.Context, cfg *Config, opts ...Option) (_ *Host, err error) {
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	h := &Host{cfg: cfg, log: o.logger}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	// The admin endpoint first: a taken address fails before plugins
	// compile and Kafka is contacted, and /healthz answers during both.
	if cfg.Admin.Listen != "" {
		if h.admin, err = admin.New(cfg.Admin.Listen, adminSource{h}, h.log); err != nil {
			return nil, err
		}
	}
	if err := h.loadPlugins(ctx); err != nil {
		return nil, err
	}
	h.brokers = cfg.Kafka.Brokers
	if h.kafkaOpts, err = cfg.clientOpts(); err != nil {
		return nil, err
	}
	for _, w := range cfg.Kafka.securityWarnings() {
		h.log.Warn(w)
	}
	createTopics := cfg.Kafka.CreateTopics
	if len(h.brokers) == 0 {
		if err := h.startEmbedded(o.embeddedPort); err != nil {
			return nil, err
		}
		createTopics = true
	} else if err := kafkasec.Check(ctx, h.brokers, cfg.Kafka.security()); err != nil {
		// One line naming the setting to change (wrong password, unknown
		// CA, plaintext to a TLS listener), before any other client tries.
		return nil, err
	}
	if err := h.ensureTopics(ctx, createTopics); err != nil {
		return nil, err
	}
	if err := h.loadControl(ctx); err != nil {
		return nil, err
	}
	if h.stateful() {
		db, err := state.Open(cfg.StateDir(), state.Options{Logger: h.log, SyncInterval: cfg.State.SyncInterval})
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		h.state = db
	}
	specs := make([]runner.ProcessorSpec, len(h.procs))
	for i, p := range h.procs {
		specs[i] = runner.ProcessorSpec{
			Name:            p.cfg.Name,
			Inputs:          p.cfg.Inputs,
			Outputs:         p.topics,
			OnError:         p.cfg.OnError,
			DeadLetterTopic: cfg.DeadLetterTopic(p.cfg),
			Plugin:          &pluginFactory{module: p.module, binding: p.binding, version: versionID(p.version)},
			Version:         versionID(p.version),
			Stores:          p.cfg.Stores,
		}
		for _, st := range p.cfg.Stores {
			specs[i].Changelogs = append(specs[i].Changelogs, cfg.ChangelogTopic(st))
		}
	}
	h.runner, err = runner.New(ctx, runner.Options{
		AppID:              cfg.AppID,
		Brokers:            h.brokers,
		ClientID:           cfg.Kafka.ClientID,
		CommitInterval:     cfg.Kafka.CommitInterval,
		CommitRecords:      cfg.Kafka.CommitRecords,
		StartOffset:        cfg.Kafka.StartOffset,
		SessionTimeout:     cfg.Kafka.SessionTimeout,
		GroupProtocol:      cfg.Kafka.GroupProtocol,
		ExactlyOnce:        cfg.Guarantee == ExactlyOnce,
		TransactionalID:    cfg.AppID + "-" + instanceID(),
		TransactionTimeout: cfg.Kafka.TransactionTimeout,
		Processors:         specs,
		State:              h.state,
		Logger:             h.log,
		OnRollback:         h.onRollback,
		OnRestoreProgress:  o.onRestore,
		Restore:            withClientOpts(o.restore, h.kafkaOpts),
		ExtraOpts:          h.kafkaOpts,
	})
	if err != nil {
		return nil, err
	}
	h.started.Store(true)
	return h, nil
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
// a fatal error. Run may be called once.
func (h *Host) Run(ctx context.Context) error {
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		h.follow(fctx)
	}()
	defer func() {
		stopFollow()
		<-followed
	}()
	err := h.runner.Run(ctx)
	if err != nil {
		h.runErr.Store(&err)
	}
	return err
}

// Stats returns the counters of a processor, or nil if there is none by
// that name.
func (h *Host) Stats(processor string) *runner.Stats {
	if h.runner == nil {
		return nil
	}
	return h.runner.Stats(processor)
}

// Ready reports whether every assigned task has finished restoring its
// state, so the process is processing all it owns.
func (h *Host) Ready() bool { return h.runner != nil && h.runner.Restoring() == 0 }

// stateful reports whether any processor has stores.
func (h *Host) stateful() bool {
	for _, p := range h.cfg.Processors {
		if len(p.Stores) > 0 {
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
	if h.state != nil {
		errs = append(errs, h.state.Close())
		h.state = nil
	}
	if h.ctlReader != nil {
		h.ctlReader.Close()
		h.ctlReader = nil
	}
	h.pubMu.Lock()
	if h.publisher != nil {
		h.publisher.Close()
		h.publisher = nil
	}
	h.pubMu.Unlock()
	for _, rt := range h.runtimes {
		errs = append(errs, rt.Close(ctx))
	}
	h.runtimes = nil
	if h.embedded != nil {
		h.embedded.Close()
		h.embedded = nil
	}
	return errors.Join(errs...)
}

// loadPlugins compiles every processor's plugin into its own runtime (the
// memory limit is a runtime setting) and checks it instantiates.
func (h *Host) loadPlugins(ctx context.Context) error {
	cacheDir := compileCacheDir(h.cfg)
	for i := range h.cfg.Processors {
		pc := &h.cfg.Processors[i]
		lp, rt, err := loadProcessor(ctx, pc, cacheDir, h.cfg.Runtime.MaxModuleSize, h.log)
		if rt != nil {
			h.runtimes = append(h.runtimes, rt)
		}
		if err != nil {
			return fmt.Errorf("processors[%d] (%s): %w", i, pc.Name, err)
		}
		h.procs = append(h.procs, lp)
	}
	return nil
}

// compileCacheDir is the directory of compiled modules runtime.cache_dir
// names ("" for none).
func compileCacheDir(cfg *Config) string {
	cacheDir := cfg.Runtime.CacheDir
	if cacheDir == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(dir, "wasmstream")
		}
	}
	if cacheDir == "off" {
		cacheDir = ""
	}
	return cacheDir
}

func loadProcessor(ctx context.Context, pc *ProcessorConfig, cacheDir string, maxModuleSize ByteSize, log *slog.Logger) (*loadedProcessor, *engine.Runtime, error) {
	wasm, err := os.ReadFile(pc.Plugin)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin: %w", err)
	}
	lp, err := newProcessor(ctx, pc, cacheDir, log)
	if err != nil {
		return nil, nil, err
	}
	if uint64(len(wasm)) > uint64(maxModuleSize) {
		return nil, lp.rt, fmt.Errorf("plugin %s: %d bytes is over runtime.max_module_size (%d)", pc.Plugin, len(wasm), maxModuleSize)
	}
	lp.configVersion = control.NewVersion(wasm, "config")
	lp.version = lp.configVersion
	if lp.module, err = lp.compile(ctx, wasm); err != nil {
		return nil, lp.rt, fmt.Errorf("plugin %s: %w", pc.Plugin, err)
	}
	return lp, lp.rt, nil
}

// newProcessor makes the processor's runtime (its limits) and binding (its
// config, outputs and stores), ready to compile versions of its plugin.
// The caller closes lp.rt.
func newProcessor(ctx context.Context, pc *ProcessorConfig, cacheDir string, log *slog.Logger) (*loadedProcessor, error) {
	conf, err := json.Marshal(pc.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if pc.Config == nil {
		conf = []byte("{}")
	}
	rt, err := engine.NewRuntime(ctx, engine.Options{
		CacheDir:      cacheDir,
		MemoryLimit:   uint64(pc.Limits.Memory),
		RecordTimeout: pc.Limits.RecordTimeout,
		Logger:        log,
	})
	if err != nil {
		return nil, fmt.Errorf("wasm runtime: %w", err)
	}
	names := pc.OutputNames()
	topics := make([]string, len(names))
	for i, n := range names {
		topics[i] = pc.Outputs[n]
	}
	return &loadedProcessor{
		cfg:     pc,
		rt:      rt,
		binding: engine.Binding{Name: pc.Name, Outputs: names, Stores: pc.Stores, Config: conf},
		topics:  topics,
	}, nil
}

// compile compiles a version of the processor's plugin and instantiates it
// once with the processor's binding, so a module whose init fails is
// refused before any task uses it.
func (lp *loadedProcessor) compile(ctx context.Context, wasm []byte) (*engine.Module, error) {
	mod, err := lp.rt.Compile(ctx, lp.cfg.Name, wasm)
	if err != nil {
		return nil, err
	}
	check := lp.binding
	// Its log lines (a plugin's init may log) belong to no task.
	check.LogAttrs = []slog.Attr{slog.String("instance", "load-check")}
	check.Sink = discardSink{}
	if len(lp.cfg.Stores) > 0 {
		check.State = noState{}
	}
	inst, err := mod.Instantiate(ctx, check)
	if err != nil {
		_ = mod.Close(ctx)
		return nil, err
	}
	_ = inst.Close(ctx)
	return mod, nil
}

// discardSink takes the emits of the trial instance, which processes no
// record (emits during init are refused by the engine anyway).
type discardSink struct{}

func (discardSink) Emit(int, *abi.Record) error { return nil }

// noState serves the trial instance, which may not touch state during init
// anyway (the engine refuses it with EPHASE).
type noState struct{}

func (noState) Get(int, []byte) ([]byte, bool, error)             { return nil, false, nil }
func (noState) Put(int, []byte, []byte) error                     { return nil }
func (noState) Delete(int, []byte) error                          { return nil }
func (noState) Scan(int, []byte, []byte) (engine.Iterator, error) { return nil, errors.New("no state") }

// taskState adapts a task's state to the engine's State interface.
type taskState struct{ *state.Task }

func (s taskState) Scan(store int, start, end []byte) (engine.Iterator, error) {
	it, err := s.Task.Scan(store, start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// pluginFactory makes one engine instance per task of one plugin version.
type pluginFactory struct {
	module  *engine.Module
	binding engine.Binding
	version string // the version's ID, on its plugin's log lines
}

func (p *pluginFactory) Instantiate(ctx context.Context, task runner.TaskID, sink runner.Sink, st *state.Task) (runner.Processor, error) {
	b := p.binding
	b.LogAttrs = []slog.Attr{slog.String("task", task.String()), slog.String("version", p.version)}
	b.Sink = sink
	if st != nil {
		b.State = taskState{st}
	}
	inst, err := p.module.Instantiate(ctx, b)
	if err != nil {
		return nil, err
	}
	return instance{inst}, nil
}

// instance adapts an engine instance to the runner, classifying failures.
type instance struct{ *engine.Instance }

func (i instance) Process(ctx context.Context, rec *abi.Record) error {
	if err := i.Instance.Process(ctx, rec); err != nil {
		return classified{err}
	}
	return nil
}

// classified gives an engine error the kind label the runner uses in
// metrics and dead-letter headers: trap, timeout, memory_limit,
// abi_misuse, plugin_failed, host_failed, instance_lost.
type classified struct{ error }

func (c classified) Unwrap() error { return c.error }

func (c classified) FailureKind() string {
	k := engine.KindOf(c.error)
	if k == 0 {
		return "error"
	}
	return strings.ReplaceAll(strings.ToLower(k.String()), " ", "_")
}

// Validate checks a config's plugins without Kafka: each compiles, speaks a
// supported ABI and initializes with its config. It returns every problem.
func Validate(ctx context.Context, cfg *Config, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	var errs []error
	for i := range cfg.Processors {
		pc := &cfg.Processors[i]
		_, rt, err := loadProcessor(ctx, pc, "", cfg.Runtime.MaxModuleSize, log)
		if rt != nil {
			_ = rt.Close(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("processors[%d] (%s): %w", i, pc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// PluginInfo describes a module for `wasmstream plugin inspect`.
type PluginInfo = engine.Info

// InspectPlugin validates a module and describes it.
func InspectPlugin(ctx context.Context, wasm []byte) (PluginInfo, error) {
	return engine.Inspect(ctx, wasm)
}

// startEmbedded starts the in-process development broker (franz-go's kfake)
// on 127.0.0.1.
func (h *Host) startEmbedded(port int) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DefaultNumPartitions(h.cfg.Kafka.TopicPartitions),
		// Members hear of a rebalance within a second (default 5 s).
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "1000"}))
	if err != nil {
		return fmt.Errorf("embedded kafka: %w", err)
	}
	h.embedded = c
	h.brokers = c.ListenAddrs()
	h.log.Warn("no kafka.brokers configured: started an embedded in-process Kafka for development only; data is not durable",
		"address", strings.Join(h.brokers, ","))
	return nil
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
