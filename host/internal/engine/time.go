package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
)

// Time is one task's clocks, timers and commit marks (abi/ABI.md section 8).
// The caller implements it per task and passes it in Binding.Time; the
// engine calls it on the goroutine of Process, OnTimer and OnCommit. The
// engine checks the ABI's arguments and phases before calling it: a kind
// is TimerEventTime or TimerProcessingTime, ts >= 0, a key at most
// abi.MaxTimerKeySize bytes. Keys alias guest memory and are valid only
// during the call: an implementation copies what it keeps.
//
// Timer changes and marks belong to the current call: like State writes,
// the caller discards them when the call fails (the engine cannot undo
// them).
type Time interface {
	// Now returns the task's stream time (abi.NoTime if it has none) and
	// the wall time for the current call, in ms since the epoch. The
	// engine calls it once at the start of a call that needs the clocks
	// (a Process of a module importing time_now; every OnTimer and
	// OnCommit), so every value the plugin sees in one call is the same.
	// For Process the caller has already moved the stream time to include
	// the record.
	Now() (stream, wall int64)
	// SetTimer stages timer (kind, ts, key) with the current call's writes;
	// added reports a new timer (false: it was already pending).
	// ErrTimerLimit gives the plugin ELIMIT; any other error gives it EIO
	// and fails the call (HostFailed).
	SetTimer(kind abi.TimerKind, ts int64, key []byte) (added bool, err error)
	// CancelTimer stages the removal of timer (kind, ts, key); removed
	// reports that it was pending. An error gives the plugin EIO and fails
	// the call (HostFailed).
	CancelTimer(kind abi.TimerKind, ts int64, key []byte) (removed bool, err error)
	// Mark marks key for one on_commit call in this commit window,
	// remembering ts (the last mark's wins); added reports a key not yet
	// marked in the window. ErrMarkLimit gives the plugin ELIMIT; any
	// other error gives it EIO and fails the call (HostFailed).
	Mark(key []byte, ts int64) (added bool, err error)
}

// Errors a Time returns for the task's limits (abi/ABI.md section 8.6). The
// plugin gets ELIMIT and decides; the call does not fail for it. Matched
// with errors.Is, so an implementation may wrap them.
var (
	// ErrTimerLimit: the task has as many pending timers as it may
	// (limits.timers), counting the call's own staged sets and cancels.
	ErrTimerLimit = errors.New("engine: pending timer limit reached")
	// ErrMarkLimit: the commit window has as many marked keys as it may
	// (limits.commit_marks).
	ErrMarkLimit = errors.New("engine: commit mark limit reached")
	// ErrStateLimit: the task's stores hold as much on disk as they may
	// (limits.state_disk); a State's Put or a Time's SetTimer returns it.
	ErrStateLimit = errors.New("engine: the task's state is at its disk budget")
	// ErrStateTooLarge: where the store's changes go (its changelog)
	// would refuse the write for its size; a State's Put or a Time's
	// SetTimer returns it. The plugin gets ETOOLARGE and the call fails,
	// as for an emit its output would refuse.
	ErrStateTooLarge = errors.New("engine: the write is larger than its store's changelog takes")
)

// OnTimer runs the plugin's wasmstream_on_timer for a due timer: trig's
// Timestamp (the timer's time), Kind (TimerEventTime or
// TimerProcessingTime) and Key are the caller's; its StreamTime and
// WallTime are set from Binding.Time.Now (taken as given when the binding
// has no Time), so the trigger carries what time_now returns during the
// call. trig itself is not modified. The trigger is written into the
// plugin's input buffer as Process writes records, and the outcome is
// classified as Process does (nil or a *RecordError, the same kinds,
// the same discards, the same time limit); commit_mark remembers the
// timer's time. A module that does not export the callback (Info.HasOnTimer)
// and a trigger of another kind or with a key over abi.MaxTimerKeySize get
// a plain error, and nothing runs.
func (i *Instance) OnTimer(ctx context.Context, trig *abi.Trigger) error {
	if trig.Kind != abi.TimerEventTime && trig.Kind != abi.TimerProcessingTime {
		return fmt.Errorf("engine: processor %q: OnTimer: trigger kind %s, want event or processing", i.b.Name, trig.Kind)
	}
	return i.trigger(ctx, phaseTimer, i.m.info.HasOnTimer, trig)
}

// OnCommit runs the plugin's wasmstream_on_commit for a key marked in the
// commit window that ends: trig's Kind is TriggerCommit, its Timestamp the
// one the last Mark of the key remembered. Otherwise as OnTimer; during the
// call commit_mark returns EPHASE.
func (i *Instance) OnCommit(ctx context.Context, trig *abi.Trigger) error {
	if trig.Kind != abi.TriggerCommit {
		return fmt.Errorf("engine: processor %q: OnCommit: trigger kind %s, want commit", i.b.Name, trig.Kind)
	}
	return i.trigger(ctx, phaseCommit, i.m.info.HasOnCommit, trig)
}

func (i *Instance) trigger(ctx context.Context, p phase, exported bool, trig *abi.Trigger) error {
	if !exported {
		export := abi.ExportOnTimer
		if p == phaseCommit {
			export = abi.ExportOnCommit
		}
		return fmt.Errorf("engine: processor %q: module %q does not export %s", i.b.Name, i.m.name, export)
	}
	if len(trig.Key) > abi.MaxTimerKeySize {
		return fmt.Errorf("engine: processor %q: a %d-byte trigger key, over abi.MaxTimerKeySize (%d)", i.b.Name, len(trig.Key), abi.MaxTimerKeySize)
	}
	due := i.recordDue()
	buf, err := i.input(ctx, trig.EncodedSize(), due)
	if err != nil {
		return err
	}
	i.streamNow, i.wallNow = trig.StreamTime, trig.WallTime
	if i.b.Time != nil {
		i.streamNow, i.wallNow = i.b.Time.Now()
	}
	encodeTrigger(buf, trig, i.streamNow, i.wallNow)
	i.markTS = trig.Timestamp
	return i.run(ctx, p, len(buf), due)
}

// encodeTrigger writes trig into buf (exactly its encoded size) with the
// given clocks in place of its own.
func encodeTrigger(buf []byte, trig *abi.Trigger, stream, wall int64) {
	t := abi.Trigger{Timestamp: trig.Timestamp, StreamTime: stream, WallTime: wall, Kind: trig.Kind, Key: trig.Key}
	// buf has exactly the room: AppendEncode writes in place.
	t.AppendEncode(buf[:0])
}

// timerArgs checks the arguments of timer_set and timer_cancel in the
// ABI's order (phase, abi.CheckTimer, bounds) and returns the key, or the
// errno to return.
func (i *Instance) timerArgs(fn string, kind uint32, ts int64, keyPtr, keyLen uint32) ([]byte, int32) {
	if !i.phase.inCall() || i.phase == phaseMigrate {
		return nil, abi.ErrnoPhase.Result()
	}
	if e := abi.CheckTimer(abi.TimerKind(kind), ts, int(keyLen)); e != 0 {
		return nil, e.Result()
	}
	key, ok := i.read(fn, keyPtr, keyLen)
	if !ok {
		return nil, abi.ErrnoFault.Result()
	}
	return key, 0
}

// timeEntryOverhead is what a timer change or a mark costs the host beyond
// its key (the stored entry's prefix and bookkeeping), in bytes: each such
// call counts key + timeEntryOverhead against the record's state-bytes
// limit (Options.Record.MaxStateBytes), so time calls cannot stage more
// than state writes can.
const timeEntryOverhead = 32

func (i *Instance) timerSet(kind uint32, ts int64, keyPtr, keyLen uint32) int32 {
	key, e := i.timerArgs(abi.ImportTimerSet, kind, ts, keyPtr, keyLen)
	if e != 0 {
		return e
	}
	if e := i.chargeState(abi.ImportTimerSet, keyLen+timeEntryOverhead); e != 0 {
		return e
	}
	var added bool
	err := i.safeTime(func(t Time) (err error) {
		added, err = t.SetTimer(abi.TimerKind(kind), ts, key)
		return err
	})
	switch {
	case errors.Is(err, ErrTimerLimit), errors.Is(err, ErrStateLimit):
		return abi.ErrnoLimit.Result()
	case isHeldLimit(err):
		return i.overLimit(abi.ErrnoLimit, "%s: %s: %v", abi.ImportTimerSet, abi.ErrnoLimit.Name(), err)
	case errors.Is(err, ErrStateTooLarge):
		return i.overLimit(abi.ErrnoTooLarge, "%s: %s: %v", abi.ImportTimerSet, abi.ErrnoTooLarge.Name(), err)
	case err != nil:
		i.hostFail("timer set", err)
		return abi.ErrnoIO.Result()
	}
	return b2i(added)
}

func (i *Instance) timerCancel(kind uint32, ts int64, keyPtr, keyLen uint32) int32 {
	key, e := i.timerArgs(abi.ImportTimerCancel, kind, ts, keyPtr, keyLen)
	if e != 0 {
		return e
	}
	if e := i.chargeState(abi.ImportTimerCancel, keyLen+timeEntryOverhead); e != 0 {
		return e
	}
	var removed bool
	err := i.safeTime(func(t Time) (err error) {
		removed, err = t.CancelTimer(abi.TimerKind(kind), ts, key)
		return err
	})
	if err != nil {
		i.hostFail("timer cancel", err)
		return abi.ErrnoIO.Result()
	}
	return b2i(removed)
}

// timeNow returns an i64: a time, abi.NoTime, or a small negative -errno.
func (i *Instance) timeNow(clock uint32) int64 {
	if !i.phase.inCall() {
		return int64(abi.ErrnoPhase.Result())
	}
	switch clock {
	case abi.ClockStream:
		return i.streamNow
	case abi.ClockWall:
		return i.wallNow
	}
	return int64(abi.ErrnoInval.Result())
}

func (i *Instance) commitMark(keyPtr, keyLen uint32) int32 {
	if i.phase != phaseRecord && i.phase != phaseTimer {
		return abi.ErrnoPhase.Result()
	}
	if keyLen > abi.MaxTimerKeySize {
		return abi.ErrnoTooLarge.Result()
	}
	key, ok := i.read(abi.ImportCommitMark, keyPtr, keyLen)
	if !ok {
		return abi.ErrnoFault.Result()
	}
	if e := i.chargeState(abi.ImportCommitMark, keyLen+timeEntryOverhead); e != 0 {
		return e
	}
	var added bool
	err := i.safeTime(func(t Time) (err error) {
		added, err = t.Mark(key, i.markTS)
		return err
	})
	switch {
	case errors.Is(err, ErrMarkLimit):
		return abi.ErrnoLimit.Result()
	case isHeldLimit(err):
		return i.overLimit(abi.ErrnoLimit, "%s: %s: %v", abi.ImportCommitMark, abi.ErrnoLimit.Name(), err)
	case err != nil:
		i.hostFail("commit mark", err)
		return abi.ErrnoIO.Result()
	}
	return b2i(added)
}

// safeTime calls f with the binding's Time; a panic there becomes an
// error (EIO, HostFailed), as for State.
func (i *Instance) safeTime(f func(Time) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if i.b.Time == nil {
		// Instantiate refuses a module importing time functions without
		// a Time; only a host call without an instance gets here.
		return errors.New("the binding has no Time")
	}
	return f(i.b.Time)
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
