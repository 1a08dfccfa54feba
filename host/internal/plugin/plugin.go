// Package plugin holds a processor's plugin as the host runs it: the Wasm
// runtime with the processor's limits, its compiled versions, the binding
// (config, outputs, stores) every instance gets, and the adapters that
// make an engine instance a runner Processor (failures classified by kind).
// It is also the one place that bounds a module's size
// (runtime.max_module_size) before anything compiles it (I6).
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/signature"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Spec is a processor as its plugin sees it (from the host's config).
type Spec struct {
	Name    string
	Path    string            // the config file's plugin
	Inputs  []string          // topics read
	Outputs map[string]string // output name -> topic
	Stores  []string
	// Tables are the processor's global tables, read-only stores after
	// Stores (engine.Binding.Tables); the host sets Binding.TableState.
	Tables []string
	// TaskTables are the processor's task tables, read-only stores after
	// Tables. Each is a store of the task's state, after Stores (the
	// runner writes it from its topic): an instance reads it there.
	TaskTables []string
	OnError    string
	Config     map[string]any // handed to the plugin as JSON; nil: {}
	// Memory bounds an instance's linear memory (bytes); RecordTimeout
	// the wall time of one record.
	Memory        uint64
	RecordTimeout time.Duration
	// Stack, Record and Log are the instance's stack, per-record staging
	// and log-rate limits (zero fields: the engine's defaults).
	Stack  int
	Record engine.RecordLimits
	Log    engine.LogLimits
}

// Limits are the host-wide bounds of every module.
type Limits struct {
	// CacheDir keeps compiled modules between runs; "" for none.
	CacheDir string
	// MaxModuleSize bounds a module's bytes, from the config or deployed.
	MaxModuleSize uint64
	// CompileTimeout bounds one compile; Module the shape of a module
	// (zero fields: the engine's defaults).
	CompileTimeout time.Duration
	Module         engine.ModuleLimits
	// Trust, if set, is runtime.trusted_keys: Compile refuses a module
	// not signed by one of its keys (abi/ABI.md section 11) before
	// anything else reads it. Nil: modules need no signature.
	Trust *signature.Trust
	// Snapshots, if set, is charged the snapshots of the plugins' inits
	// (engine.Options.Snapshots): the process's account pool.
	Snapshots engine.MemoryAccount
}

// CheckSize refuses a module over the size limit: the one check every
// path that compiles a module (startup, the control topic, deploy) makes
// first.
func (l Limits) CheckSize(wasm []byte) error { return l.CheckSizeOf(int64(len(wasm))) }

// CheckSizeOf is CheckSize of a module of n bytes, before its bytes are
// read (the size a control-topic manifest gives).
func (l Limits) CheckSizeOf(n int64) error {
	if n < 0 || uint64(n) > l.MaxModuleSize {
		return fmt.Errorf("the module is %d bytes, over runtime.max_module_size (%s)", n, FormatSize(l.MaxModuleSize))
	}
	return nil
}

// FormatSize writes n bytes with the largest binary unit that divides it
// (64MiB, 1KiB, 1000): the form sizes take in the config.
func FormatSize(n uint64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "KiB"
	}
	return strconv.FormatUint(n, 10)
}

// CacheDir is the directory of compiled modules runtime.cache_dir names
// ("" for none): the user cache directory's "wasmstream" by default, none
// for "off".
func CacheDir(configured string) string {
	if configured == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			configured = filepath.Join(dir, "wasmstream")
		}
	}
	if configured == "off" {
		return ""
	}
	return configured
}

// Processor is a processor's plugin: its runtime and binding, ready to
// compile versions, and the version it starts with.
type Processor struct {
	Spec    Spec
	RT      *engine.Runtime
	Binding engine.Binding // Sink is set per task
	Topics  []string       // output topics in output-index order
	// Module is the version the host starts with, Version its identity,
	// until the version registry takes it over (follower.Load): the
	// registry then owns the module (it closes it once the version is
	// released) and Module is nil. StartInfo describes it all along.
	// ConfigVersion is the config file's plugin's (it differs from
	// Version when the control topic names another).
	Module        *engine.Module
	StartInfo     engine.Info
	Version       control.Version
	ConfigVersion control.Version
	// trust is Limits.Trust: Compile verifies every version with it.
	trust *signature.Trust
}

// Load reads, bounds and compiles the config file's plugin of spec. The
// caller closes p.RT when p is non-nil, even with an error.
func Load(ctx context.Context, spec Spec, lim Limits, log *slog.Logger) (*Processor, error) {
	wasm, err := os.ReadFile(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	p, err := New(ctx, spec, lim, log)
	if err != nil {
		return nil, err
	}
	if err := lim.CheckSize(wasm); err != nil {
		return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
	}
	p.ConfigVersion = control.NewVersion(wasm, "config")
	p.Version = p.ConfigVersion
	if p.Module, err = p.Compile(ctx, wasm); err != nil {
		return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
	}
	p.StartInfo = p.Module.Info()
	return p, nil
}

// New makes the processor's runtime (its limits) and binding (its config,
// outputs and stores), ready to compile versions of its plugin. The
// caller closes p.RT.
func New(ctx context.Context, spec Spec, lim Limits, log *slog.Logger) (*Processor, error) {
	conf, err := json.Marshal(spec.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if spec.Config == nil {
		conf = []byte("{}")
	}
	rt, err := engine.NewRuntime(ctx, engine.Options{
		CacheDir:       lim.CacheDir,
		MemoryLimit:    spec.Memory,
		RecordTimeout:  spec.RecordTimeout,
		Logger:         log,
		StackLimit:     spec.Stack,
		CompileTimeout: lim.CompileTimeout,
		Module:         lim.Module,
		Record:         spec.Record,
		Log:            spec.Log,
		Snapshots:      lim.Snapshots,
	})
	if err != nil {
		return nil, fmt.Errorf("wasm runtime: %w", err)
	}
	names := OutputNames(spec.Outputs)
	topics := make([]string, len(names))
	for i, n := range names {
		topics[i] = spec.Outputs[n]
	}
	return &Processor{
		Spec: spec,
		RT:   rt,
		Binding: engine.Binding{Name: spec.Name, Outputs: names, Stores: spec.Stores,
			Tables: slices.Concat(spec.Tables, spec.TaskTables), Config: conf},
		Topics: topics,
		trust:  lim.Trust,
	}, nil
}

// OutputNames returns output names in index order (sorted).
func OutputNames(outputs map[string]string) []string {
	names := make([]string, 0, len(outputs))
	for n := range outputs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Compile compiles a version of the processor's plugin and instantiates it
// once with the processor's binding, so a module whose init fails is
// refused before any task uses it. A module that sets timers is refused
// for a processor without a store (CheckStores). With trusted keys, a
// module that is not signed by one of them is refused first: every path
// that runs a version (startup, validate, deploy, the control topic)
// compiles it here, and the compiler never reads an untrusted module.
func (p *Processor) Compile(ctx context.Context, wasm []byte) (*engine.Module, error) {
	if p.trust != nil {
		if err := p.trust.Verify(wasm); err != nil {
			return nil, err
		}
	}
	mod, err := p.RT.Compile(ctx, p.Spec.Name, wasm)
	if err != nil {
		return nil, err
	}
	if err := CheckStores(p.Spec, mod.Info()); err != nil {
		_ = mod.Close(ctx)
		return nil, err
	}
	check := p.Binding
	if mod.Info().UsesTime() {
		check.Time = noTime{}
	}
	// Its log lines (a plugin's init may log) belong to no task.
	check.LogAttrs = []slog.Attr{slog.String("instance", "load-check")}
	check.Sink = discardSink{}
	if len(p.Spec.Stores) > 0 {
		check.State = noState{}
	}
	if len(p.Spec.Tables)+len(p.Spec.TaskTables) > 0 {
		check.TableState = noState{}
	}
	inst, err := mod.Instantiate(ctx, check)
	if err != nil {
		_ = mod.Close(ctx)
		return nil, err
	}
	_ = inst.Close(ctx)
	return mod, nil
}

// Factory makes the runner's Plugin of a compiled version of p; version is
// its ID, on its instances' log lines.
func (p *Processor) Factory(mod *engine.Module, version string) runner.Plugin {
	return &factory{module: mod, binding: p.Binding, version: version, taskTables: len(p.Spec.TaskTables)}
}

// CheckStores is the load-time rule of abi/ABI.md section 8.2 that needs
// the processor: a module importing timer_set needs a store, because the
// host keeps a task's timers with its state (committed, restored and moved
// with its stores).
func CheckStores(spec Spec, info engine.Info) error {
	if info.ImportsTimerSet && len(spec.Stores)+len(spec.TaskTables) == 0 {
		return fmt.Errorf("processor %q: the plugin imports %s.%s but the processor declares no store or task table: timers are kept in the task's state, so declare one in its stores",
			spec.Name, abi.ImportModule, abi.ImportTimerSet)
	}
	return nil
}

// noTime serves the trial instance, which may not use time during init
// anyway (the engine refuses it with EPHASE).
type noTime struct{}

func (noTime) Now() (int64, int64) { return abi.NoTime, 0 }
func (noTime) SetTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errors.New("no time")
}
func (noTime) CancelTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errors.New("no time")
}
func (noTime) Mark([]byte, int64) (bool, error) { return false, errors.New("no time") }

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

// taskState adapts a task's state to the engine's State interface: the
// store's disk budget error becomes the engine's, which gives the plugin
// ELIMIT.
type taskState struct{ *state.Task }

func (s taskState) Put(store int, key, value []byte) error {
	return stateLimit(s.Task.Put(store, key, value))
}

// stateLimit marks a disk budget error as the engine's ErrStateLimit, and
// an entry its changelog would refuse as the engine's ErrStateTooLarge.
func stateLimit(err error) error {
	switch {
	case errors.Is(err, state.ErrDiskBudget):
		return fmt.Errorf("%w: %w", engine.ErrStateLimit, err)
	case errors.Is(err, state.ErrEntryTooLarge):
		return fmt.Errorf("%w: %w", engine.ErrStateTooLarge, err)
	}
	return err
}

func (s taskState) Scan(store int, start, end []byte) (engine.Iterator, error) {
	it, err := s.Task.Scan(store, start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// overlayState adapts a shadow's state overlay to the engine's State.
type overlayState struct{ runner.StateView }

func (s overlayState) Scan(store int, start, end []byte) (engine.Iterator, error) {
	it, err := s.StateView.Scan(store, start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// factory makes one engine instance per task of one plugin version.
type factory struct {
	module  *engine.Module
	binding engine.Binding
	version string // the version's ID, on its plugin's log lines
	// taskTables is how many of the binding's Tables are task tables (the
	// last ones).
	taskTables int
}

// Close closes the version's module (released once its last instance
// closes).
func (f *factory) Close(ctx context.Context) error { return f.module.Close(ctx) }

func (f *factory) Instantiate(ctx context.Context, task runner.TaskID, env runner.Env) (runner.Processor, error) {
	b := f.binding
	b.LogAttrs = []slog.Attr{slog.String("task", task.String()), slog.String("version", f.version)}
	b.Sink = env.Sink
	if env.State != nil {
		b.State = taskState{env.State}
	}
	if env.Overlay != nil {
		b.State = overlayState{env.Overlay} // a shadow's (runner.Env.Overlay)
	}
	if f.taskTables > 0 {
		if env.State == nil {
			return nil, fmt.Errorf("task %s: the processor has task tables but the task has no state", task)
		}
		b.TableState = tableView{global: b.TableState, globals: len(b.Tables) - f.taskTables,
			task: env.State, first: len(b.Stores)}
	}
	if env.Time != nil {
		b.Time = taskTime{env.Time}
	}
	if env.Memory != nil {
		b.Memory = env.Memory // the task's account: its instances' memory is charged to it
	}
	b.StartLater = !env.Ahead
	inst, err := f.module.Instantiate(ctx, b)
	if err != nil {
		return nil, err
	}
	info := f.module.Info()
	return &instance{Instance: inst, onTimer: info.HasOnTimer, onCommit: info.HasOnCommit, migrate: info.HasMigrate}, nil
}

// taskTime adapts a task's time to the engine's Time: the runner's limit
// errors become the engine's, which give the plugin ELIMIT.
type taskTime struct{ runner.Time }

func (t taskTime) SetTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	added, err := t.Time.SetTimer(kind, ts, key)
	if errors.Is(err, runner.ErrTimerLimit) {
		err = fmt.Errorf("%w: %w", engine.ErrTimerLimit, err)
	}
	return added, stateLimit(err)
}

func (t taskTime) Mark(key []byte, ts int64) (bool, error) {
	added, err := t.Time.Mark(key, ts)
	if errors.Is(err, runner.ErrMarkLimit) {
		err = fmt.Errorf("%w: %w", engine.ErrMarkLimit, err)
	}
	return added, err
}

// instance adapts an engine instance to the runner (a runner.Processor,
// BatchProcessor and TimeProcessor), classifying failures: the one layer
// between the two.
type instance struct {
	*engine.Instance
	// onTimer and onCommit say which time callbacks the module exports.
	onTimer, onCommit bool
	// migrate says whether it exports wasmstream_migrate.
	migrate bool
	// calls and hooks are ProcessBatch's, reused: the runner's calls as
	// the engine's, and its hooks with failures classified.
	calls []engine.Call
	hooks classified
}

// ProcessBatch implements runner.BatchProcessor.
func (i *instance) ProcessBatch(ctx context.Context, calls []runner.Call, h runner.CallHooks, yieldAt time.Time) int {
	i.calls = i.calls[:0]
	for _, c := range calls {
		i.calls = append(i.calls, engine.Call{Record: c.Record, Trigger: c.Trigger})
	}
	i.hooks.h = h
	n := i.Instance.ProcessBatch(ctx, i.calls, &i.hooks, yieldAt)
	i.hooks.h = nil
	clear(i.calls) // no record kept past the batch
	return n
}

// classified are a runner's hooks as the engine's: a call's failure gets
// its kind (RecordFailure).
type classified struct{ h runner.CallHooks }

func (c *classified) Begin(k int) { c.h.Begin(k) }

func (c *classified) End(k int, err error) bool {
	if err != nil {
		err = RecordFailure(err)
	}
	return c.h.End(k, err)
}

// TimeCallbacks implements runner.TimeProcessor.
func (i *instance) TimeCallbacks() (onTimer, onCommit bool) { return i.onTimer, i.onCommit }

// OnTimer implements runner.TimeProcessor.
func (i *instance) OnTimer(ctx context.Context, trig *abi.Trigger) error {
	if err := i.Instance.OnTimer(ctx, trig); err != nil {
		return RecordFailure(err)
	}
	return nil
}

// OnCommit implements runner.TimeProcessor.
func (i *instance) OnCommit(ctx context.Context, trig *abi.Trigger) error {
	if err := i.Instance.OnCommit(ctx, trig); err != nil {
		return RecordFailure(err)
	}
	return nil
}

// Migrates implements runner.Migrator.
func (i *instance) Migrates() bool { return i.migrate }

// Migrate implements runner.Migrator.
func (i *instance) Migrate(ctx context.Context, from string) error {
	if err := i.Instance.Migrate(ctx, from); err != nil {
		return RecordFailure(err)
	}
	return nil
}

// Process implements runner.Processor.
func (i *instance) Process(ctx context.Context, rec *abi.Record) error {
	if err := i.Instance.Process(ctx, rec); err != nil {
		return RecordFailure(err)
	}
	return nil
}

// failureKinds maps the engine's failure kinds to the runner's labels
// (metrics and dead-letter headers).
var failureKinds = map[engine.FailureKind]runner.FailureKind{
	engine.Trap:          runner.FailureTrap,
	engine.Timeout:       runner.FailureTimeout,
	engine.MemoryLimit:   runner.FailureMemoryLimit,
	engine.ABIMisuse:     runner.FailureABIMisuse,
	engine.PluginFailed:  runner.FailurePluginFailed,
	engine.HostFailed:    runner.FailureHostFailed,
	engine.InstanceLost:  runner.FailureInstanceLost,
	engine.StackLimit:    runner.FailureStackLimit,
	engine.LimitExceeded: runner.FailureLimitExceeded,
}

// RecordFailure gives an engine error its kind for the runner's metrics and
// dead-letter headers (runner.FailureError when it has none).
func RecordFailure(err error) error {
	return &runner.KindError{Kind: failureKinds[engine.KindOf(err)], Err: err}
}

// VersionID names a version in the wasmstream-version header:
// "<label>@<sha256 prefix>", or the prefix alone without a label.
func VersionID(v control.Version) string {
	if v.Label == "" {
		return v.Short()
	}
	return v.Label + "@" + v.Short()
}

// Info is v as the version registry records it; a version without a hash
// (an unreadable manifest) is "(unreadable)".
func Info(v control.Version) versions.Info {
	if v.Hash == "" {
		return versions.Info{ID: "(unreadable)"}
	}
	return versions.Info{ID: VersionID(v), Hash: v.Hash, Label: v.Label, Size: v.Size}
}

// Table is a global table as a plugin reads it; safe for concurrent use.
type Table interface {
	Get(key []byte) (value []byte, found bool, err error)
	Scan(start, end []byte) (state.Iterator, error)
}

// Tables serves engine.Binding.TableState: Tables[i] is Spec.Tables[i].
// The engine never writes a table (it answers EINVAL first); Put and
// Delete fail in case it ever does.
type Tables []Table

func (t Tables) Get(i int, key []byte) ([]byte, bool, error) { return t[i].Get(key) }

func (t Tables) Scan(i int, start, end []byte) (engine.Iterator, error) {
	it, err := t[i].Scan(start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (Tables) Put(int, []byte, []byte) error { return errReadOnly }
func (Tables) Delete(int, []byte) error      { return errReadOnly }

var errReadOnly = errors.New("plugin: a table is read-only")

// tableView serves an instance's tables: the global ones (the first
// globals indices) from the host's shared tables, the task tables from the
// task's own stores, which follow the plugin's first stores. The engine
// answers writes to any table with EINVAL before they get here.
type tableView struct {
	global  engine.State // nil without global tables
	globals int
	task    *state.Task
	first   int // the task's store index of its first task table
}

func (v tableView) Get(i int, key []byte) ([]byte, bool, error) {
	if i < v.globals {
		return v.global.Get(i, key)
	}
	return v.task.Get(v.first+i-v.globals, key)
}

func (v tableView) Scan(i int, start, end []byte) (engine.Iterator, error) {
	if i < v.globals {
		return v.global.Scan(i, start, end)
	}
	it, err := v.task.Scan(v.first+i-v.globals, start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (tableView) Put(int, []byte, []byte) error { return errReadOnly }
func (tableView) Delete(int, []byte) error      { return errReadOnly }
