package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// The "wasmstream" host module. Every function takes u32 arguments (and the
// timer functions an i64 time), returns an i32 (time_now an i64): a result
// >= 0 or -Errno; it finds its Instance through the
// context the Instance passes to every call (ctx.Value with a zero-size key:
// no allocation). Each pointer/length pair is bounds-checked; a fault is
// also recorded on the instance so the record fails with ABIMisuse even if
// the plugin ignores the result.
//
// As abi/ABI.md says, EFAULT and ENOOUTPUT also fail the record (ABIMisuse,
// and the instance is replaced), and EIO (the Sink or State failed) fails it
// as HostFailed. Every other errno (EINVAL, ENOSTORE, ENOTFOUND, ETOOLARGE,
// ENOCURSOR, EPHASE, ELIMIT, ENONAME) is only returned: the plugin decides.

type hostFunc struct {
	name   string
	params []api.ValueType
	result api.ValueType
	fn     api.GoModuleFunc
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

var hostFuncs = []hostFunc{
	{abi.ImportEmit, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).emit(u32(s[0]), u32(s[1])))
	}},
	{abi.ImportOutputIndex, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		i := instanceOf(ctx)
		ret(s, i.outputIndex(u32(s[0]), u32(s[1])))
	}},
	{abi.ImportStoreIndex, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		i := instanceOf(ctx)
		ret(s, i.storeIndex(u32(s[0]), u32(s[1])))
	}},
	{abi.ImportConfig, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).config(u32(s[0]), u32(s[1])))
	}},
	{abi.ImportLog, i32s(3), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).logLine(u32(s[0]), u32(s[1]), u32(s[2])))
	}},
	{abi.ImportSetError, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).setError(u32(s[0]), u32(s[1])))
	}},
	{abi.ImportStateGet, i32s(5), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).stateGet(u32(s[0]), u32(s[1]), u32(s[2]), u32(s[3]), u32(s[4])))
	}},
	{abi.ImportStatePut, i32s(5), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).statePut(u32(s[0]), u32(s[1]), u32(s[2]), u32(s[3]), u32(s[4])))
	}},
	{abi.ImportStateDelete, i32s(3), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).stateDelete(u32(s[0]), u32(s[1]), u32(s[2])))
	}},
	{abi.ImportScanOpen, i32s(5), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).scanOpen(u32(s[0]), u32(s[1]), u32(s[2]), u32(s[3]), u32(s[4])))
	}},
	{abi.ImportScanNext, i32s(3), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).scanNext(u32(s[0]), u32(s[1]), u32(s[2])))
	}},
	{abi.ImportScanClose, i32s(1), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).scanClose(u32(s[0])))
	}},
	// Time (abi/ABI.md section 8.2; time.go).
	{abi.ImportTimerSet, []api.ValueType{i32, i64, i32, i32}, i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).timerSet(u32(s[0]), int64(s[1]), u32(s[2]), u32(s[3])))
	}},
	{abi.ImportTimerCancel, []api.ValueType{i32, i64, i32, i32}, i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).timerCancel(u32(s[0]), int64(s[1]), u32(s[2]), u32(s[3])))
	}},
	{abi.ImportTimeNow, i32s(1), i64, func(ctx context.Context, _ api.Module, s []uint64) {
		s[0] = uint64(instanceOf(ctx).timeNow(u32(s[0])))
	}},
	{abi.ImportCommitMark, i32s(2), i32, func(ctx context.Context, _ api.Module, s []uint64) {
		ret(s, instanceOf(ctx).commitMark(u32(s[0]), u32(s[1])))
	}},
}

// hostSignature returns the signature of a host import, and false for a name
// the host does not provide.
func hostSignature(name string) (string, bool) {
	for _, h := range hostFuncs {
		if h.name == name {
			return signature(h.params, []api.ValueType{h.result}), true
		}
	}
	return "", false
}

func i32s(n int) []api.ValueType {
	t := make([]api.ValueType, n)
	for k := range t {
		t[k] = api.ValueTypeI32
	}
	return t
}

func instantiateHostModule(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.ImportModule)
	for _, h := range hostFuncs {
		b.NewFunctionBuilder().
			WithGoModuleFunction(h.fn, h.params, []api.ValueType{h.result}).
			Export(h.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// instanceKey is the context key of the calling Instance. Zero-size, so
// converting it to an interface does not allocate.
type instanceKey struct{}

// noInstance serves host calls that arrive without an Instance in the
// context (impossible through the engine; kept so a nil never panics).
var noInstance = &Instance{phase: phaseNone}

func instanceOf(ctx context.Context) *Instance {
	if i, ok := ctx.Value(instanceKey{}).(*Instance); ok && i.cur != nil {
		if i.bat.active {
			i.sync() // attribute this host call to the batch's call in progress
		}
		return i
	}
	return noInstance
}

func u32(v uint64) uint32 { return uint32(v) }

func ret(s []uint64, v int32) { s[0] = api.EncodeI32(v) }

// phase is what the instance is doing; it decides which imports are allowed.
type phase uint8

const (
	phaseNone    phase = iota // no call (or no instance): every import fails with EPHASE
	phaseInit                 // start, _initialize, wasmstream_init, wasmstream_input
	phaseRecord               // wasmstream_process
	phaseTimer                // wasmstream_on_timer
	phaseCommit               // wasmstream_on_commit
	phaseMigrate              // wasmstream_migrate: state only (no emits, no timers)
)

// inCall reports a call about a record or a trigger: the phases in which
// a plugin may emit, use state and set timers. They follow phaseInit.
func (p phase) inCall() bool { return p >= phaseRecord }

// misuse records the first ABI misuse of the current call.
func (i *Instance) misuse(format string, args ...any) {
	if i.misuseMsg == "" {
		i.misuseMsg = fmt.Sprintf(format, args...)
	}
}

// overLimit records the first per-record limit the current record hit and
// returns the errno the plugin gets for it.
func (i *Instance) overLimit(e abi.Errno, format string, args ...any) int32 {
	if i.limitMsg == "" {
		i.limitMsg = fmt.Sprintf(format, args...)
		i.limitErrno = e
	}
	return e.Result()
}

// hostFail records the first host-side failure of the current call.
func (i *Instance) hostFail(what string, err error) {
	if i.hostErr == nil {
		i.hostErr = fmt.Errorf("%s: %w", what, err)
	}
}

// read bounds-checks [ptr, ptr+n) and returns a view of guest memory.
func (i *Instance) read(fn string, ptr, n uint32) ([]byte, bool) {
	b, ok := i.cur.mem.Read(ptr, n)
	if !ok {
		i.misuse("%s: %s: [%d, %d) is outside plugin memory of %d bytes",
			fn, abi.ErrnoFault.Name(), ptr, uint64(ptr)+uint64(n), i.cur.mem.Size())
	}
	return b, ok
}

// inRecord refuses calls made outside process, on_timer and on_commit
// with EPHASE.
func (i *Instance) inRecord() int32 {
	if i.phase.inCall() {
		return 0
	}
	return abi.ErrnoPhase.Result()
}

func (i *Instance) emit(ptr, n uint32) int32 {
	if e := i.inRecord(); e != 0 {
		return e
	}
	if i.phase == phaseMigrate {
		return abi.ErrnoPhase.Result() // a migration has no input to answer
	}
	if n > abi.MaxRecordSize {
		return abi.ErrnoTooLarge.Result()
	}
	b, ok := i.read(abi.ImportEmit, ptr, n)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if err := i.emitRec.Decode(b); err != nil {
		return abi.ErrnoInval.Result()
	}
	return i.acceptEmit(int(n))
}

// acceptEmit checks the record decoded into i.emitRec (n bytes encoded)
// against the record's limits and its output's size, counts it and hands
// it to the Sink. The result is emit's: 0 or -errno, the failure recorded
// on the call.
func (i *Instance) acceptEmit(n int) int32 {
	if uint64(i.emitRec.Index) >= uint64(len(i.b.Outputs)) {
		i.misuse("%s: %s: output index %d, but the processor declares %d output(s)",
			abi.ImportEmit, abi.ErrnoNoOutput.Name(), i.emitRec.Index, len(i.b.Outputs))
		return abi.ErrnoNoOutput.Result()
	}
	lim := &i.rt.opts.Record
	if i.emits >= lim.MaxEmits {
		return i.overLimit(abi.ErrnoLimit, "%s: %s: more than %d emits in one record", abi.ImportEmit, abi.ErrnoLimit.Name(), lim.MaxEmits)
	}
	if i.emitBytes+n > lim.MaxEmitBytes {
		return i.overLimit(abi.ErrnoLimit, "%s: %s: more than %d bytes emitted in one record", abi.ImportEmit, abi.ErrnoLimit.Name(), lim.MaxEmitBytes)
	}
	i.emits++
	i.emitBytes += n
	if err := i.sinkEmit(); err != nil {
		var refused abi.Errno
		if errors.As(err, &refused) && refused > 0 {
			// The Sink refuses this record for its output (too large for
			// the topic, a key the topic requires): the plugin gets the
			// errno and the record fails with the Sink's reason.
			return i.overLimit(refused, "%s: %s: output %q: %v", abi.ImportEmit, refused.Name(), i.b.Outputs[i.emitRec.Index], err)
		}
		i.hostFail("sink", err)
		return abi.ErrnoIO.Result()
	}
	return 0
}

// chargeState counts n state bytes against Options.Record.MaxStateBytes;
// a negative result is the errno to return.
func (i *Instance) chargeState(fn string, n uint32) int32 {
	if max := i.rt.opts.Record.MaxStateBytes; i.stateBytes+int(n) > max {
		return i.overLimit(abi.ErrnoLimit, "%s: %s: more than %d state bytes written in one record", fn, abi.ErrnoLimit.Name(), max)
	}
	i.stateBytes += int(n)
	return 0
}

// isHeldLimit reports whether a State or Time call was refused because the
// host holds as much as it may for the task (abi.ErrnoLimit in the error's
// chain; abi/ABI.md section 7, "Per task: what the host holds"): the
// plugin gets ELIMIT and the record fails (limit exceeded), as at the
// per-record limits, which the Sink signals the same way for emits.
func isHeldLimit(err error) bool {
	if err == nil {
		// errors.As reflects on its target even for a nil error, and the
		// target escapes: a commit mark paid both on every call.
		return false
	}
	var e abi.Errno
	return errors.As(err, &e) && e == abi.ErrnoLimit
}

// sinkEmit calls the Sink; a panic there becomes an error.
func (i *Instance) sinkEmit() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return i.b.Sink.Emit(int(i.emitRec.Index), &i.emitRec)
}

func (i *Instance) nameIndex(fn string, names []string, ptr, n uint32) int32 {
	if i.phase == phaseNone {
		return abi.ErrnoPhase.Result()
	}
	b, ok := i.read(fn, ptr, n)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	for k, name := range names {
		if string(b) == name {
			return int32(k)
		}
	}
	return abi.ErrnoNoName.Result()
}

func (i *Instance) config(ptr, capacity uint32) int32 {
	if i.phase == phaseNone {
		return abi.ErrnoPhase.Result()
	}
	out, ok := i.read(abi.ImportConfig, ptr, capacity)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if len(i.b.Config) <= len(out) {
		copy(out, i.b.Config)
	}
	return int32(len(i.b.Config))
}

func (i *Instance) logLine(level, ptr, n uint32) int32 {
	if i.phase == phaseNone {
		return abi.ErrnoPhase.Result()
	}
	b, ok := i.read(abi.ImportLog, ptr, n)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	var lvl slog.Level
	switch level {
	case abi.LogDebug:
		lvl = slog.LevelDebug
	case abi.LogInfo:
		lvl = slog.LevelInfo
	case abi.LogWarn:
		lvl = slog.LevelWarn
	case abi.LogError:
		lvl = slog.LevelError
	default:
		return abi.ErrnoInval.Result()
	}
	ctx := context.Background()
	if !i.log.Enabled(ctx, lvl) || !i.logs.allow(min(len(b), abi.MaxLogSize)) {
		return 0
	}
	if len(b) > abi.MaxLogSize {
		i.log.LogAttrs(ctx, lvl, string(b[:abi.MaxLogSize]), slog.Bool("truncated", true))
	} else {
		i.log.LogAttrs(ctx, lvl, string(b))
	}
	return 0
}

func (i *Instance) setError(ptr, n uint32) int32 {
	if i.phase == phaseNone {
		return abi.ErrnoPhase.Result()
	}
	b, ok := i.read(abi.ImportSetError, ptr, n)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if len(b) > abi.MaxLogSize {
		b = b[:abi.MaxLogSize]
	}
	i.errText = append(i.errText[:0], b...)
	i.errSet = true
	return 0
}

// outputIndex is output_index.
func (i *Instance) outputIndex(ptr, n uint32) int32 {
	r := i.nameIndex(abi.ImportOutputIndex, i.b.Outputs, ptr, n)
	if r == abi.ErrnoNoName.Result() {
		i.undeclaredName("output", ptr, n)
	}
	return r
}

// storeIndex is store_index: the processor's stores, then its tables.
func (i *Instance) storeIndex(ptr, n uint32) int32 {
	r := i.nameIndex(abi.ImportStoreIndex, i.b.Stores, ptr, n)
	if r != abi.ErrnoNoName.Result() {
		return r
	}
	r = i.nameIndex(abi.ImportStoreIndex, i.b.Tables, ptr, n)
	if r >= 0 {
		r += int32(len(i.b.Stores))
	} else if r == abi.ErrnoNoName.Result() {
		i.undeclaredName("store", ptr, n)
	}
	return r
}

// undeclaredName remembers a name that got ENONAME during the start
// (noteUndeclared); nameIndex has read it already, so it is in memory.
func (i *Instance) undeclaredName(kind string, ptr, n uint32) {
	if i.phase != phaseInit {
		return
	}
	if b, ok := i.read(abi.ImportOutputIndex, ptr, n); ok {
		i.noteUndeclared(kind, b)
	}
}

// checkStore validates the phase and the store index of a state call.
func (i *Instance) checkStore(store uint32) int32 {
	if e := i.inRecord(); e != 0 {
		return e
	}
	if _, _, ok := i.stateOf(store); !ok {
		return abi.ErrnoNoStore.Result()
	}
	return 0
}

// stateOf resolves a store argument: the task's State and a store index,
// or for an index past the stores the TableState and a table index.
func (i *Instance) stateOf(store uint32) (st State, idx int, ok bool) {
	switch n := uint64(len(i.b.Stores)); {
	case uint64(store) < n && i.b.State != nil:
		return i.b.State, int(store), true
	case uint64(store) >= n && uint64(store)-n < uint64(len(i.b.Tables)) && i.b.TableState != nil:
		return i.b.TableState, int(uint64(store) - n), true
	}
	return nil, 0, false
}

// isTable reports whether a valid store argument names a read-only table.
func (i *Instance) isTable(store uint32) bool { return uint64(store) >= uint64(len(i.b.Stores)) }

func (i *Instance) stateGet(store, keyPtr, keyLen, outPtr, outCap uint32) int32 {
	if e := i.checkStore(store); e != 0 {
		return e
	}
	if keyLen > abi.MaxKeySize {
		return abi.ErrnoTooLarge.Result()
	}
	key, ok := i.read(abi.ImportStateGet, keyPtr, keyLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	out, ok := i.read(abi.ImportStateGet, outPtr, outCap)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	st, idx, _ := i.stateOf(store)
	v, found, err := i.safeGet(st, idx, key)
	if err != nil {
		i.hostFail("state get", err)
		return abi.ErrnoIO.Result()
	}
	if !found {
		return abi.ErrnoNotFound.Result()
	}
	if len(v) > math.MaxInt32 {
		return abi.ErrnoTooLarge.Result()
	}
	if len(v) <= len(out) {
		copy(out, v)
	}
	return int32(len(v))
}

func (i *Instance) statePut(store, keyPtr, keyLen, valPtr, valLen uint32) int32 {
	if e := i.checkStore(store); e != 0 {
		return e
	}
	if i.isTable(store) {
		return abi.ErrnoInval.Result() // tables are read-only; the record goes on
	}
	if keyLen > abi.MaxKeySize || valLen > abi.MaxValueSize {
		return abi.ErrnoTooLarge.Result()
	}
	key, ok := i.read(abi.ImportStatePut, keyPtr, keyLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	val, ok := i.read(abi.ImportStatePut, valPtr, valLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if e := i.chargeState(abi.ImportStatePut, keyLen+valLen); e != 0 {
		return e
	}
	if err := i.safeState(func(s State) error { return s.Put(int(store), key, val) }); err != nil {
		if errors.Is(err, ErrStateLimit) {
			return abi.ErrnoLimit.Result() // the plugin decides, as at the timer limit
		}
		if isHeldLimit(err) {
			return i.overLimit(abi.ErrnoLimit, "%s: %s: %v", abi.ImportStatePut, abi.ErrnoLimit.Name(), err)
		}
		if errors.Is(err, ErrStateTooLarge) {
			// Its changelog would refuse it: the record fails, as for an
			// emit its output would refuse (a write silently missing
			// otherwise, or a poison pill for the transaction).
			return i.overLimit(abi.ErrnoTooLarge, "%s: %s: %v", abi.ImportStatePut, abi.ErrnoTooLarge.Name(), err)
		}
		i.hostFail("state put", err)
		return abi.ErrnoIO.Result()
	}
	return 0
}

func (i *Instance) stateDelete(store, keyPtr, keyLen uint32) int32 {
	if e := i.checkStore(store); e != 0 {
		return e
	}
	if i.isTable(store) {
		return abi.ErrnoInval.Result() // tables are read-only; the record goes on
	}
	if keyLen > abi.MaxKeySize {
		return abi.ErrnoTooLarge.Result()
	}
	key, ok := i.read(abi.ImportStateDelete, keyPtr, keyLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if e := i.chargeState(abi.ImportStateDelete, keyLen); e != 0 {
		return e
	}
	if err := i.safeState(func(s State) error { return s.Delete(int(store), key) }); err != nil {
		if isHeldLimit(err) {
			return i.overLimit(abi.ErrnoLimit, "%s: %s: %v", abi.ImportStateDelete, abi.ErrnoLimit.Name(), err)
		}
		i.hostFail("state delete", err)
		return abi.ErrnoIO.Result()
	}
	return 0
}

func (i *Instance) safeGet(st State, store int, key []byte) (v []byte, found bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return st.Get(store, key)
}

// safeState calls f with the task's State, a panic made an error.
func (i *Instance) safeState(f func(State) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(i.b.State)
}

// cursor is one open scan. Bounds are copied out of guest memory (an
// iterator may keep them); an entry that did not fit the plugin's buffer is
// kept (pending) and returned by the next scan_next.
type cursor struct {
	it         Iterator
	open       bool
	start, end []byte
	pending    bool
	key, value []byte
}

func (i *Instance) scanOpen(store, startPtr, startLen, endPtr, endLen uint32) int32 {
	if e := i.checkStore(store); e != 0 {
		return e
	}
	if startLen > abi.MaxKeySize || endLen > abi.MaxKeySize {
		return abi.ErrnoTooLarge.Result()
	}
	start, ok := i.read(abi.ImportScanOpen, startPtr, startLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	end, ok := i.read(abi.ImportScanOpen, endPtr, endLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	for id := range i.cursors {
		c := &i.cursors[id]
		if c.open {
			continue
		}
		c.start = append(c.start[:0], start...)
		c.end = append(c.end[:0], end...)
		var it Iterator
		st, idx, _ := i.stateOf(store)
		err := i.safeState(func(State) (err error) {
			it, err = st.Scan(idx, c.start, c.end)
			return err
		})
		if err != nil {
			i.hostFail("state scan", err)
			return abi.ErrnoIO.Result()
		}
		c.it, c.open, c.pending = it, true, false
		i.openCursors++
		return int32(id)
	}
	return abi.ErrnoLimit.Result()
}

func (i *Instance) cursor(id uint32) *cursor {
	if uint64(id) < uint64(len(i.cursors)) && i.cursors[id].open {
		return &i.cursors[id]
	}
	return nil
}

func (i *Instance) scanNext(id, outPtr, outCap uint32) int32 {
	if e := i.inRecord(); e != 0 {
		return e
	}
	c := i.cursor(id)
	if c == nil {
		return abi.ErrnoNoCursor.Result()
	}
	out, ok := i.read(abi.ImportScanNext, outPtr, outCap)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if !c.pending {
		var more bool
		err := i.safeState(func(State) (err error) {
			c.key, c.value, more, err = c.it.Next()
			return err
		})
		if err != nil {
			i.hostFail("state scan next", err)
			return abi.ErrnoIO.Result()
		}
		if !more {
			return 0
		}
		c.pending = true
	}
	size := abi.ScanEntryHeaderSize + len(c.key) + len(c.value)
	if size > math.MaxInt32 {
		return abi.ErrnoTooLarge.Result()
	}
	if size <= len(out) {
		binary.LittleEndian.PutUint32(out[0:], uint32(len(c.key)))
		binary.LittleEndian.PutUint32(out[4:], uint32(len(c.value)))
		n := copy(out[abi.ScanEntryHeaderSize:], c.key)
		copy(out[abi.ScanEntryHeaderSize+n:], c.value)
		c.pending = false
	}
	return int32(size)
}

func (i *Instance) scanClose(id uint32) int32 {
	if e := i.inRecord(); e != 0 {
		return e
	}
	c := i.cursor(id)
	if c == nil {
		return abi.ErrnoNoCursor.Result()
	}
	if err := i.closeCursor(c); err != nil {
		i.hostFail("state scan close", err)
		return abi.ErrnoIO.Result()
	}
	return 0
}

func (i *Instance) closeCursor(c *cursor) error {
	it := c.it
	c.it, c.open, c.pending, c.key, c.value = nil, false, false, nil, nil
	i.openCursors--
	return i.safeState(func(State) error { return it.Close() })
}

// closeCursors closes what the plugin left open at the end of a call.
func (i *Instance) closeCursors() {
	if i.openCursors == 0 {
		return
	}
	for id := range i.cursors {
		if c := &i.cursors[id]; c.open {
			if err := i.closeCursor(c); err != nil {
				i.log.Warn("closing a scan cursor failed", "err", err)
			}
		}
	}
}
