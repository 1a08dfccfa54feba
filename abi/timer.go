package abi

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Time: timers, the task's clocks and the commit-point hook (ABI.md section
// 8). Everything here is additive to version 1: a plugin that neither
// imports these functions nor exports the callbacks is a plain v1 plugin,
// and a host detects the callbacks by export.

// Exports of a plugin that uses time. Both are optional; the host calls
// one only when the plugin asked for it (a due timer, a marked key).
const (
	// ExportOnTimer is on_timer(len u32) -> status i32: a due timer. The
	// input buffer holds a Trigger of kind TimerEventTime or
	// TimerProcessingTime, len bytes long. Emits, state calls, timer calls
	// and commit_mark are allowed as in process.
	ExportOnTimer = "wasmstream_on_timer"
	// ExportOnCommit is on_commit(len u32) -> status i32: one call per key
	// marked with commit_mark in the commit window that is ending, before
	// its transaction commits. The input buffer holds a Trigger of kind
	// TriggerCommit. Emits, state calls and timer calls are allowed;
	// commit_mark is not (ErrnoPhase).
	ExportOnCommit = "wasmstream_on_commit"
)

// Imports in ImportModule for time. ts is an i64 (milliseconds since the
// Unix epoch); every other parameter is an i32 as in the rest of the ABI.
const (
	// ImportTimerSet is timer_set(kind u32, ts i64, key_ptr, key_len u32)
	// -> i32: 1 if the timer (kind, ts, key) is new, 0 if it was already
	// pending (a no-op), or -errno.
	ImportTimerSet = "timer_set"
	// ImportTimerCancel is timer_cancel(kind u32, ts i64, key_ptr, key_len
	// u32) -> i32: 1 if a pending timer was removed, 0 if there was none,
	// or -errno.
	ImportTimerCancel = "timer_cancel"
	// ImportTimeNow is time_now(clock u32) -> i64: ClockStream or
	// ClockWall as the host defines it for the current call, in
	// milliseconds since the Unix epoch; NoTime for a stream time the task
	// does not have yet; -errno (a small negative number) on error.
	ImportTimeNow = "time_now"
	// ImportCommitMark is commit_mark(key_ptr, key_len u32) -> i32: 1 if
	// the key is newly marked in this commit window, 0 if it was already
	// marked, or -errno. Each marked key gets one on_commit call at the
	// window's commit point.
	ImportCommitMark = "commit_mark"
)

// TimerKind is what a timer's time is measured against; also the kind of a
// Trigger.
type TimerKind uint32

const (
	// TimerEventTime fires when the task's stream time reaches its time.
	TimerEventTime TimerKind = 0
	// TimerProcessingTime fires when the host's wall clock reaches its
	// time.
	TimerProcessingTime TimerKind = 1
	// TriggerCommit is not a timer kind: it marks the Trigger of an
	// on_commit call. timer_set and timer_cancel refuse it (ErrnoInval).
	TriggerCommit TimerKind = 2
)

// String is "event", "processing" or "commit".
func (k TimerKind) String() string {
	switch k {
	case TimerEventTime:
		return "event"
	case TimerProcessingTime:
		return "processing"
	case TriggerCommit:
		return "commit"
	}
	return "kind(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// Clocks for ImportTimeNow.
const (
	// ClockStream is the task's stream time: the largest non-negative
	// record timestamp the task has seen, including the record being
	// processed.
	ClockStream uint32 = 0
	// ClockWall is the host's wall clock as sampled for the current call.
	ClockWall uint32 = 1
)

// NoTime is the stream time of a task that has not seen a record with a
// non-negative timestamp yet, as time_now returns it and as a Trigger
// carries it. It is below every time, so no event-time timer is due.
const NoTime int64 = math.MinInt64

// Limits of timers and commit marks. The Max* sizes are fixed by the ABI;
// the Default* counts are the host's defaults, which a processor's config
// may change (ABI.md section 8.6).
const (
	// MaxTimerKeySize is the largest timer or commit-mark key, in bytes
	// (the same as a state key: a timer is stored like one).
	MaxTimerKeySize = MaxKeySize
	// DefaultMaxTimers is how many timers one task may have pending;
	// timer_set of a new timer beyond it returns ErrnoLimit.
	DefaultMaxTimers = 1_000_000
	// DefaultMaxFiringsPerCommit is how many timers fire in one commit
	// window; the due timers left over fire in the next window, in order.
	DefaultMaxFiringsPerCommit = 10_000
	// DefaultMaxCommitMarks is how many distinct keys one commit window
	// may mark; commit_mark of a new key beyond it returns ErrnoLimit.
	DefaultMaxCommitMarks = 100_000
)

// Trigger is what an on_timer or on_commit call is about, in the plugin's
// input buffer.
//
// Layout (integers little-endian), TriggerHeaderSize fixed bytes then the
// key:
//
//	off size field
//	  0    8 timestamp    i64: timer: its time; commit: the timestamp of
//	                      the last call that marked the key
//	  8    8 stream time  i64: the task's stream time, or NoTime
//	 16    8 wall time    i64: the host's wall clock for this call
//	 24    4 kind         u32: TimerEventTime, TimerProcessingTime or
//	                      TriggerCommit
//	 28    4 key length   u32: at most MaxTimerKeySize
//	 32      key bytes
//
// A decoded Key aliases the buffer it was decoded from.
type Trigger struct {
	Timestamp  int64
	StreamTime int64
	WallTime   int64
	Kind       TimerKind
	Key        []byte // never nil after Decode; may be empty
}

// TriggerHeaderSize is the size of the fixed part of the Trigger layout.
const TriggerHeaderSize = 32

// EncodedSize is the number of bytes AppendEncode writes for t.
func (t *Trigger) EncodedSize() int { return TriggerHeaderSize + len(t.Key) }

// AppendEncode appends t's layout to dst and returns the extended slice.
func (t *Trigger) AppendEncode(dst []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, uint64(t.Timestamp))
	dst = le.AppendUint64(dst, uint64(t.StreamTime))
	dst = le.AppendUint64(dst, uint64(t.WallTime))
	dst = le.AppendUint32(dst, uint32(t.Kind))
	dst = le.AppendUint32(dst, uint32(len(t.Key)))
	return append(dst, t.Key...)
}

// EncodeTo writes t's layout into dst, which must hold EncodedSize bytes,
// and returns the number of bytes written. It does not allocate.
func (t *Trigger) EncodeTo(dst []byte) int {
	le := binary.LittleEndian
	le.PutUint64(dst[0:], uint64(t.Timestamp))
	le.PutUint64(dst[8:], uint64(t.StreamTime))
	le.PutUint64(dst[16:], uint64(t.WallTime))
	le.PutUint32(dst[24:], uint32(t.Kind))
	le.PutUint32(dst[28:], uint32(len(t.Key)))
	return TriggerHeaderSize + copy(dst[TriggerHeaderSize:], t.Key)
}

// Decode parses src into t. It fails with ErrMalformed for a layout whose
// lengths do not add up, an unknown kind or a key over MaxTimerKeySize.
func (t *Trigger) Decode(src []byte) error {
	if len(src) < TriggerHeaderSize {
		return ErrMalformed
	}
	le := binary.LittleEndian
	kind := TimerKind(le.Uint32(src[24:]))
	n := uint64(le.Uint32(src[28:]))
	if kind > TriggerCommit || n > MaxTimerKeySize || uint64(len(src)) != TriggerHeaderSize+n {
		return ErrMalformed
	}
	t.Timestamp = int64(le.Uint64(src[0:]))
	t.StreamTime = int64(le.Uint64(src[8:]))
	t.WallTime = int64(le.Uint64(src[16:]))
	t.Kind = kind
	t.Key = src[TriggerHeaderSize:len(src):len(src)]
	return nil
}

// CheckTimer is the argument check timer_set and timer_cancel make, in
// this order: kind (ErrnoInval unless TimerEventTime or
// TimerProcessingTime), ts (ErrnoInval if negative: record timestamps
// are never negative in Kafka), key (ErrnoTooLarge over MaxTimerKeySize).
// It returns 0 for valid arguments.
func CheckTimer(kind TimerKind, ts int64, keyLen int) Errno {
	switch {
	case kind != TimerEventTime && kind != TimerProcessingTime, ts < 0:
		return ErrnoInval
	case keyLen > MaxTimerKeySize:
		return ErrnoTooLarge
	}
	return 0
}

// TimerLess is the order in which due timers fire and in which the host
// lists them: by time, then kind (event-time first), then key bytes.
func TimerLess(aKind TimerKind, aTS int64, aKey []byte, bKind TimerKind, bTS int64, bKey []byte) bool {
	if aTS != bTS {
		return aTS < bTS
	}
	if aKind != bKind {
		return aKind < bKind
	}
	return string(aKey) < string(bKey)
}
