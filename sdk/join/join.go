// Package join joins two streams of one task by key within a time window,
// the way Kafka Streams' KStream#join, #leftJoin and #outerJoin with
// JoinWindows do: inner, left and outer joins, a grace period for
// out-of-order records, and late records counted and optionally sent to an
// output of their own.
//
// Both streams are inputs of one processor, co-partitioned (the host gives
// one task partition p of every input), so a key's records of both sides
// meet in one task. Spec.Left and Spec.Right name the sides by their input
// index (sdk.Record.Input).
//
//	var clicks *join.Join
//
//	func setup() (err error) {
//		clicks, err = join.New(join.Spec{
//			Name: "j", Store: sdk.Store("join"),
//			Left: 0, Right: 1, // impressions, clicks
//			Before: 0, After: 600_000, Grace: 60_000, Kind: join.Left,
//			Result: emitJoined,
//		})
//		return err
//	}
//
//	func init() {
//		sdk.OnInit(setup)
//		sdk.Handle(func(r *sdk.Record) error { return clicks.Add(r) })
//		timer.Handle(func(f *timer.Firing) error { _, err := clicks.OnTimer(f); return err })
//	}
//
// # Semantics
//
// A left record at time t joins every right record of its key with a
// timestamp in [t-Before, t+After], whichever comes first: each matching
// pair is emitted once, when the second of the two is processed, with the
// larger of the two timestamps. A record is late when its timestamp is
// more than Grace behind the task's stream time (the largest timestamp the
// task has seen): it is counted (LateCount), sent to LateOutput if there
// is one, and joins nothing. Every pair of records that are not late and
// lie within the window is emitted exactly once, whatever the order in
// which they come.
//
// A left join also emits every left record that found no match, with a nil
// Right, once no match can come any more: when the stream time passes
// t+After+Grace. An outer join does the same for unmatched right records
// (t+Before+Grace). Like Kafka Streams since 3.1, nothing is emitted for a
// record before then, so an unmatched result is never followed by a
// matched one for the same record.
//
// # State
//
// Each record is buffered in Spec.Store until no record that is not late
// could join it any more, then deleted by an event-time timer, so the
// store holds about (Before+After+Grace) of each side's stream. Keys start
// with Spec.Name and a zero byte; timer keys are the buffered records'
// keys, which is how OnTimer recognizes its own. A record's buffer key is
// its key plus 22 bytes and the name; a key that does not fit
// abi.MaxKeySize fails the record. The buffer keeps each record's key,
// value and timestamp, not its headers.
package join

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/internal/stateful"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

// Kind is which unmatched records a join emits.
type Kind uint8

const (
	// Inner emits only matched pairs.
	Inner Kind = iota
	// Left also emits every left record that found no match, with a nil
	// Right, once its window has passed.
	Left
	// Outer also emits unmatched records of both sides, the missing side
	// nil.
	Outer
)

// Spec describes a join.
type Spec struct {
	// Name prefixes every state and timer key of the join. Required; no
	// zero byte; short (it is in every key).
	Name string
	// Store buffers both sides. Required.
	Store *sdk.StoreHandle
	// Left and Right are the input indexes (sdk.Record.Input) of the two
	// sides; they must differ. A record of any other input fails.
	Left, Right int
	// Before and After bound the window, in ms: a left record at t joins
	// right records with timestamps in [t-Before, t+After]. Kafka Streams'
	// JoinWindows.ofTimeDifference(d) is Before = After = d. Not negative.
	Before, After int64
	// Grace is how far behind the stream time a record may be and still
	// join, in ms. Default 0.
	Grace int64
	// Kind is Inner (default), Left or Outer.
	Kind Kind
	// Result receives every joined (or unmatched) pair. Required. Its
	// slices are valid only during the call.
	Result func(res *Result) error
	// LateOutput, if set, receives every late record as it came, with the
	// header LateHeader added.
	LateOutput *sdk.OutputHandle
}

// LateHeader is added to a late record sent to Spec.LateOutput; its value
// is the Spec's Name.
const LateHeader = "wasmstream-join-late"

// Side is one record of a join result.
type Side struct {
	Value     []byte // nil for a null value
	Timestamp int64
}

// Result is one join result: a matched pair, or an unmatched record of a
// left or outer join with the other side nil.
type Result struct {
	Key         []byte
	Left, Right *Side
	// Timestamp is the larger of the two sides' timestamps (the one
	// side's for an unmatched record): the one to give the emitted record.
	Timestamp int64
}

// Join is one stream-stream join; create it with New (once, at init), call
// Add for each record of either side and OnTimer from the timer callback.
type Join struct {
	s      Spec
	prefix []byte // Name + 0x00
	late   []byte // state key of the late-record count
	keyBuf []byte
}

// Tags after the prefix: which side a buffered record is on, and the
// counter.
const (
	tagLeft  = 'L'
	tagRight = 'R'
	tagCount = 'c'
)

// Flags of a buffered record, its value's first byte.
const (
	flagMatched = 1 << 0 // joined at least one record of the other side
	flagNull    = 1 << 1 // the record's value is null
)

// New checks spec and returns the join it describes.
func New(spec Spec) (*Join, error) {
	bad := func(msg string) (*Join, error) {
		return nil, errors.New("join: " + strconv.Quote(spec.Name) + ": " + msg)
	}
	switch {
	case spec.Name == "":
		return bad("Name is required")
	case stateful.ContainsZero(spec.Name):
		return bad("Name may not contain a zero byte")
	case spec.Store == nil:
		return bad("Store is required")
	case spec.Result == nil:
		return bad("Result is required")
	case spec.Left == spec.Right:
		return bad("Left and Right must be different inputs")
	case spec.Left < 0 || spec.Right < 0:
		return bad("Left and Right are input indexes, not negative")
	case spec.Before < 0 || spec.After < 0 || spec.Grace < 0:
		return bad("Before, After and Grace must not be negative")
	case spec.Kind > Outer:
		return bad("unknown Kind " + strconv.Itoa(int(spec.Kind)))
	}
	j := &Join{s: spec, prefix: append([]byte(spec.Name), 0)}
	j.late = append(append([]byte{}, j.prefix...), tagCount, 'l', 'a', 't', 'e')
	return j, nil
}

// buffered is one record of the other side that a new record matched.
type buffered struct {
	key   []byte // its buffer key
	ts    int64
	flags byte
	value []byte
}

// Add joins a record of either side with the buffered records of the
// other, emits the pairs, and buffers the record until its window has
// passed. A late record (or one without a timestamp) is counted and sent to
// LateOutput and changes nothing else. A null key is the empty key.
func (j *Join) Add(r *sdk.Record) error {
	var tag, other byte
	var lo, hi int64 // the other side's timestamps this record joins
	switch r.Input {
	case j.s.Left:
		tag, other = tagLeft, tagRight
		lo, hi = stateful.Sat(r.Timestamp, -j.s.Before), stateful.Sat(r.Timestamp, j.s.After)
	case j.s.Right:
		tag, other = tagRight, tagLeft
		lo, hi = stateful.Sat(r.Timestamp, -j.s.After), stateful.Sat(r.Timestamp, j.s.Before)
	default:
		return errors.New("join: " + strconv.Quote(j.s.Name) + ": a record of input " + strconv.Itoa(r.Input) +
			", which is neither side (Left " + strconv.Itoa(j.s.Left) + ", Right " + strconv.Itoa(j.s.Right) + ")")
	}
	if r.Timestamp < 0 {
		return j.lateRecord(r)
	}
	now, err := timer.StreamTime()
	if err != nil {
		return err
	}
	if now != timer.NoTime && r.Timestamp < stateful.Sat(now, -j.s.Grace) {
		return j.lateRecord(r)
	}
	key := r.Key
	if key == nil {
		key = []byte{}
	}
	matches, err := j.scan(other, key, max(lo, 0), hi)
	if err != nil {
		return err
	}
	flags := byte(0)
	if r.Value == nil {
		flags |= flagNull
	}
	this := &Side{Value: r.Value, Timestamp: r.Timestamp}
	for i := range matches {
		m := &matches[i]
		that := &Side{Value: m.value, Timestamp: m.ts}
		if m.flags&flagNull != 0 {
			that.Value = nil
		}
		res := Result{Key: key, Timestamp: max(r.Timestamp, m.ts)}
		if tag == tagLeft {
			res.Left, res.Right = this, that
		} else {
			res.Left, res.Right = that, this
		}
		if err := j.s.Result(&res); err != nil {
			return err
		}
		flags |= flagMatched
		// Remember that the buffered record matched, if its unmatched
		// result would otherwise be emitted when it expires.
		if m.flags&flagMatched == 0 && j.emitsUnmatched(other) {
			if err := j.s.Store.Put(m.key, append([]byte{m.flags | flagMatched}, m.value...)); err != nil {
				return err
			}
		}
	}
	bkey, err := j.bufferKey(tag, key, r.Timestamp, r.Offset)
	if err != nil {
		return err
	}
	if err := j.s.Store.Put(bkey, append([]byte{flags}, r.Value...)); err != nil {
		return err
	}
	// Kept while a record that is not late could still join it: the other
	// side's timestamps it joins end at hi, and a record is not late while
	// its timestamp is >= stream time - Grace.
	_, err = timer.Set(timer.EventTime, stateful.Sat(stateful.Sat(hi, j.s.Grace), 1), bkey)
	return err
}

// scan returns the buffered records of one side and key with timestamps
// in [lo, hi], in timestamp order. Nothing is written while the cursor is
// open.
func (j *Join) scan(tag byte, key []byte, lo, hi int64) ([]buffered, error) {
	if hi < lo {
		return nil, nil
	}
	start, err := j.bufferKey(tag, key, lo, 0)
	if err != nil {
		return nil, err
	}
	var end []byte
	if hi == math.MaxInt64 {
		end = stateful.PrefixEnd(start[:len(start)-16])
	} else if end, err = j.bufferKey(tag, key, hi+1, 0); err != nil {
		return nil, err
	}
	it, err := j.s.Store.Scan(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []buffered
	for it.Next() {
		k, v := it.Key(), it.Value()
		_, _, ts, ok := j.parseKey(k)
		if !ok || len(v) == 0 {
			return nil, j.corrupt(k)
		}
		out = append(out, buffered{
			key: append([]byte(nil), k...), ts: ts, flags: v[0],
			value: append([]byte{}, v[1:]...), // an empty value is not null
		})
	}
	return out, it.Err()
}

// emitsUnmatched reports whether an unmatched record of the side tagged tag
// is emitted when it expires.
func (j *Join) emitsUnmatched(tag byte) bool {
	return j.s.Kind == Outer || (j.s.Kind == Left && tag == tagLeft)
}

// OnTimer handles the join's timers: it deletes the buffered record the
// timer is for, first emitting it unmatched if the kind of join says so.
// It reports false, doing nothing, for a timer that is not this join's.
func (j *Join) OnTimer(f *timer.Firing) (bool, error) {
	if f.Kind != timer.EventTime {
		return false, nil
	}
	tag, key, ts, ok := j.parseKey(f.Key)
	if !ok {
		return false, nil
	}
	v, found, err := j.s.Store.Get(f.Key)
	if err != nil || !found {
		return true, err // deleted already: nothing to do
	}
	if len(v) == 0 {
		return true, j.corrupt(f.Key)
	}
	if v[0]&flagMatched == 0 && j.emitsUnmatched(tag) {
		side := &Side{Value: v[1:], Timestamp: ts}
		if v[0]&flagNull != 0 {
			side.Value = nil
		}
		res := Result{Key: key, Timestamp: ts}
		if tag == tagLeft {
			res.Left = side
		} else {
			res.Right = side
		}
		if err := j.s.Result(&res); err != nil {
			return true, err
		}
	}
	return true, j.s.Store.Delete(f.Key)
}

// LateCount is the number of late records this join has seen in this task
// (kept in the store, so it survives restarts and moves).
func (j *Join) LateCount() (uint64, error) {
	v, ok, err := j.s.Store.Get(j.late)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, j.corrupt(j.late)
	}
	return binary.BigEndian.Uint64(v), nil
}

func (j *Join) lateRecord(r *sdk.Record) error {
	n, err := j.LateCount()
	if err != nil {
		return err
	}
	return stateful.Late(j.s.Store, j.late, n, j.s.LateOutput, LateHeader, j.s.Name, r)
}

// bufferKey is prefix, side tag, u32 key length, key, timestamp (sortable),
// offset (sortable): one buffered record. The offset tells apart records
// of one key with one timestamp, and makes a record processed again after
// an abort land on the same key.
func (j *Join) bufferKey(tag byte, key []byte, ts, offset int64) ([]byte, error) {
	n := len(j.prefix) + 1 + 4 + len(key) + 16
	if n > abi.MaxKeySize {
		return nil, errors.New("join: " + strconv.Quote(j.s.Name) + ": a record key of " + strconv.Itoa(len(key)) +
			" bytes makes a buffer key over " + strconv.Itoa(abi.MaxKeySize) + " bytes")
	}
	k := stateful.AppendKey(j.keyBuf[:0], j.prefix, tag, key, ts, offset)
	j.keyBuf = k
	return append([]byte(nil), k...), nil
}

// parseKey splits a key made by bufferKey; ok is false for any other key.
func (j *Join) parseKey(k []byte) (tag byte, key []byte, ts int64, ok bool) {
	tag, key, ts, ok = stateful.ParseKey(k, j.prefix, 2)
	if !ok || (tag != tagLeft && tag != tagRight) {
		return 0, nil, 0, false
	}
	return tag, key, ts, true
}

func (j *Join) corrupt(key []byte) error {
	return errors.New("join: " + strconv.Quote(j.s.Name) + ": corrupt buffered record under key " + strconv.Quote(string(key)))
}
