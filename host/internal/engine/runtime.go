// Package engine runs wasmstream plugins: it validates and compiles Wasm
// modules against the ABI in package abi, instantiates them sandboxed,
// serves the host imports, and calls the plugin once per record with the
// record copied straight into guest memory. It knows nothing of Kafka: the
// caller hands it records (abi.Record), a Sink for emits and a State for
// store access.
//
// # Limits (docs/design.md, I6 and I7)
//
// Memory is capped per instance (Options.MemoryLimit) and charged, as it
// grows, to the account the binding names (Binding.Memory: the task's, in
// the process's budget; memory.go), and so are tables
// (ModuleLimits.MaxTableEntries), the call stack (Options.StackLimit) and
// what one record makes the host stage (Options.Record); log lines are
// rate-limited (Options.Log); modules are refused by shape, and by a
// budget of memory and CPU time estimated from their totals, before they are
// compiled (Options.Module, compilecost.go), and compilation is bounded in
// wall time (Options.CompileTimeout). limits.go has the defaults; abi/ABI.md, section
// 7, states the resulting bound of host memory per instance. Every call into the
// plugin is bounded in wall time (Options.RecordTimeout, Options.InitTimeout)
// by a per-Runtime watchdog goroutine; the plugin's binary is instrumented at
// Compile time with an interrupt check at every function entry and loop head
// (see instrument.go for why wazero's WithCloseOnContextDone is not used), so
// the per-record path has no goroutine, channel, timer or allocation. A trap,
// a timeout, a memory-limit hit or an ABI misuse fails that record with a
// *RecordError and discards the instance; the next record runs on a fresh
// one. The host process never sees a guest's failure as anything but an
// error value: wazero turns traps into errors, and the engine turns panics
// in the Sink or State into HostFailed errors.
//
// # Concurrency
//
// A Runtime and a Module may be used from many goroutines. An Instance is
// used by one goroutine at a time (a task); different Instances run in
// parallel.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
)

// Defaults for zero Options fields.
const (
	// DefaultMemoryLimit is the per-instance memory cap in bytes (64 MiB).
	DefaultMemoryLimit = 64 << 20
	// DefaultRecordTimeout is the wall-time limit of one process call.
	DefaultRecordTimeout = time.Second
	// MinInitTimeout is the smallest default init limit; see Options.InitTimeout.
	MinInitTimeout = 10 * time.Second
	// PageSize is the Wasm page size in bytes.
	PageSize = 65536
	// minTick is the shortest watchdog period.
	minTick = time.Millisecond
	// DefaultStackLimit is the per-instance stack budget in bytes (8 MiB).
	DefaultStackLimit = 8 << 20
	// MaxStackLimit is the largest StackLimit: wazero's own stack ceiling
	// (400 MB) must never be what stops a plugin.
	MaxStackLimit = 128 << 20
	// DefaultCompileTimeout bounds one compilation (a Go SDK plugin takes
	// about 0.5 s on the reference machine).
	DefaultCompileTimeout = time.Minute
)

// Options configures a Runtime. The zero value is usable.
type Options struct {
	// CacheDir is the directory of wazero's compilation cache, shared by
	// runtimes and processes of the same wazero version; "" keeps compiled
	// code in memory only.
	CacheDir string
	// MemoryLimit is the most linear memory one instance may have, in bytes,
	// rounded down to whole 64 KiB pages (at least one page); 0 means
	// DefaultMemoryLimit. A module whose minimum memory is larger is refused
	// at Compile (MemoryTooLarge); a memory.grow past it fails (returns -1 to
	// the plugin), and a record that then fails is classified MemoryLimit.
	MemoryLimit uint64
	// RecordTimeout is the wall time one process call (including the host
	// functions it calls) may take; 0 means DefaultRecordTimeout. A call is
	// interrupted between RecordTimeout and RecordTimeout*9/8 (plus
	// scheduling delay) after it started. Time spent blocked inside a host
	// function (a slow State) counts but cannot be interrupted.
	RecordTimeout time.Duration
	// InitTimeout bounds each init-time call (start function, _initialize,
	// wasmstream_init, wasmstream_input); 0 means max(MinInitTimeout,
	// 10*RecordTimeout). Go plugins' _initialize takes milliseconds.
	InitTimeout time.Duration
	// Logger receives the plugins' log() lines and their stdout/stderr lines,
	// with the attribute processor=Binding.Name; nil means slog.Default().
	Logger *slog.Logger
	// StackLimit is the call stack one instance may use, in bytes as the
	// instrumentation accounts them (a frame costs 64 bytes, plus 16 per
	// parameter and local, plus 4 per byte of its function's body: an upper
	// bound of what wazero allocates; see instrument.go). A call that would
	// pass it traps, and the record fails with StackLimit. 0 means
	// DefaultStackLimit (8 MiB); at most MaxStackLimit.
	StackLimit int
	// CompileTimeout bounds one Compile (validation, instrumentation and
	// wazero's compilation); a module over it is refused with OverLimits.
	// 0 means DefaultCompileTimeout (1 minute).
	CompileTimeout time.Duration
	// Module bounds the shape of the modules Compile accepts and what
	// compiling and instantiating one may cost (refused with OverLimits
	// before wazero compiles them).
	Module ModuleLimits
	// Record bounds what one record may make the host stage.
	Record RecordLimits
	// Log rate-limits each instance's log lines and stdout/stderr.
	Log LogLimits
	// Snapshots, if set, is charged the memory each snapshot of an init
	// holds (snapshot.go) while an instance holds it: the process's
	// account. When it refuses, the instance keeps no snapshot and its
	// replacements run init again, as for a module that cannot be
	// snapshotted.
	Snapshots MemoryAccount
}

// Runtime owns one wazero runtime (compiler backend where supported), the
// sandboxed WASI module, the "wasmstream" host module and the watchdog that
// enforces RecordTimeout. Close it when done.
type Runtime struct {
	opts       Options // normalized
	limitBytes uint64  // memory cap per instance, a whole number of pages
	rt         wazero.Runtime
	cache      wazero.CompilationCache
	logger     *slog.Logger

	// Watchdog. tick counts periods of tickEvery since NewRuntime, from 1;
	// an Instance in a call stores its deadline tick (see Instance.deadline).
	tick        atomic.Int64
	tickEvery   time.Duration
	recordTicks int64
	initTicks   int64
	closing     atomic.Bool // set once by Close, read before every call
	stop        chan struct{}
	done        chan struct{}

	// compiles counts compilations in flight, abandoned ones included
	// (compileBounded): Close waits for them, because closing the wazero
	// runtime under a running compilation panics.
	compiles sync.WaitGroup

	// modules counts the Modules compiled and not yet released, linear
	// the bytes of the instances' linear memories (Counts).
	modules atomic.Int64
	linear  atomic.Int64
	// snapshots is the bytes the modules' snapshots hold (snapshot.go).
	snapshots atomic.Int64

	mu        sync.Mutex
	instances map[*Instance]struct{}
	closed    bool
}

// Counts are what a Runtime holds open: Modules compiled whose code is
// not yet released (a closed Module is released when its last Instance
// closes), and Instances not yet closed (a discarded one, waiting to be
// revived, counts). A process that swaps versions without a leak comes
// back to the same counts after every swap (RATIONALE.md, "Hot swap:
// versions held"). MemoryBytes is what the instances' linear memories hold, in
// bytes (capacity, in the Go heap): the plugins' own memory, which grows
// with what each instance has done and starts small again in a new one.
// SnapshotBytes is what the instances' snapshots hold (the memory their
// inits left, each shared copy once: snapshot.go).
type Counts struct {
	Modules, Instances int
	MemoryBytes        int64
	SnapshotBytes      int64
}

// Counts returns the Runtime's open modules and instances. Safe for
// concurrent use.
func (r *Runtime) Counts() Counts {
	r.mu.Lock()
	n := len(r.instances)
	r.mu.Unlock()
	return Counts{Modules: int(r.modules.Load()), Instances: n, MemoryBytes: r.linear.Load(), SnapshotBytes: r.snapshots.Load()}
}

// closeCompiled releases the module's compiled code, once (Close and
// release call it when the module is both closed and unreferenced), and
// drops the engine's reference to it: a Module value something still
// points to then holds only its Info, not wazero's decoded module. No
// Instance can start on it any more (acquire refuses a closed module, and
// every Instance that acquired it has released it).
func (m *Module) closeCompiled(ctx context.Context) error {
	m.rt.modules.Add(-1)
	c := m.compiled
	m.compiled = nil
	return c.Close(ctx)
}

// ErrClosed is the cause of InstanceLost failures on a closed Runtime,
// Module or Instance.
var ErrClosed = errors.New("engine: closed")

// NewRuntime creates a Runtime and starts its watchdog goroutine.
func NewRuntime(ctx context.Context, o Options) (*Runtime, error) {
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	pages := o.MemoryLimit / PageSize
	if pages < 1 {
		pages = 1
	}
	if pages > 65536 {
		pages = 65536
	}
	if o.RecordTimeout <= 0 {
		o.RecordTimeout = DefaultRecordTimeout
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = max(MinInitTimeout, 10*o.RecordTimeout)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StackLimit <= 0 {
		o.StackLimit = DefaultStackLimit
	}
	if o.StackLimit > MaxStackLimit {
		return nil, fmt.Errorf("engine: StackLimit %d bytes is over the maximum of %d", o.StackLimit, MaxStackLimit)
	}
	if o.CompileTimeout <= 0 {
		o.CompileTimeout = DefaultCompileTimeout
	}
	o.Module = o.Module.withDefaults()
	o.Record = o.Record.withDefaults()
	o.Log = o.Log.withDefaults()
	r := &Runtime{
		opts:       o,
		limitBytes: pages * PageSize,
		logger:     o.Logger,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		instances:  make(map[*Instance]struct{}),
	}
	r.tickEvery = max(o.RecordTimeout/8, minTick)
	r.recordTicks = ticksFor(o.RecordTimeout, r.tickEvery)
	r.initTicks = ticksFor(o.InitTimeout, r.tickEvery)
	r.tick.Store(1)

	if o.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(o.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine: compilation cache %s: %w", o.CacheDir, err)
		}
		r.cache = c
	} else {
		r.cache = wazero.NewCompilationCache()
	}
	// Not WithCloseOnContextDone: interruption comes from the instrumented
	// interrupt flag (instrument.go). Not WithMemoryLimitPages: a grow past
	// wazero's limit fails before any hook can see it, so the cap is
	// enforced by the per-instance memory allocator (memory.go), which also
	// records that a grow was refused.
	cfg := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2).
		WithCompilationCache(r.cache)
	r.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		_ = r.rt.Close(ctx)
		_ = r.cache.Close(ctx)
		return nil, fmt.Errorf("engine: instantiate WASI: %w", err)
	}
	if err := instantiateHostModule(ctx, r.rt); err != nil {
		_ = r.rt.Close(ctx)
		_ = r.cache.Close(ctx)
		return nil, fmt.Errorf("engine: instantiate host module %q: %w", abi.ImportModule, err)
	}
	go r.watchdog()
	return r, nil
}

func ticksFor(d, every time.Duration) int64 {
	n := int64((d + every - 1) / every)
	if n < 1 {
		n = 1
	}
	return n
}

// MemoryLimit is the effective per-instance memory cap in bytes.
func (r *Runtime) MemoryLimit() uint64 { return r.limitBytes }

// RecordTimeout is the effective per-record time limit.
func (r *Runtime) RecordTimeout() time.Duration { return r.opts.RecordTimeout }

// watchdog advances the tick and interrupts every instance whose call is past
// its deadline. It holds r.mu while scanning, so instances come and go
// between scans only.
func (r *Runtime) watchdog() {
	defer close(r.done)
	t := time.NewTicker(r.tickEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			now := r.tick.Add(1)
			r.mu.Lock()
			for i := range r.instances {
				i.interruptIfDue(now)
			}
			r.mu.Unlock()
		}
	}
}

// Close interrupts the calls still running, waits for them to return (or for
// ctx to end), stops the watchdog and releases every module, instance and the
// compilation cache (the cache directory stays). Instances of a closed Runtime
// fail with InstanceLost. If ctx ends while a call is still stuck inside a
// host function, Close returns ctx's error and leaves the wazero runtime open,
// because unmapping code that is still running would crash the process.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.closing.Store(true)
	insts := make([]*Instance, 0, len(r.instances))
	for i := range r.instances {
		insts = append(insts, i)
	}
	r.mu.Unlock()

	// Every call stores its deadline before it reads r.closing (see
	// Instance.call), so after this loop no call runs and none will start.
	for {
		busy := false
		for _, i := range insts {
			if i.deadline.Load() != 0 {
				busy = true
				i.interruptNow()
			}
		}
		if !busy {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: close: calls still running: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	compiled := make(chan struct{})
	go func() { r.compiles.Wait(); close(compiled) }()
	select {
	case <-compiled:
	case <-ctx.Done():
		return fmt.Errorf("engine: close: compilations still running: %w", ctx.Err())
	}
	close(r.stop)
	<-r.done
	err := r.rt.Close(ctx)
	if cerr := r.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

func (r *Runtime) register(i *Instance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.instances[i] = struct{}{}
	return nil
}

func (r *Runtime) unregister(i *Instance) {
	r.mu.Lock()
	delete(r.instances, i)
	r.mu.Unlock()
}
