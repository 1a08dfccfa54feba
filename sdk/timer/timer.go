// Package timer gives a plugin time: timers that call it back when the
// task's stream time or the host's wall clock reaches them, the two clocks
// themselves, and a commit-point hook that calls it once per commit window
// per key it marked. The contract is abi/ABI.md section 8.
//
//	func init() {
//		sdk.Handle(process)
//		timer.Handle(fired)
//	}
//
//	func process(r *sdk.Record) error {
//		// close this key's minute at its end, in event time
//		end := r.Timestamp - r.Timestamp%60_000 + 60_000
//		_, err := timer.Set(timer.EventTime, end, r.Key)
//		return err
//	}
//
//	func fired(f *timer.Firing) error {
//		return out.Emit(sdk.Out{Key: f.Key, Value: ...})
//	}
//
// Timers are state: the host stores them with the task's stores, commits
// them with the input offsets and restores them with the stores, so a
// timer fires at most once in committed output. A plugin sets a timer from
// process, from a timer callback or from a commit callback; setting the
// same (kind, time, key) twice is one timer.
//
// # Cost
//
// Only a plugin that imports this package carries its exports
// (wasmstream_on_timer, wasmstream_on_commit), which is how the host knows
// it uses time; a plugin that does not import it is unchanged. The imports
// (timer_set, time_now, ...) are linked only if the plugin calls the
// functions that use them.
//
// # Lifetimes
//
// A Firing's or a Commit's Key aliases the SDK's input buffer and is valid
// only during the callback, like a Record's slices.
package timer

import (
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/internal/guest"
)

// Kind is what a timer's time is measured against.
type Kind = abi.TimerKind

const (
	// EventTime timers fire when the task's stream time (the largest record
	// timestamp it has seen) reaches their time: after the record that
	// moved it there, or at the next commit point.
	EventTime = abi.TimerEventTime
	// ProcessingTime timers fire when the host's wall clock reaches their
	// time, at a commit point at the latest: the host runs commit points
	// on schedule even when no record arrives.
	ProcessingTime = abi.TimerProcessingTime
)

// NoTime is the stream time of a task that has not seen a record with a
// timestamp yet; it is below every time.
const NoTime = abi.NoTime

// Set sets the timer (kind, ts, key): ts is in milliseconds since the Unix
// epoch; the key is any bytes up to abi.MaxTimerKeySize, empty included.
// It reports whether the timer is new (false: it was already pending, and
// nothing changed). A timer whose time has come fires at the next check.
// Errors wrap abi.ErrnoInval (bad kind, negative ts), abi.ErrnoTooLarge
// (key), abi.ErrnoLimit (the task's pending-timer limit), abi.ErrnoPhase
// (during init). Like state writes, the change stands only if the current
// call succeeds.
func Set(kind Kind, ts int64, key []byte) (bool, error) {
	r := hostTimerSet(uint32(kind), ts, key)
	if r < 0 {
		return false, hostErr(abi.ImportTimerSet, r)
	}
	return r == 1, nil
}

// Cancel removes the timer (kind, ts, key) and reports whether it was
// pending.
func Cancel(kind Kind, ts int64, key []byte) (bool, error) {
	r := hostTimerCancel(uint32(kind), ts, key)
	if r < 0 {
		return false, hostErr(abi.ImportTimerCancel, r)
	}
	return r == 1, nil
}

// StreamTime is the task's stream time as the current call sees it, in
// milliseconds since the Unix epoch, or NoTime. During process it already
// includes the record being processed. A record processed again after an
// abort sees the same stream time.
func StreamTime() (int64, error) { return now(abi.ClockStream) }

// WallTime is the host's wall clock for the current call, in milliseconds
// since the Unix epoch. Unlike everything else a plugin sees it is not
// reproducible: a record processed again sees the time of its new
// processing.
func WallTime() (int64, error) { return now(abi.ClockWall) }

func now(clock uint32) (int64, error) {
	t := hostTimeNow(clock)
	// Times are >= 0 and NoTime is -2^63; a small negative is -errno.
	if t < 0 && t != NoTime && t >= -1<<31 {
		return 0, hostErr(abi.ImportTimeNow, int32(t))
	}
	return t, nil
}

// Mark asks for one OnCommit call for key at the end of the current commit
// window, however often it is marked in the window, and reports whether
// the key is newly marked. It is how a plugin emits only the latest value
// of an aggregate per window. The host remembers the timestamp of the
// call that marked the key last (the record's, or the timer's) and hands
// it to OnCommit as Commit.Timestamp. Errors wrap abi.ErrnoLimit (too many
// keys marked in this window: emit now instead), abi.ErrnoTooLarge,
// abi.ErrnoPhase (during init and in OnCommit).
func Mark(key []byte) (bool, error) {
	r := hostCommitMark(key)
	if r < 0 {
		return false, hostErr(abi.ImportCommitMark, r)
	}
	return r == 1, nil
}

func hostErr(call string, r int32) error {
	return &sdk.HostError{Call: call, Errno: abi.Errno(-r)}
}

// Firing is a due timer.
type Firing struct {
	Kind Kind
	// Time is the timer's time; emits that leave their timestamp zero get
	// it.
	Time int64
	// Key is the timer's key (never nil).
	Key []byte
	// StreamTime and WallTime are the clocks as this call sees them (the
	// values StreamTime and WallTime return).
	StreamTime int64
	WallTime   int64
}

// Commit is a key marked in the commit window that is ending.
type Commit struct {
	// Key is the marked key (never nil).
	Key []byte
	// Timestamp is the timestamp of the call that marked the key last;
	// emits that leave their timestamp zero get it.
	Timestamp  int64
	StreamTime int64
	WallTime   int64
}

var (
	onTimer  func(*Firing) error
	onCommit func(*Commit) error
	firing   Firing
	commit   Commit
)

// Handle registers fn as the timer callback: the host calls it once per
// due timer, in order of time, kind (event time first) and key. It may
// emit, use state, set and cancel timers and Mark, as a record handler
// may; an error or a panic fails the firing, which the host treats like a
// failed record (the processor's on_error policy). Call it from an init
// function; a later call replaces the callback.
func Handle(fn func(f *Firing) error) { onTimer = fn }

// OnCommit registers fn as the commit callback: the host calls it at each
// commit point, before the commit, once per key marked (Mark) in the
// window, in key byte order. Its emits and state writes commit with the
// window. It may not Mark. A later call replaces the callback.
func OnCommit(fn func(c *Commit) error) { onCommit = fn }

// decode reads the trigger of an n-byte call from the input buffer.
func decode(n uint32, t *abi.Trigger) abi.Status {
	buf := guest.Input()
	if uint64(n) > uint64(len(buf)) {
		return guest.Fail("sdk/timer: trigger length beyond the input buffer")
	}
	return decodeBytes(buf[:n], t)
}

func decodeBytes(b []byte, t *abi.Trigger) abi.Status {
	if err := t.Decode(b); err != nil {
		return guest.Fail("sdk/timer: trigger: " + err.Error())
	}
	return abi.StatusOK
}

func init() { guest.Trigger = batchTrigger }

// batchTrigger is a trigger of a batch: the callback its kind names.
func batchTrigger(b []byte) abi.Status {
	var t abi.Trigger
	if st := decodeBytes(b, &t); st != abi.StatusOK {
		return st
	}
	if t.Kind == abi.TriggerCommit {
		return runCommit(&t)
	}
	return runTimer(&t)
}

// fire is the body of wasmstream_on_timer.
func fire(n uint32) abi.Status {
	var t abi.Trigger
	if st := decode(n, &t); st != abi.StatusOK {
		return st
	}
	return runTimer(&t)
}

func runTimer(t *abi.Trigger) abi.Status {
	if onTimer == nil {
		return guest.Fail("sdk/timer: a timer fired but no handler is registered: call timer.Handle from an init function")
	}
	if t.Kind != EventTime && t.Kind != ProcessingTime {
		return guest.Fail("sdk/timer: on_timer called with a " + t.Kind.String() + " trigger")
	}
	firing = Firing{Kind: t.Kind, Time: t.Timestamp, Key: t.Key, StreamTime: t.StreamTime, WallTime: t.WallTime}
	return guest.Run(t.Timestamp, func() error { return onTimer(&firing) })
}

// commitKey is the body of wasmstream_on_commit.
func commitKey(n uint32) abi.Status {
	var t abi.Trigger
	if st := decode(n, &t); st != abi.StatusOK {
		return st
	}
	return runCommit(&t)
}

func runCommit(t *abi.Trigger) abi.Status {
	if onCommit == nil {
		return guest.Fail("sdk/timer: a marked key reached its commit point but no handler is registered: call timer.OnCommit from an init function")
	}
	if t.Kind != abi.TriggerCommit {
		return guest.Fail("sdk/timer: on_commit called with a " + t.Kind.String() + " trigger")
	}
	commit = Commit{Key: t.Key, Timestamp: t.Timestamp, StreamTime: t.StreamTime, WallTime: t.WallTime}
	return guest.Run(t.Timestamp, func() error { return onCommit(&commit) })
}
