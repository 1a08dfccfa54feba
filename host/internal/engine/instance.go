package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmstream/wasmstream/abi"
)

// Sink receives the records a plugin emits.
type Sink interface {
	// Emit is called once per accepted emit, during Process, OnTimer or
	// OnCommit and on its goroutine. output indexes Binding.Outputs. rec and every slice in it
	// alias guest memory and a scratch record the engine reuses: copy what
	// you keep before returning. An error that wraps an abi.Errno refuses
	// the record for its output (too large for its topic, say): the plugin
	// gets that errno and the record fails (LimitExceeded, with the
	// error's text). Any other error makes emit return EIO to the plugin
	// and fails the record (HostFailed).
	Emit(output int, rec *abi.Record) error
}

// State is one task's store access. The engine calls it during Process,
// OnTimer and OnCommit, on their goroutine. Slices passed in alias guest memory or engine buffers
// and are valid only during the call, except the bounds given to Scan, which
// stay valid until the Iterator is closed. Any error makes the state call
// return EIO to the plugin and fails the record (HostFailed). The engine
// cannot undo writes of a failed record: the caller must discard them.
type State interface {
	// Get returns the value of key in store (an index into
	// Binding.Stores). The value must stay valid until the next State call.
	Get(store int, key []byte) (value []byte, found bool, err error)
	// Put sets key to value in store; it copies both. ErrStateLimit (an
	// error matching it) gives the plugin ELIMIT; ErrStateTooLarge gives
	// it ETOOLARGE and fails the call.
	Put(store int, key, value []byte) error
	// Delete removes key from store.
	Delete(store int, key []byte) error
	// Scan iterates over keys k with start <= k < end in byte order; an
	// empty end means no upper bound.
	Scan(store int, start, end []byte) (Iterator, error)
}

// Iterator walks a Scan. The engine closes every iterator a record left open
// when the record ends.
type Iterator interface {
	// Next returns the next entry, or ok == false at the end. key and value
	// must stay valid until the next call to Next or Close.
	Next() (key, value []byte, ok bool, err error)
	// Close releases the iterator.
	Close() error
}

// Binding is what one Instance serves its plugin.
type Binding struct {
	// Name is the processor's name; it tags logs and errors.
	Name string
	// Outputs are the processor's declared outputs: emit's record index and
	// output_index resolve against them, in this order.
	Outputs []string
	// Stores are the processor's declared state stores: the store argument
	// of the state imports and store_index resolve against them.
	Stores []string
	// Tables are read-only stores (the host's global tables): store_index
	// resolves a table's name to len(Stores) + its index here, state_get
	// and the scan imports read it through TableState, and state_put and
	// state_delete on it return EINVAL without failing the record.
	Tables []string
	// Config is the processor's configuration (JSON) served by the config
	// import. Copied by Instantiate.
	Config []byte
	// Sink receives emits; required when Outputs is not empty.
	Sink Sink
	// State serves the state imports; required when Stores is not empty.
	State State
	// TableState serves reads of Tables (store argument: the index in
	// Tables); required when Tables is not empty. Its Put and Delete are
	// never called. One TableState may serve many instances at once, on
	// their own goroutines: it must be safe for concurrent use.
	TableState State
	// Time serves the time imports (timer_set, timer_cancel, time_now,
	// commit_mark) and the clocks of OnTimer and OnCommit; required when
	// the module imports any of them (Info.UsesTime).
	Time Time
	// LogAttrs are added to the plugin's log lines after the processor
	// name (the host adds its task and plugin version).
	LogAttrs []slog.Attr
	// Memory, if set, is charged the instance's linear memory as it is
	// made and grown, and released when the instance is dropped (a
	// discard after a trap, Close): the task's account. A growth it
	// refuses makes memory.grow return -1, as at Options.MemoryLimit.
	Memory MemoryAccount
	// StartLater: when Memory refuses the instance's initial memory,
	// Instantiate returns the instance unstarted (the next record starts
	// it, or fails with MemoryLimit if Memory still refuses) instead of
	// failing with ErrMemoryBudget.
	StartLater bool
}

// defaultInputSize is the input buffer the host asks for at start, in bytes
// (abi/ABI.md, section 3).
const defaultInputSize = 4096

// interrupted is the deadline value of a call the watchdog has interrupted.
const interrupted = -1

// Instance is one plugin instance bound to one task. It is not safe for
// concurrent use: one goroutine calls Process, OnTimer, OnCommit and Close.
type Instance struct {
	rt     *Runtime
	m      *Module
	b      Binding
	log    *slog.Logger
	ctx    context.Context // carries the Instance to host functions; never done
	stdout *lineWriter
	stderr *lineWriter
	logs   *logLimiter // shared by log(), stdout and stderr

	// cur is the live wazero instance; nil after a discard until the next
	// Process re-instantiates. Written only by the owning goroutine, under
	// imu; read by the watchdog under imu.
	cur *live
	// snap is what the instance's first start left (snapshot.go), from
	// which a discarded instance is restored; nil if the module is not
	// snapshotted.
	snap *snapshot
	// initCtx is the context of a start in progress (nil otherwise): a
	// start stops when it is done (SIGTERM does not wait for an init).
	initCtx context.Context
	// startTook is how long the last start took (instantiation and
	// initializers).
	startTook time.Duration

	// deadline is the watchdog tick after which the running call is
	// interrupted: 0 when no call runs, interrupted (-1) once the watchdog
	// has fired, math.MaxInt64 while instantiating (busy, never due).
	deadline atomic.Int64
	imu      sync.Mutex // held by the watchdog while it interrupts

	// undeclared are the names the plugin asked for during its start and
	// the processor does not declare (noteUndeclared), for the error of a
	// start that fails.
	undeclared []Undeclared

	// Per-call state, owned by the calling goroutine.
	phase     phase
	stack     [1]uint64
	misuseMsg string
	hostErr   error
	errText   []byte
	errSet    bool
	emitRec   abi.Record
	// The clocks of the current call, from Time.Now at its start (time.go),
	// and the timestamp commit_mark remembers: the record's or the timer's.
	streamNow, wallNow int64
	markTS             int64
	// Per-record staging, against Options.Record (reset by beginCall).
	emits       int
	emitBytes   int
	stateBytes  int
	limitMsg    string    // the first limit the record hit
	limitErrno  abi.Errno // what the plugin got for it
	cursors     [abi.MaxOpenCursors]cursor
	openCursors int
	closed      bool

	// bat is the batch being run (batch.go); watch shows its progress to
	// the watchdog while the batch call runs (nil otherwise).
	bat    batchState
	watch  atomic.Pointer[batchWatch]
	bwatch batchWatch // what watch points to during a batch
	// clockStride is the number of ended calls between two readings of
	// the clock against a batch's yield deadline (batch.go), kept from
	// batch to batch; 0 reads it at the first call's end.
	clockStride int
}

// live is one wazero instantiation of the plugin.
type live struct {
	mod      api.Module
	mem      api.Memory
	flag     api.MutableGlobal // the instrumented interrupt flag
	count    api.MutableGlobal // the instrumented countdown to the next flag check
	stack    api.MutableGlobal // the instrumented stack budget left, in bytes
	lm       *linearMemory
	process  api.Function
	input    api.Function
	onTimer  api.Function // nil unless exported
	onCommit api.Function // nil unless exported
	migrate  api.Function // nil unless exported
	batch    api.Function // wasmstream_batch; nil unless the module speaks version 2
	inPtr    uint32       // input buffer, from wasmstream_input
	inCap    uint32
	// globals are the module's mutable globals and sandbox its WASI
	// clocks and random state, for snapshots.
	globals []api.MutableGlobal
	sandbox *sandboxState
}

// Instantiate creates an instance: it instantiates the module in the
// sandbox, runs the start function, _initialize and wasmstream_init (each
// under Options.InitTimeout) and asks for the input buffer. Errors are
// *ModuleError (InstantiateFailed, InitTrapped, InitFailed) or a plain error
// for a bad Binding (such as no Time for a module that imports a time
// function) or a closed Runtime/Module.
func (m *Module) Instantiate(ctx context.Context, b Binding) (*Instance, error) {
	if len(b.Outputs) > 0 && b.Sink == nil {
		return nil, fmt.Errorf("engine: processor %q declares outputs but the binding has no Sink", b.Name)
	}
	if len(b.Stores) > 0 && b.State == nil {
		return nil, fmt.Errorf("engine: processor %q declares stores but the binding has no State", b.Name)
	}
	if len(b.Tables) > 0 && b.TableState == nil {
		return nil, fmt.Errorf("engine: processor %q declares tables but the binding has no TableState", b.Name)
	}
	if imp := m.info.timeImport(); imp != "" && b.Time == nil {
		return nil, fmt.Errorf("engine: processor %q: the module imports %s.%s but the binding has no Time", b.Name, abi.ImportModule, imp)
	}
	if u := undeclaredHandles(m.info.Handles, b); len(u) > 0 {
		names := make([]string, len(u))
		for k, h := range u {
			names[k] = fmt.Sprintf("%s %q", h.Kind, h.Name)
		}
		return nil, &ModuleError{Module: m.name, Kind: InitFailed, Undeclared: u,
			Msg: "the module names (in its " + handlesSection + " section) what processor " + strconv.Quote(b.Name) +
				" does not declare: " + strings.Join(names, ", ")}
	}
	b.Outputs = append([]string(nil), b.Outputs...)
	b.Stores = append([]string(nil), b.Stores...)
	b.Tables = append([]string(nil), b.Tables...)
	b.Config = append([]byte(nil), b.Config...)
	if err := m.acquire(); err != nil {
		return nil, err
	}
	i := &Instance{rt: m.rt, m: m, b: b}
	i.log = m.rt.logger.With(slog.String("processor", b.Name))
	for _, a := range b.LogAttrs {
		i.log = i.log.With(a)
	}
	i.logs = newLogLimiter(m.rt.opts.Log, i.log, time.Now)
	i.stdout = newLineWriter(i.logs, i.log, slog.LevelInfo, "stdout")
	i.stderr = newLineWriter(i.logs, i.log, slog.LevelWarn, "stderr")
	i.ctx = context.WithValue(context.Background(), instanceKey{}, i)
	if err := m.rt.register(i); err != nil {
		m.release(ctx)
		return nil, fmt.Errorf("engine: instantiate %q: %w", m.name, err)
	}
	if err := i.start(ctx); err != nil {
		if b.StartLater && errors.Is(err, ErrMemoryBudget) && ctx.Err() == nil {
			// The process holds its budget: the task starts without a
			// live instance and the next record starts one (revive), or
			// fails if the budget still refuses it. A task that could
			// not start would hold its partition and process nothing.
			i.log.Warn("the plugin instance does not fit the process's memory budget now; it starts with the next record", "err", err)
			return i, nil
		}
		_ = i.Close(ctx)
		return nil, err
	}
	return i, nil
}

// Process runs the plugin on one record: it encodes rec into the plugin's
// input buffer, calls wasmstream_process and returns nil or a *RecordError.
// On error the caller must discard the record's emits and state writes. A
// Trap, Timeout, MemoryLimit or ABIMisuse discards the instance (see
// FailureKind.Discards); the next Process re-instantiates it (running init
// again) and fails with InstanceLost if that fails. ctx is checked before the call only: the call itself is
// bounded by Options.RecordTimeout. For a module that imports time_now,
// Process reads Binding.Time.Now once first (the caller has moved the
// stream time to include rec); commit_mark remembers rec.Timestamp. On the
// success path Process makes no heap allocation in the host (the Sink,
// State and Time may).
func (i *Instance) Process(ctx context.Context, rec *abi.Record) error {
	due := i.recordDue()
	buf, err := i.input(ctx, rec.EncodedSize(), due)
	if err != nil {
		return err
	}
	rec.EncodeTo(buf)
	if i.m.info.ImportsTimeNow {
		i.streamNow, i.wallNow = i.b.Time.Now()
	}
	i.markTS = rec.Timestamp
	return i.run(ctx, phaseRecord, len(buf), due)
}

// recordDue is the watchdog tick by which the guest calls made for a
// record (or trigger) starting now must be done: one record time budget
// for all of them, the input buffer's growth included.
func (i *Instance) recordDue() int64 { return i.rt.tick.Load() + i.rt.recordTicks }

// input returns the plugin's input buffer, n bytes long, after reviving a
// discarded instance and asking the plugin for a larger buffer if needed
// (a call that must be done by the watchdog tick due).
func (i *Instance) input(ctx context.Context, n int, due int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if i.cur == nil {
		if err := i.revive(ctx); err != nil {
			return nil, err
		}
	}
	if n > int(i.cur.inCap) {
		if err := i.growInput(ctx, n, due); err != nil {
			return nil, err
		}
	}
	buf, ok := i.cur.mem.Read(i.cur.inPtr, uint32(n))
	if !ok {
		return nil, i.misused(ctx, "the input buffer is no longer inside plugin memory")
	}
	return buf, nil
}

// run calls the export of phase p (wasmstream_process, _on_timer or
// _on_commit) on the n bytes now in the input buffer and classifies the
// outcome: nil or a *RecordError, as Process documents.
func (i *Instance) run(ctx context.Context, p phase, n int, due int64) error {
	l := i.cur
	fn, name := l.process, abi.ExportProcess
	switch p {
	case phaseTimer:
		fn, name = l.onTimer, abi.ExportOnTimer
	case phaseCommit:
		fn, name = l.onCommit, abi.ExportOnCommit
	case phaseMigrate:
		fn, name = l.migrate, abi.ExportMigrate
	}
	i.beginCall(p)
	i.stack[0] = uint64(n)
	intr, err := i.call(fn, due)
	i.closeCursors()
	i.phase = phaseNone
	if i.logs.pending > 0 {
		i.logs.summarize(time.Now(), false)
	}
	if intr || err != nil {
		if err != nil || !i.clearInterrupt() {
			return i.trapped(ctx, name, err, intr, i.rt.opts.RecordTimeout)
		}
	}
	return i.outcome(ctx, name, abi.Status(int32(i.stack[0])))
}

// misused fails the record with ABIMisuse and discards the instance: a
// plugin that broke the ABI may have broken its own memory too (abi/ABI.md,
// section 7).
func (i *Instance) misused(ctx context.Context, msg string) error {
	i.discard(ctx)
	return i.recordErr(ABIMisuse, msg, nil)
}

// Close discards the instance. It must not run concurrently with Process.
// Closing twice is a no-op.
func (i *Instance) Close(ctx context.Context) error {
	if i.closed {
		return nil
	}
	i.closed = true
	i.discard(ctx)
	i.m.dropSnapshot(i.snap)
	i.snap = nil
	i.logs.summarize(time.Now(), true)
	i.rt.unregister(i)
	i.m.release(ctx)
	return nil
}

// StartTime is how long the instance's last start (instantiation and
// initializers, its first one unless a replacement ran init again) took,
// and whether that was over half its budget (Options.InitTimeout): a
// start that runs long, which the engine logs. A version whose starts run
// long makes every task start, and every replacement of a module that is
// not snapshotted, wait that long.
func (i *Instance) StartTime() (took time.Duration, long bool) {
	return i.startTook, 2*i.startTook > i.rt.opts.InitTimeout
}

// Name is the processor name of the binding.
func (i *Instance) Name() string { return i.b.Name }

// call runs fn under the watchdog, to be done by the watchdog tick due,
// with the arguments and results in i.stack. intr reports that the
// watchdog interrupted it.
func (i *Instance) call(fn api.Function, due int64) (intr bool, err error) {
	if lm := i.cur.lm; lm.growFailed {
		lm.growFailed, lm.refused = false, nil
	}
	// Store the deadline, then read closing; Runtime.Close does the
	// opposite, so either this call sees closing or Close sees the call.
	i.deadline.Store(max(due, 1))
	if i.rt.closing.Load() || i.initCtx != nil && i.initCtx.Err() != nil {
		// (The start's context is read after the deadline is stored: its
		// AfterFunc either sees the deadline or ran before this.)
		i.deadline.Store(0)
		return false, ErrClosed
	}
	err = fn.CallWithStack(i.ctx, i.stack[:])
	if i.deadline.Swap(0) == interrupted {
		i.imu.Lock()
		//lint:ignore SA2001 the empty critical section waits until the watchdog has finished setting the flag
		i.imu.Unlock()
		return true, err
	}
	return false, err
}

// interrupt makes the guest trap at its next check: the flag first, then
// the countdown (if the guest's own decrement overwrites the countdown, the
// flag is still seen within checkPeriod checks).
func (l *live) interrupt() {
	l.flag.Set(1)
	l.count.Set(1)
}

// clearInterrupt resets the flag of a call that finished just as the
// watchdog fired, so the instance can be kept.
func (i *Instance) clearInterrupt() bool {
	if i.cur == nil {
		return false
	}
	i.cur.flag.Set(0)
	return true
}

func (i *Instance) interruptIfDue(now int64) {
	if w := i.watch.Load(); w != nil {
		if y := w.yieldTick.Load(); y > 0 && now >= y && w.yieldTick.CompareAndSwap(y, 0) {
			w.requestStop()
		}
	}
	d := i.deadline.Load()
	if d <= 0 || now <= d {
		return
	}
	if w := i.watch.Load(); w != nil {
		// A batch: the call in progress gets its own budget from the end
		// of the previous one, which the watchdog may be first to see.
		if done, ok := w.progress(); ok && done != w.last.Load() {
			w.last.Store(done)
			i.deadline.CompareAndSwap(d, now+i.rt.recordTicks)
			return
		}
	}
	i.interrupt(d)
}

// interruptNow interrupts a running call whatever its deadline (Close).
func (i *Instance) interruptNow() {
	if d := i.deadline.Load(); d != 0 && d != interrupted {
		i.interrupt(d)
	}
}

func (i *Instance) interrupt(d int64) {
	i.imu.Lock()
	if i.deadline.CompareAndSwap(d, interrupted) && i.cur != nil {
		i.cur.interrupt()
	}
	i.imu.Unlock()
}

func (i *Instance) beginCall(p phase) {
	i.phase = p
	i.misuseMsg = ""
	i.hostErr = nil
	i.emits, i.emitBytes, i.stateBytes = 0, 0, 0
	i.limitMsg = ""
	i.errSet = false
	i.errText = i.errText[:0]
	i.stderr.first = ""
}

func (i *Instance) reason() string {
	if !i.errSet {
		return "no reason given (the plugin did not call set_error)"
	}
	return string(i.errText)
}

func (i *Instance) recordErr(kind FailureKind, msg string, err error) error {
	return &RecordError{Processor: i.b.Name, Kind: kind, Msg: msg, Err: err}
}

// trapped classifies a failed call, discards the instance and returns the
// record's error.
func (i *Instance) trapped(ctx context.Context, fn string, err error, intr bool, limit time.Duration) error {
	if !intr && errors.Is(err, ErrClosed) {
		return i.recordErr(InstanceLost, "the runtime is closed", err)
	}
	if intr && i.rt.closing.Load() {
		i.discard(ctx)
		return i.recordErr(InstanceLost, fn+": interrupted: the runtime is closing", ErrClosed)
	}
	kind, msg := i.classify(err, intr, limit)
	if kind == MemoryLimit && i.cur.lm.refused != nil {
		err = errors.Join(err, i.cur.lm.refused) // errors.Is(err, ErrMemoryBudget)
	}
	i.discard(ctx)
	return i.recordErr(kind, fn+": "+msg, err)
}

// classify names the failure of a call that returned err or was interrupted.
func (i *Instance) classify(err error, intr bool, limit time.Duration) (FailureKind, string) {
	l := i.cur
	msg := ""
	var exit *sys.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		msg = fmt.Sprintf("plugin exited with code %d", exit.ExitCode())
	default:
		msg = firstLine(err.Error(), 240)
	}
	if line := i.stderr.takeFirst(); line != "" {
		msg += " (stderr: " + firstLine(line, 240) + ")"
	}
	switch {
	case intr:
		return Timeout, fmt.Sprintf("interrupted after running longer than %v", limit)
	case int32(l.stack.Get()) < 0:
		return StackLimit, fmt.Sprintf("call stack over the limit of %d bytes (calls too deep): %s", i.rt.opts.StackLimit, msg)
	case l.lm.growFailed && l.lm.refused != nil:
		return MemoryLimit, fmt.Sprintf("memory.grow refused at %d KiB: %s: %s", l.mem.Size()>>10, l.lm.refused, msg)
	case l.lm.growFailed:
		return MemoryLimit, fmt.Sprintf("memory.grow refused at %d KiB (limit %d KiB): %s",
			l.mem.Size()>>10, i.rt.limitBytes>>10, msg)
	}
	if maxPages, ok := l.mem.Definition().Max(); ok && uint64(l.mem.Size()) >= uint64(maxPages)*PageSize {
		return MemoryLimit, fmt.Sprintf("memory at the module's declared maximum of %d pages: %s", maxPages, msg)
	}
	return Trap, msg
}

// discard closes the live wazero instance (no call is running).
func (i *Instance) discard(ctx context.Context) {
	l := i.cur
	if l == nil {
		return
	}
	i.imu.Lock()
	i.cur = nil
	i.imu.Unlock()
	i.stdout.flush()
	i.stderr.flush()
	_ = l.mod.Close(ctx)
}

// revive re-instantiates after a discard.
func (i *Instance) revive(ctx context.Context) error {
	if i.closed {
		return i.recordErr(InstanceLost, "the instance is closed", ErrClosed)
	}
	if i.snap != nil {
		err := i.restore(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrMemoryBudget) {
			// The snapshot is sound: the budget is full for now.
			return i.recordErr(MemoryLimit, "no instance to run the record: "+firstLine(err.Error(), 400), err)
		}
		// The next start takes a new snapshot.
		i.log.Warn("restoring the plugin instance from its snapshot failed; starting it again", "err", err)
		i.m.dropSnapshot(i.snap)
		i.snap = nil
	}
	if err := i.start(ctx); err != nil {
		if errors.Is(err, ErrMemoryBudget) {
			return i.recordErr(MemoryLimit, "no instance to run the record: "+firstLine(err.Error(), 400), err)
		}
		return i.recordErr(InstanceLost, "re-instantiation failed: "+firstLine(err.Error(), 400), err)
	}
	return nil
}

// start instantiates the module and runs its initializers, then keeps a
// snapshot of what they left if it has none (snapshot.go). It stops, with
// an error matching ErrClosed, when ctx is done: an init does not hold up
// a host that stops.
func (i *Instance) start(ctx context.Context) error {
	m := i.m
	began := time.Now()
	defer func() {
		i.startTook = time.Since(began)
		if budget := i.rt.opts.InitTimeout; 2*i.startTook > budget {
			i.log.Warn("the plugin's start ran long: over half its init budget", "took", i.startTook, "budget", budget)
		}
	}()
	i.initCtx = ctx
	stop := context.AfterFunc(ctx, i.interruptNow)
	defer func() {
		stop()
		i.initCtx = nil
	}()
	l, err := i.instantiate(ctx, newSandboxState())
	if err != nil {
		return err
	}
	if err := i.initialize(ctx, l); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("engine: instantiate %q: its start stopped before init ended (%w): %w", m.name, ErrClosed, context.Cause(ctx))
		}
		if l.lm.refused != nil {
			// The init failed after a memory.grow the budget refused.
			return fmt.Errorf("%w (%w)", err, l.lm.refused)
		}
		return err
	}
	if i.snap == nil {
		i.snap = m.takeSnapshot(l)
	}
	return nil
}

// instantiate makes a new wazero instantiation of the module, with the
// WASI clocks and random state st, and makes it the instance's: no guest
// code runs.
func (i *Instance) instantiate(ctx context.Context, st *sandboxState) (*live, error) {
	m := i.m
	// Busy (never due) for Runtime.Close while wazero instantiates.
	i.deadline.Store(math.MaxInt64)
	if i.rt.closing.Load() {
		i.deadline.Store(0)
		return nil, fmt.Errorf("engine: instantiate %q: %w", m.name, ErrClosed)
	}
	lm := newLinearMemory(i.rt.limitBytes, &i.rt.linear, i.b.Memory)
	if err := lm.reserve(uint64(m.info.MemoryMinPages) * PageSize); err != nil {
		i.deadline.Store(0)
		return nil, fmt.Errorf("engine: instantiate %q: %w", m.name, err)
	}
	mod, err := i.rt.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, lm), m.compiled, sandboxConfig(i.stdout, i.stderr, st))
	i.deadline.Store(0)
	if err != nil {
		lm.Free() // wazero may not have: the charge goes back
		return nil, m.err(InstantiateFailed, firstLine(err.Error(), 400), err)
	}
	l := &live{
		mod:      mod,
		mem:      mod.Memory(),
		lm:       lm,
		process:  mod.ExportedFunction(abi.ExportProcess),
		input:    mod.ExportedFunction(abi.ExportInput),
		onTimer:  mod.ExportedFunction(abi.ExportOnTimer),
		onCommit: mod.ExportedFunction(abi.ExportOnCommit),
		migrate:  mod.ExportedFunction(abi.ExportMigrate),
	}
	if m.info.Batch {
		l.batch = mod.ExportedFunction(abi.ExportBatch)
	}
	l.flag, _ = mod.ExportedGlobal(exportInterrupt).(api.MutableGlobal)
	l.count, _ = mod.ExportedGlobal(exportCountdown).(api.MutableGlobal)
	l.stack, _ = mod.ExportedGlobal(exportStack).(api.MutableGlobal)
	l.sandbox = st
	globalsOK := true
	if m.snapshotGlobals > 0 {
		l.globals, globalsOK = snapshotGlobalsOf(mod, m.snapshotGlobals)
	}
	if l.mem == nil || l.flag == nil || l.count == nil || l.stack == nil || l.process == nil || l.input == nil || !globalsOK {
		_ = mod.Close(ctx)
		return nil, m.err(InstantiateFailed, "instrumented exports missing (engine bug)", nil)
	}
	l.stack.Set(api.EncodeI32(int32(i.rt.opts.StackLimit)))
	i.imu.Lock()
	i.cur = l
	i.imu.Unlock()
	return l, nil
}

// initialize runs the initializers of l, just instantiated, and asks for
// its input buffer.
func (i *Instance) initialize(ctx context.Context, l *live) error {
	m := i.m

	i.undeclared = i.undeclared[:0]
	for _, name := range m.initFuncs {
		i.beginCall(phaseInit)
		intr, err := i.call(l.mod.ExportedFunction(name), i.rt.tick.Load()+i.rt.initTicks)
		i.phase = phaseNone
		if intr || err != nil {
			if errors.Is(err, ErrClosed) && !intr {
				i.discard(ctx)
				return fmt.Errorf("engine: instantiate %q: %w", m.name, ErrClosed)
			}
			kind, msg := i.classify(err, intr, i.rt.opts.InitTimeout)
			i.discard(ctx)
			return i.initErr(InitTrapped, fmt.Sprintf("%s: %s: %s", displayName(name), kind, msg), err)
		}
		if i.misuseMsg != "" {
			i.discard(ctx)
			return i.initErr(InitFailed, fmt.Sprintf("%s: ABI misuse: %s", displayName(name), i.misuseMsg), nil)
		}
		if name == abi.ExportInit {
			switch st := abi.Status(int32(i.stack[0])); st {
			case abi.StatusOK:
			case abi.StatusFailed:
				msg := i.reason()
				i.discard(ctx)
				return i.initErr(InitFailed, abi.ExportInit+" returned StatusFailed: "+msg, nil)
			default:
				i.discard(ctx)
				return i.initErr(InitFailed, fmt.Sprintf("%s returned unknown status %d", abi.ExportInit, st), nil)
			}
		}
	}
	ptr, kind, msg, err := i.callInput(ctx, defaultInputSize, i.rt.tick.Load()+i.rt.initTicks, i.rt.opts.InitTimeout)
	if kind != 0 {
		if kind == InstanceLost {
			i.discard(ctx)
			return fmt.Errorf("engine: instantiate %q: %w", m.name, ErrClosed)
		}
		if kind == ABIMisuse {
			i.discard(ctx)
			return i.initErr(InitFailed, msg, err)
		}
		return i.initErr(InitTrapped, msg, err)
	}
	l.inPtr, l.inCap = ptr, 0
	if ptr != 0 {
		l.inCap = defaultInputSize
	}
	return nil
}

// initErr is the error of an instance whose start failed: with the
// names the plugin asked for and the processor does not declare, and, for
// a trap of a WASI command module, what to build instead.
func (i *Instance) initErr(kind ModuleErrorKind, msg string, err error) error {
	if kind == InitTrapped && i.m.command {
		msg += commandHint
	}
	return &ModuleError{Module: i.m.name, Kind: kind, Msg: msg, Err: err, Undeclared: slices.Clone(i.undeclared)}
}

// maxUndeclared bounds the names an instance's start remembers (and each
// name's length), so a plugin asking for a million names during init
// costs the host nothing more.
const (
	maxUndeclared     = 16
	maxUndeclaredName = 256
)

// noteUndeclared remembers, during init, a name the plugin asked for
// (output_index, store_index) that the processor does not declare.
func (i *Instance) noteUndeclared(kind string, name []byte) {
	if i.phase != phaseInit || len(i.undeclared) >= maxUndeclared || len(name) > maxUndeclaredName {
		return
	}
	for _, u := range i.undeclared {
		if u.Kind == kind && u.Name == string(name) {
			return
		}
	}
	i.undeclared = append(i.undeclared, Undeclared{Kind: kind, Name: string(name)})
}

// displayName names an init function for messages.
func displayName(export string) string {
	if export == exportStart {
		return "start function"
	}
	return export
}

// callInput asks the plugin for an input buffer of size bytes, a call
// done by the watchdog tick due (limit names its budget in messages). ptr
// 0 means the plugin has none. kind != 0 is a failure; a trap has already
// discarded the instance.
func (i *Instance) callInput(ctx context.Context, size uint32, due int64, limit time.Duration) (ptr uint32, kind FailureKind, msg string, err error) {
	l := i.cur
	i.beginCall(phaseInit)
	i.stack[0] = uint64(size)
	intr, err := i.call(l.input, due)
	i.phase = phaseNone
	if intr || err != nil {
		if !intr && errors.Is(err, ErrClosed) {
			return 0, InstanceLost, "the runtime is closed", err
		}
		kind, msg := i.classify(err, intr, limit)
		i.discard(ctx)
		return 0, kind, fmt.Sprintf("%s(%d): %s: %s", abi.ExportInput, size, kind, msg), err
	}
	if i.misuseMsg != "" {
		return 0, ABIMisuse, fmt.Sprintf("%s(%d): %s", abi.ExportInput, size, i.misuseMsg), nil
	}
	ptr = uint32(i.stack[0])
	if ptr == 0 {
		return 0, 0, "", nil
	}
	if _, ok := l.mem.Read(ptr, size); !ok {
		return 0, ABIMisuse, fmt.Sprintf("%s(%d) returned [%d, %d), outside plugin memory of %d bytes",
			abi.ExportInput, size, ptr, uint64(ptr)+uint64(size), l.mem.Size()), nil
	}
	return ptr, 0, "", nil
}

// growInput gets an input buffer for a record of n bytes: first a power of
// two (so that slowly growing records do not ask every time), then exactly
// n; its calls are the record's, done by the watchdog tick due.
func (i *Instance) growInput(ctx context.Context, n int, due int64) error {
	if n > math.MaxInt32 {
		return i.recordErr(PluginFailed, fmt.Sprintf("record of %d bytes is too large for the plugin's memory", n), nil)
	}
	sizes := [2]uint32{uint32(max(n, defaultInputSize)), uint32(n)}
	if s := sizes[0]; s&(s-1) != 0 {
		sizes[0] = 1 << bits.Len32(s)
	}
	for _, size := range sizes {
		if size < uint32(n) {
			continue
		}
		ptr, kind, msg, err := i.callInput(ctx, size, due, i.rt.opts.RecordTimeout)
		if kind == ABIMisuse {
			return i.misused(ctx, msg)
		}
		if kind != 0 {
			return i.recordErr(kind, msg, err)
		}
		if ptr != 0 {
			i.cur.inPtr, i.cur.inCap = ptr, size
			return nil
		}
	}
	return i.recordErr(PluginFailed, fmt.Sprintf("the plugin has no input buffer for a record of %d bytes (%s returned 0)", n, abi.ExportInput), nil)
}
