package sdktest

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/fakeabi"
)

// The fake host's side of ABI.md section 8 (package sdk/timer).
//
// Clocks: the stream time moves with the records the test processes (the
// largest non-negative timestamp, including the record being processed, as
// on the host); the wall clock moves only when the test says so
// (SetWallTime, AdvanceWallTime) and starts at DefaultWallTime.
//
// Checks: after every record the due event-time timers fire; at a commit
// point (Commit, AdvanceWallTime, or every n records with CommitEvery) the
// due timers of both kinds fire, then the commit callback runs once per
// marked key in key order. Processing-time timers never fire between
// records here, which the host is allowed to do but not required to: a
// plugin whose tests pass here does not depend on it. The firing order is
// abi.TimerLess; a timer set by a callback that is already due waits for
// the next check; at most the firings limit fire per commit window and the
// rest wait for the next one, in order.
//
// Each callback is one call, like a record: a failed one's emits, state
// writes, timer changes and marks are discarded, and, as under the host's
// "skip" policy, a timer whose callback failed stays removed. A test sees
// the failure in Result.Callbacks (and Result.Failed).
//
// The fake host commits every call as it ends, so there are no aborted
// windows to model: a commit window here is the span between two commit
// points, which is what the commit marks and the firings limit count.

// DefaultWallTime is the fake wall clock at start, in milliseconds since the
// Unix epoch: 2024-01-01T00:00:00Z.
const DefaultWallTime int64 = 1704067200000

// WallTime sets the fake wall clock at start, in milliseconds since the
// Unix epoch (default DefaultWallTime).
func WallTime(ms int64) Option {
	return func(o *options) { o.time.wall, o.time.wallSet = ms, true }
}

// StreamTime starts the task with a stream time, as a task restored from a
// changelog would (default: none, abi.NoTime).
func StreamTime(ms int64) Option {
	return func(o *options) { o.time.stream, o.time.streamSet = ms, true }
}

// TimerLimits sets the time limits of ABI.md section 8.6: pending timers
// per task, timer firings per commit window, marked keys per commit window.
// Zero keeps a limit's default (abi.DefaultMaxTimers and friends).
func TimerLimits(timers, firingsPerCommit, commitMarks int) Option {
	return func(o *options) {
		o.time.maxTimers, o.time.maxFirings, o.time.maxMarks = timers, firingsPerCommit, commitMarks
	}
}

// CommitEvery runs a commit point after every n records, as the host does
// at its commit interval; its callbacks join that record's Result. Default
// 0: commit points run only when the test calls Commit or AdvanceWallTime.
func CommitEvery(n int) Option {
	return func(o *options) { o.time.commitEvery = n }
}

// StoreTTL gives the store called name a time to live of ttl on clock
// (abi.ClockStream or abi.ClockWall), as a TTL declared in the
// processor's config does (ABI.md section 8.7): each write stamps the
// entry with the clock at that call (a stream time of abi.NoTime stamps
// 0); the plugin stops reading an entry once the clock is at its stamp
// plus ttl, and commit points delete it.
func StoreTTL(name string, ttl time.Duration, clock uint32) Option {
	return func(o *options) {
		if o.time.ttls == nil {
			o.time.ttls = map[string]storeTTL{}
		}
		o.time.ttls[name] = storeTTL{ttl.Milliseconds(), clock}
	}
}

type storeTTL struct {
	ms    int64
	clock uint32
}

type timeOptions struct {
	ttls                            map[string]storeTTL
	wall, stream                    int64
	wallSet, streamSet              bool
	maxTimers, maxFirings, maxMarks int
	commitEvery                     int
}

// Timer is a pending timer.
type Timer struct {
	Kind abi.TimerKind
	Time int64
	Key  []byte
}

// Callback is one timer or commit callback a step ran.
type Callback struct {
	// Kind is abi.TimerEventTime, abi.TimerProcessingTime or
	// abi.TriggerCommit.
	Kind abi.TimerKind
	// Time is the timer's time, or for a commit the timestamp of the call
	// that marked the key last.
	Time int64
	Key  []byte
	// Err is nil if the callback succeeded, else its error (as Result.Err).
	Err error
	// Emitted is what the callback emitted; empty if it failed.
	Emitted []Emitted
}

type timerID struct {
	kind abi.TimerKind
	ts   int64
	key  string
}

type timeState struct {
	opts   timeOptions
	stream int64
	wall   int64

	timers map[timerID]bool // committed pending timers
	// staged holds the current call's timer changes: true set, false
	// cancelled; count is the number pending with them applied.
	staged map[timerID]bool
	count  int

	marks       map[string]int64 // keys marked in this window -> timestamp
	stagedMarks map[string]int64
	callTS      int64 // timestamp a mark made now records

	fired   int // timers fired in this commit window
	records int // records since the last commit point
}

func (h *Host) initTime(o timeOptions) {
	if o.maxTimers <= 0 {
		o.maxTimers = abi.DefaultMaxTimers
	}
	if o.maxFirings <= 0 {
		o.maxFirings = abi.DefaultMaxFiringsPerCommit
	}
	if o.maxMarks <= 0 {
		o.maxMarks = abi.DefaultMaxCommitMarks
	}
	h.time = timeState{opts: o, stream: abi.NoTime, wall: DefaultWallTime,
		timers: map[timerID]bool{}, marks: map[string]int64{}}
	if o.wallSet {
		h.time.wall = o.wall
	}
	if o.streamSet {
		h.time.stream = o.stream
	}
}

// StreamTime is the task's stream time: the largest non-negative record
// timestamp processed so far, or abi.NoTime.
func (h *Host) StreamTime() int64 { return h.time.stream }

// WallTime is the fake wall clock, in milliseconds since the Unix epoch.
func (h *Host) WallTime() int64 { return h.time.wall }

// SetWallTime sets the wall clock without running a check: due
// processing-time timers fire at the next commit point. The clock may not
// go back (the host's does not); that fails the test.
func (h *Host) SetWallTime(ms int64) {
	h.t.Helper()
	if ms < h.time.wall {
		h.t.Fatalf("sdktest: SetWallTime(%d) would move the wall clock back from %d", ms, h.time.wall)
	}
	h.time.wall = ms
}

// AdvanceWallTime moves the wall clock forward by d and runs a commit
// point, as the host does at least once per commit interval, so that the
// processing-time timers due by then fire.
func (h *Host) AdvanceWallTime(d time.Duration) Result {
	h.t.Helper()
	h.SetWallTime(h.time.wall + d.Milliseconds())
	return h.Commit()
}

// Commit runs a commit point: the due timers of both kinds fire (up to the
// firings limit of the window), then the commit callback runs for every
// key marked in the window, in key byte order; then a new window starts.
func (h *Host) Commit() Result {
	h.t.Helper()
	h.usable()
	var res Result
	h.fireDue(&res, true)
	marks := h.time.marks
	h.time.marks = map[string]int64{}
	for _, k := range slicesSortedKeys(marks) {
		h.callback(&res, abi.TriggerCommit, marks[k], []byte(k))
	}
	h.time.fired, h.time.records = 0, 0
	for _, s := range h.stores {
		s.expire()
	}
	return res
}

// storeClock is the clock a store's TTL is measured on.
func (h *Host) storeClock(clock uint32) func() int64 {
	if clock == abi.ClockWall {
		return func() int64 { return h.time.wall }
	}
	return func() int64 { return max(h.time.stream, 0) }
}

// MustCommit is Commit that fails the test if a callback fails.
func (h *Host) MustCommit() Result {
	h.t.Helper()
	res := h.Commit()
	if err := res.Failed(); err != nil {
		h.t.Fatalf("sdktest: commit point: %v", err)
	}
	return res
}

// Timers returns the pending timers in firing order.
func (h *Host) Timers() []Timer {
	var ts []Timer
	for id := range h.time.timers {
		ts = append(ts, Timer{Kind: id.kind, Time: id.ts, Key: []byte(id.key)})
	}
	slices.SortFunc(ts, func(a, b Timer) int { return cmpTimer(a.Kind, a.Time, a.Key, b.Kind, b.Time, b.Key) })
	return ts
}

// Marked returns the keys marked in the current commit window, in the
// order their commit callbacks will run.
func (h *Host) Marked() []string { return slicesSortedKeys(h.time.marks) }

func cmpTimer(ak abi.TimerKind, at int64, aKey []byte, bk abi.TimerKind, bt int64, bKey []byte) int {
	switch {
	case abi.TimerLess(ak, at, aKey, bk, bt, bKey):
		return -1
	case abi.TimerLess(bk, bt, bKey, ak, at, aKey):
		return 1
	}
	return 0
}

func slicesSortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// advanceStreamTime moves the stream time to the timestamp of the encoded
// record about to be processed, and returns that timestamp.
func (h *Host) advanceStreamTime(encoded []byte) int64 {
	if len(encoded) < 8 {
		return 0
	}
	ts := int64(binary.LittleEndian.Uint64(encoded))
	if ts >= 0 && ts > h.time.stream {
		h.time.stream = ts
	}
	return ts
}

// afterRecord is the check after a record, and the commit point if one is
// due (CommitEvery).
func (h *Host) afterRecord(res *Result) {
	h.fireDue(res, false)
	h.time.records++
	if n := h.time.opts.commitEvery; n > 0 && h.time.records >= n {
		c := h.Commit()
		res.add(c.All)
		res.Callbacks = append(res.Callbacks, c.Callbacks...)
	}
}

// fireDue is a check: it fires the timers due at its start: event-time ones always,
// processing-time ones at a commit point.
func (h *Host) fireDue(res *Result, commitPoint bool) {
	var due []Timer
	for _, t := range h.Timers() {
		if (t.Kind == abi.TimerEventTime && t.Time <= h.time.stream) ||
			(commitPoint && t.Kind == abi.TimerProcessingTime && t.Time <= h.time.wall) {
			due = append(due, t)
		}
	}
	for _, t := range due {
		if h.time.fired >= h.time.opts.maxFirings {
			return // the rest fire in the next window
		}
		id := timerID{t.Kind, t.Time, string(t.Key)}
		if !h.time.timers[id] {
			continue // cancelled by an earlier callback of this check
		}
		h.time.fired++
		delete(h.time.timers, id) // removed whatever the callback does
		h.callback(res, t.Kind, t.Time, t.Key)
	}
}

// callback runs one on_timer or on_commit call and adds it to res.
func (h *Host) callback(res *Result, kind abi.TimerKind, ts int64, key []byte) {
	h.t.Helper()
	g := fakeabi.TimeEntry()
	fn, phase := g.OnTimer, phaseTimer
	if kind == abi.TriggerCommit {
		fn, phase = g.OnCommit, phaseCommit
	}
	if fn == nil {
		h.t.Fatalf("sdktest: a %s callback is due but the plugin does not link sdk/timer", kind)
	}
	tr := abi.Trigger{Timestamp: ts, StreamTime: h.time.stream, WallTime: h.time.wall, Kind: kind, Key: key}
	enc := tr.AppendEncode(nil)
	cb := Callback{Kind: kind, Time: ts, Key: key}
	if len(enc) > len(h.inBuf) {
		h.inBuf = h.guest.Input(uint32(len(enc)))
	}
	if len(enc) > len(h.inBuf) {
		cb.Err = errors.New("sdktest: the plugin's wasmstream_input gave " + strconv.Itoa(len(h.inBuf)) +
			" bytes for a " + strconv.Itoa(len(enc)) + "-byte trigger")
		res.Callbacks = append(res.Callbacks, cb)
		return
	}
	copy(h.inBuf, enc)
	h.beginCall(phase)
	h.time.callTS = ts
	st := abi.Status(fn(uint32(len(enc))))
	r := h.finish(st, nil)
	cb.Err, cb.Emitted = r.Err, r.All
	res.add(r.All)
	res.Callbacks = append(res.Callbacks, cb)
}

// add appends emits to the step's result.
func (r *Result) add(emitted []Emitted) {
	if len(emitted) == 0 {
		return
	}
	if r.Emitted == nil {
		r.Emitted = map[string][]Emitted{}
	}
	r.All = append(r.All, emitted...)
	for _, e := range emitted {
		r.Emitted[e.Output] = append(r.Emitted[e.Output], e)
	}
}

func (h *Host) beginTimeCall() {
	h.time.staged = nil
	h.time.stagedMarks = nil
	h.time.count = len(h.time.timers)
}

// endTimeCall commits the call's timer changes and marks, or discards
// them.
func (h *Host) endTimeCall(ok bool) {
	if ok {
		for id, set := range h.time.staged {
			if set {
				h.time.timers[id] = true
			} else {
				delete(h.time.timers, id)
			}
		}
		for k, ts := range h.time.stagedMarks {
			h.time.marks[k] = ts
		}
	}
	h.time.staged, h.time.stagedMarks = nil, nil
	h.time.count = len(h.time.timers)
}

// pending reports whether timer id is pending as the current call sees it.
func (t *timeState) pending(id timerID) bool {
	if set, ok := t.staged[id]; ok {
		return set
	}
	return t.timers[id]
}

func (t *timeState) stage(id timerID, set bool) {
	if t.staged == nil {
		t.staged = map[timerID]bool{}
	}
	t.staged[id] = set
}

// TimerSet implements the timer_set import.
func (h *calls) TimerSet(kind uint32, ts int64, key []byte) int32 {
	if r := h.check(abi.ImportTimerSet, true); r != 0 {
		return r
	}
	if h.phase == phaseMigrate {
		return abi.ErrnoPhase.Result()
	}
	if e := abi.CheckTimer(abi.TimerKind(kind), ts, len(key)); e != 0 {
		return e.Result()
	}
	t := &h.time
	id := timerID{abi.TimerKind(kind), ts, string(key)}
	if t.pending(id) {
		return 0
	}
	if t.count >= t.opts.maxTimers {
		return abi.ErrnoLimit.Result()
	}
	t.stage(id, true)
	t.count++
	return 1
}

// TimerCancel implements the timer_cancel import.
func (h *calls) TimerCancel(kind uint32, ts int64, key []byte) int32 {
	if r := h.check(abi.ImportTimerCancel, true); r != 0 {
		return r
	}
	if h.phase == phaseMigrate {
		return abi.ErrnoPhase.Result()
	}
	if e := abi.CheckTimer(abi.TimerKind(kind), ts, len(key)); e != 0 {
		return e.Result()
	}
	t := &h.time
	id := timerID{abi.TimerKind(kind), ts, string(key)}
	if !t.pending(id) {
		return 0
	}
	t.stage(id, false)
	t.count--
	return 1
}

// TimeNow implements the time_now import.
func (h *calls) TimeNow(clock uint32) int64 {
	if r := h.check(abi.ImportTimeNow, true); r != 0 {
		return int64(r)
	}
	switch clock {
	case abi.ClockStream:
		return h.time.stream
	case abi.ClockWall:
		return h.time.wall
	}
	return int64(abi.ErrnoInval.Result())
}

// markedKeys is the number of distinct keys marked in the window, the
// current call's included.
func (t *timeState) markedKeys() int {
	n := len(t.marks)
	for k := range t.stagedMarks {
		if _, ok := t.marks[k]; !ok {
			n++
		}
	}
	return n
}

// CommitMark implements the commit_mark import.
func (h *calls) CommitMark(key []byte) int32 {
	if r := h.check(abi.ImportCommitMark, true); r != 0 {
		return r
	}
	if h.phase == phaseCommit || h.phase == phaseMigrate {
		return abi.ErrnoPhase.Result()
	}
	if len(key) > abi.MaxTimerKeySize {
		return abi.ErrnoTooLarge.Result()
	}
	t := &h.time
	k := string(key)
	_, committed := t.marks[k]
	_, staged := t.stagedMarks[k]
	if !committed && !staged && t.markedKeys() >= t.opts.maxMarks {
		return abi.ErrnoLimit.Result()
	}
	if t.stagedMarks == nil {
		t.stagedMarks = map[string]int64{}
	}
	t.stagedMarks[k] = t.callTS // the last marking call's timestamp wins
	if committed || staged {
		return 0
	}
	return 1
}
