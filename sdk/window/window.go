// Package window aggregates records per key over time windows, the way
// Kafka Streams' windowed aggregations do: tumbling, hopping and session
// windows, a grace period for out-of-order records, results emitted on
// every update, once per commit window, or once when the window closes
// (Kafka Streams' suppress(untilWindowCloses)), and late records counted
// and optionally sent to an output of their own.
//
// It is built only on state (sdk.StoreHandle) and event-time timers
// (sdk/timer), so it works on any host that implements abi/ABI.md section
// 8, and its state and timers are committed, restored and moved like the
// rest of the task's.
//
//	var counts *window.Windows
//
//	func setup() (err error) {
//		counts, err = window.New(window.Spec{
//			Name: "c", Store: sdk.Store("windows"),
//			Size: 60_000, Grace: 5_000, Emit: window.EmitFinal,
//			Aggregate: window.Count, Result: emitCount,
//		})
//		return err
//	}
//
//	func init() {
//		sdk.OnInit(setup)
//		sdk.Handle(func(r *sdk.Record) error { return counts.Add(r) })
//		timer.Handle(func(f *timer.Firing) error { _, err := counts.OnTimer(f); return err })
//	}
//
// # Time
//
// All times are milliseconds since the Unix epoch, and windows follow
// event time: a record belongs to the windows of its timestamp, and a
// window closes when the task's stream time (the largest record timestamp
// seen) reaches its end plus the grace period. A window [Start, End)
// accepts records while the stream time is below End+Grace; a record that
// comes later for it is late. The close is an event-time timer, so a
// window of a partition that goes quiet closes when records of any key
// move the stream time on; a plugin that must close windows on a quiet
// partition adds a processing-time timer of its own.
//
// # State
//
// Everything lives in Spec.Store under keys that start with Spec.Name and
// a zero byte, so several Windows (and the plugin's own keys) can share a
// store; timer and commit-mark keys start the same way, which is how
// OnTimer and OnCommit recognize theirs. A closed window's state is
// deleted. A key of a window is at most abi.MaxKeySize bytes: the record
// key, the name and 14 bytes; a record with a longer key fails.
package window

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/internal/stateful"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

// EmitMode says when a window's result is emitted.
type EmitMode uint8

const (
	// EmitFinal emits each window once, when it closes (stream time past
	// its end plus the grace period), with its final aggregate: Kafka
	// Streams' suppress(untilWindowCloses). Nothing is emitted before.
	EmitFinal EmitMode = iota
	// EmitUpdate emits the window's aggregate after every record that
	// changes it. Nothing more is emitted when it closes.
	EmitUpdate
	// EmitOnCommit emits the latest aggregate of each window that changed,
	// once per commit window (timer.Mark), and at its close if it changed
	// since: the effect of Kafka Streams' record cache. When the host's
	// commit-mark limit is reached the update is emitted at once instead.
	EmitOnCommit
)

// Spec describes a set of windows. Exactly one of Size (tumbling or
// hopping windows) and Gap (session windows) is set.
type Spec struct {
	// Name prefixes every state, timer and commit-mark key of these
	// windows. Required; no zero byte; short (it is in every key).
	Name string
	// Store holds the windows' state. Required.
	Store *sdk.StoreHandle
	// Size is the length of a tumbling or hopping window, in ms.
	Size int64
	// Advance is how far apart hopping windows start, in ms: 0 < Advance
	// <= Size. Zero means Size: tumbling windows. Windows start at
	// multiples of Advance since the epoch.
	Advance int64
	// Gap makes session windows: a key's records that are at most Gap ms
	// apart belong to one session, which grows and merges as records come.
	Gap int64
	// Grace is how long after a window's end it still accepts records
	// (out of order), in ms of stream time. Default 0.
	Grace int64
	// Emit chooses when results are emitted. Default EmitFinal.
	Emit EmitMode
	// Aggregate folds a record into a window's aggregate; acc is nil for a
	// new window. It may modify acc and return it. Required.
	Aggregate func(acc []byte, r *sdk.Record) ([]byte, error)
	// Merge combines the aggregates of two sessions that a record joins,
	// the earlier first. Required for session windows.
	Merge func(a, b []byte) ([]byte, error)
	// Result receives every result to emit. Required.
	Result func(res *Result) error
	// LateOutput, if set, receives every late record as it came (key,
	// value, headers, timestamp) with the header LateHeader added.
	LateOutput *sdk.OutputHandle
}

// LateHeader is added to a late record sent to Spec.LateOutput; its value
// is the Spec's Name.
const LateHeader = "wasmstream-window-late"

// Window is the time span [Start, End) of a window, in ms. A session's
// Start is its first record's timestamp and its End one past its last.
type Window struct {
	Start, End int64
}

// Result is one window result.
type Result struct {
	// Key is the record key the window belongs to.
	Key []byte
	// Window is the window's span.
	Window Window
	// Agg is the aggregate; nil retracts a session that a record merged
	// into another (EmitUpdate and EmitOnCommit, once it was emitted).
	Agg []byte
	// Timestamp is the largest record timestamp in the window, the one to
	// give the emitted record.
	Timestamp int64
	// Final is true when the window has closed: no other result for it
	// follows.
	Final bool
}

// Windows is a set of windows per key; create it with New (once, at init)
// and call Add for each record and OnTimer and OnCommit from the plugin's
// timer callbacks.
type Windows struct {
	s      Spec
	prefix []byte // Name + 0x00
	late   []byte // the state key of the late-record count
	keyBuf []byte
	valBuf []byte
}

// Kinds of state key, after the prefix.
const (
	tagWindow  = 'w' // a tumbling or hopping window
	tagSession = 's' // a session
	tagCount   = 'c' // a counter
)

// Flags of a stored window.
const (
	flagDirty   = 1 << 0 // changed since its result was last emitted (EmitOnCommit)
	flagEmitted = 1 << 1 // a result was emitted (EmitOnCommit; for retractions)
)

// New checks spec and returns the windows it describes.
func New(spec Spec) (*Windows, error) {
	bad := func(msg string) (*Windows, error) {
		return nil, errors.New("window: " + strconv.Quote(spec.Name) + ": " + msg)
	}
	switch {
	case spec.Name == "":
		return bad("Name is required")
	case stateful.ContainsZero(spec.Name):
		return bad("Name may not contain a zero byte")
	case spec.Store == nil:
		return bad("Store is required")
	case spec.Aggregate == nil:
		return bad("Aggregate is required")
	case spec.Result == nil:
		return bad("Result is required")
	case spec.Grace < 0:
		return bad("Grace must not be negative")
	case spec.Emit > EmitOnCommit:
		return bad("unknown Emit mode " + strconv.Itoa(int(spec.Emit)))
	case (spec.Size > 0) == (spec.Gap > 0):
		return bad("set exactly one of Size (tumbling, hopping) and Gap (sessions), positive")
	case spec.Size < 0 || spec.Gap < 0:
		return bad("Size and Gap must not be negative")
	case spec.Gap > 0 && spec.Advance != 0:
		return bad("Advance is for hopping windows, not sessions")
	case spec.Gap > 0 && spec.Merge == nil:
		return bad("Merge is required for session windows")
	case spec.Advance < 0 || spec.Advance > spec.Size:
		return bad("Advance must be in (0, Size]")
	}
	if spec.Size > 0 && spec.Advance == 0 {
		spec.Advance = spec.Size
	}
	w := &Windows{s: spec, prefix: append([]byte(spec.Name), 0)}
	w.late = append(append([]byte{}, w.prefix...), tagCount, 'l', 'a', 't', 'e')
	return w, nil
}

// Add adds a record to its key's windows and emits what the mode says.
// A record whose windows have all closed is late: it is counted
// (LateCount) and sent to LateOutput if there is one, and changes nothing
// else. A record without a timestamp (negative) has no window and is
// late too. A null key is the empty key.
func (w *Windows) Add(r *sdk.Record) error {
	if r.Timestamp < 0 {
		return w.lateRecord(r)
	}
	if r.Key == nil { // results carry the empty key, as OnTimer's do
		rec := *r
		rec.Key = []byte{}
		r = &rec
	}
	now, err := timer.StreamTime()
	if err != nil {
		return err
	}
	if w.s.Gap > 0 {
		return w.addSession(r, now)
	}
	ts, size, adv := r.Timestamp, w.s.Size, w.s.Advance
	applied := false
	// The windows of ts start at multiples of adv in (ts-size, ts], and
	// not before 0, as Kafka Streams' TimeWindows.windowsFor.
	first := max(0, ts-size+adv) / adv * adv
	for start := first; start <= ts; start += adv {
		end := start + size
		if end+w.s.Grace <= now {
			continue // closed: the record is late for this one
		}
		applied = true
		if err := w.addToWindow(r, start, end); err != nil {
			return err
		}
	}
	if !applied {
		return w.lateRecord(r)
	}
	return nil
}

// addToWindow folds r into the tumbling or hopping window [start, end).
func (w *Windows) addToWindow(r *sdk.Record, start, end int64) error {
	key, err := w.stateKey(tagWindow, r.Key, start)
	if err != nil {
		return err
	}
	v, ok, err := w.s.Store.Get(key)
	if err != nil {
		return err
	}
	st := stored{end: end, maxTS: r.Timestamp}
	if ok {
		if st, err = decodeStored(v); err != nil {
			return w.corrupt(key, err)
		}
		st.maxTS = max(st.maxTS, r.Timestamp)
	} else if _, err := timer.Set(timer.EventTime, end+w.s.Grace, key); err != nil {
		return err
	}
	if st.agg, err = w.s.Aggregate(st.agg, r); err != nil {
		return err
	}
	return w.updated(key, r.Key, start, &st)
}

// updated stores a window that a record changed and emits per the mode.
func (w *Windows) updated(key, recKey []byte, start int64, st *stored) error {
	switch w.s.Emit {
	case EmitUpdate:
		if err := w.s.Result(&Result{Key: recKey, Window: Window{start, st.end}, Agg: st.agg, Timestamp: st.maxTS}); err != nil {
			return err
		}
	case EmitOnCommit:
		st.flags |= flagDirty
		if _, err := timer.Mark(key); errors.Is(err, abi.ErrnoLimit) {
			// Too many keys marked in this window: emit now instead.
			if err := w.s.Result(&Result{Key: recKey, Window: Window{start, st.end}, Agg: st.agg, Timestamp: st.maxTS}); err != nil {
				return err
			}
			st.flags = st.flags&^flagDirty | flagEmitted
		} else if err != nil {
			return err
		}
	}
	return w.put(key, st)
}

// addSession adds r to its key's sessions: it joins every session it is
// within Gap of, merging them.
func (w *Windows) addSession(r *sdk.Record, now int64) error {
	ts, gap := r.Timestamp, w.s.Gap
	prefix, err := w.stateKey(tagSession, r.Key, 0)
	if err != nil {
		return err
	}
	prefix = prefix[:len(prefix)-8]
	type old struct {
		key   []byte
		start int64
		st    stored
	}
	var joined []old
	it, err := w.s.Store.ScanPrefix(prefix)
	if err != nil {
		return err
	}
	for it.Next() {
		start := stateful.FromSortable(it.Key()[len(prefix):])
		st, err := decodeStored(it.Value())
		if err != nil {
			it.Close()
			return w.corrupt(it.Key(), err)
		}
		// The session [start, end) takes records in [start-gap, end-1+gap].
		if ts >= start-gap && ts <= st.end-1+gap {
			st.agg = append([]byte(nil), st.agg...) // the iterator's buffer is reused
			joined = append(joined, old{append([]byte(nil), it.Key()...), start, st})
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	start, end, maxTS := ts, ts+1, ts
	for _, o := range joined {
		start, end, maxTS = min(start, o.start), max(end, o.st.end), max(maxTS, o.st.maxTS)
	}
	if end+gap+w.s.Grace <= now {
		return w.lateRecord(r) // even merged, the session is closed
	}
	var agg []byte
	var flags byte
	for i, o := range joined {
		if i == 0 {
			agg = o.st.agg
		} else if agg, err = w.s.Merge(agg, o.st.agg); err != nil {
			return err
		}
		if o.start == start {
			flags = o.st.flags & flagEmitted // the same key keeps its history
		}
	}
	if agg, err = w.s.Aggregate(agg, r); err != nil {
		return err
	}
	key, err := w.stateKey(tagSession, r.Key, start)
	if err != nil {
		return err
	}
	for _, o := range joined {
		if _, err := timer.Cancel(timer.EventTime, o.st.end+gap+w.s.Grace, o.key); err != nil {
			return err
		}
		if o.start == start {
			continue // the same key: overwritten below
		}
		if err := w.s.Store.Delete(o.key); err != nil {
			return err
		}
		if w.s.Emit == EmitUpdate || (w.s.Emit == EmitOnCommit && o.st.flags&flagEmitted != 0) {
			if err := w.s.Result(&Result{Key: r.Key, Window: Window{o.start, o.st.end}, Timestamp: o.st.maxTS}); err != nil {
				return err
			}
		}
	}
	if _, err := timer.Set(timer.EventTime, end+gap+w.s.Grace, key); err != nil {
		return err
	}
	st := stored{flags: flags, end: end, maxTS: maxTS, agg: agg}
	return w.updated(key, r.Key, start, &st)
}

// OnTimer handles the timers of these windows: it closes the window the
// timer is for, emitting its final result per the mode, and deletes its
// state. It reports false, doing nothing, for a timer that is not one of
// these windows' (another Windows', or the plugin's own).
func (w *Windows) OnTimer(f *timer.Firing) (bool, error) {
	tag, recKey, start, ok := w.parseKey(f.Key)
	if !ok || f.Kind != timer.EventTime {
		return false, nil
	}
	v, found, err := w.s.Store.Get(f.Key)
	if err != nil || !found {
		return true, err // nothing left to close
	}
	st, err := decodeStored(v)
	if err != nil {
		return true, w.corrupt(f.Key, err)
	}
	closeAt := st.end + w.s.Grace
	if tag == tagSession {
		closeAt += w.s.Gap
	}
	if closeAt != f.Time {
		return true, nil // a timer of an earlier extent of the session
	}
	if w.s.Emit == EmitFinal || (w.s.Emit == EmitOnCommit && st.flags&flagDirty != 0) {
		res := Result{Key: recKey, Window: Window{start, st.end}, Agg: st.agg, Timestamp: st.maxTS, Final: true}
		if err := w.s.Result(&res); err != nil {
			return true, err
		}
	}
	return true, w.s.Store.Delete(f.Key)
}

// OnCommit handles the commit marks of these windows (EmitOnCommit): it
// emits the latest aggregate of a window that changed in the commit
// window. It reports false for a key that is not one of these windows'.
func (w *Windows) OnCommit(c *timer.Commit) (bool, error) {
	_, recKey, start, ok := w.parseKey(c.Key)
	if !ok {
		return false, nil
	}
	v, found, err := w.s.Store.Get(c.Key)
	if err != nil || !found {
		return true, err // closed (and emitted) or merged away since
	}
	st, err := decodeStored(v)
	if err != nil {
		return true, w.corrupt(c.Key, err)
	}
	if st.flags&flagDirty == 0 {
		return true, nil
	}
	res := Result{Key: recKey, Window: Window{start, st.end}, Agg: st.agg, Timestamp: st.maxTS}
	if err := w.s.Result(&res); err != nil {
		return true, err
	}
	st.flags = st.flags&^flagDirty | flagEmitted
	return true, w.put(c.Key, &st)
}

// LateCount is the number of late records these windows have seen in this
// task (kept in the store, so it survives restarts and moves).
func (w *Windows) LateCount() (uint64, error) {
	v, ok, err := w.s.Store.Get(w.late)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, w.corrupt(w.late, errors.New("late count is not 8 bytes"))
	}
	return binary.BigEndian.Uint64(v), nil
}

func (w *Windows) lateRecord(r *sdk.Record) error {
	n, err := w.LateCount()
	if err != nil {
		return err
	}
	return stateful.Late(w.s.Store, w.late, n, w.s.LateOutput, LateHeader, w.s.Name, r)
}

// stateKey is prefix, tag, u32 key length, key, start (sortable): the
// state key of a window, and its timer and commit-mark key.
func (w *Windows) stateKey(tag byte, recKey []byte, start int64) ([]byte, error) {
	n := len(w.prefix) + 1 + 4 + len(recKey) + 8
	if n > abi.MaxKeySize {
		return nil, errors.New("window: " + strconv.Quote(w.s.Name) + ": a record key of " + strconv.Itoa(len(recKey)) +
			" bytes makes a window key over " + strconv.Itoa(abi.MaxKeySize) + " bytes")
	}
	k := stateful.AppendKey(w.keyBuf[:0], w.prefix, tag, recKey, start)
	w.keyBuf = k
	return append([]byte(nil), k...), nil
}

// parseKey splits a key made by stateKey; ok is false for any other key.
func (w *Windows) parseKey(k []byte) (tag byte, recKey []byte, start int64, ok bool) {
	tag, recKey, start, ok = stateful.ParseKey(k, w.prefix, 1)
	if !ok || (tag != tagWindow && tag != tagSession) {
		return 0, nil, 0, false
	}
	return tag, recKey, start, true
}

// stored is a window's value: flags u8, end i64, largest timestamp i64,
// then the aggregate.
type stored struct {
	flags byte
	end   int64
	maxTS int64
	agg   []byte
}

const storedHeader = 17

func decodeStored(v []byte) (stored, error) {
	if len(v) < storedHeader {
		return stored{}, errors.New("window value of " + strconv.Itoa(len(v)) + " bytes")
	}
	return stored{flags: v[0], end: int64(binary.BigEndian.Uint64(v[1:])),
		maxTS: int64(binary.BigEndian.Uint64(v[9:])), agg: v[storedHeader:]}, nil
}

func (w *Windows) put(key []byte, st *stored) error {
	v := append(w.valBuf[:0], st.flags)
	v = binary.BigEndian.AppendUint64(v, uint64(st.end))
	v = binary.BigEndian.AppendUint64(v, uint64(st.maxTS))
	v = append(v, st.agg...)
	w.valBuf = v
	return w.s.Store.Put(key, v)
}

func (w *Windows) corrupt(key []byte, err error) error {
	return errors.New("window: " + strconv.Quote(w.s.Name) + ": store " + strconv.Quote(w.s.Store.Name()) +
		" key " + strconv.Quote(string(key)) + ": " + err.Error())
}

// Count is an Aggregate that counts records: the aggregate is an 8-byte
// big-endian count.
func Count(acc []byte, _ *sdk.Record) ([]byte, error) {
	n, err := CountOf(acc)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(acc[:0], n+1), nil
}

// MergeCounts is the Merge of Count: the sum.
func MergeCounts(a, b []byte) ([]byte, error) {
	x, err := CountOf(a)
	if err != nil {
		return nil, err
	}
	y, err := CountOf(b)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(a[:0], x+y), nil
}

// CountOf decodes a Count aggregate; nil is 0.
func CountOf(agg []byte) (uint64, error) {
	switch len(agg) {
	case 0:
		if agg == nil {
			return 0, nil
		}
	case 8:
		return binary.BigEndian.Uint64(agg), nil
	}
	return 0, errors.New("window: a count aggregate of " + strconv.Itoa(len(agg)) + " bytes, want 8")
}
