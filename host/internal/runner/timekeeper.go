package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/keymap"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Errors a task's Time returns; the plugin adapter maps them to errnos.
var (
	// ErrTimerLimit: the task has TimeLimits.Timers timers pending.
	ErrTimerLimit = errors.New("the task has its limit of pending timers")
	// ErrMarkLimit: the commit window has TimeLimits.CommitMarks marked keys.
	ErrMarkLimit = errors.New("the commit window has its limit of marked keys")
	// ErrNoTimers: the processor keeps no timers (it has no time store).
	ErrNoTimers = errors.New("the processor has no time store: timers need one (declare a store)")
)

// Keys of the time store. Timers sort by kind, then time, then key, so each
// kind is one range in firing order; the stream time has a key of its own.
const (
	timeKeyStream = 's' // 's': the stream time, 8 bytes big-endian
	timeKeyTimer  = 't' // 't' kind(1) ts(8, big-endian, >= 0) key
	timeKeyFormat = 'f' // 'f' store name: "ttl" for a store kept with expiry stamps
	// 'v': the ID of the version whose layout the task's stores hold (the
	// last one that ran on them, or that migrated them): migrate.go.
	timeKeyVersion = 'v'
)

// expiryBatch is how many entries of a store with an expiry one sweep
// examines: the cost of a commit point's sweep is bounded, and a store of
// n entries is swept through in n/expiryBatch commit points.
const expiryBatch = 1000

// idleSweepEvery is how often a task that gets no records sweeps its stores
// with a wall-clock expiry (ms): entries expire by the wall clock there.
const idleSweepEvery = 1000

// maxMarkBytes bounds the key bytes a task's marked keys hold in memory in
// one commit window (a mark is not state: it lives until the commit point);
// a new key past it gets ErrMarkLimit, like one past TimeLimits.CommitMarks.
const maxMarkBytes = 16 << 20

// timerValue is what a timer's entry holds: never empty, since an empty
// value would be a tombstone in the changelog.
var timerValue = []byte{1}

// timekeeper is one task's time (ABI.md section 8): its stream time, the
// wall time of the current call, its pending timers (in the time store, so
// they commit, changelog and restore with the task's state) and the keys
// marked in the current commit window. It owns the invariants that stream
// time never goes back in committed state, that a task never has more
// than its limit of pending timers, and that a failed call leaves no timer
// change or mark behind. Used by the task's goroutine only.
type timekeeper struct {
	st    *state.Task // nil: no time store (marks and clocks only)
	store int         // index of the time store in st
	lim   TimeLimits

	loaded bool  // stream, pending and the minimums reflect the store
	stream int64 // the task's stream time; abi.NoTime when none
	// streamSaved is the stream time last written to the store.
	streamSaved int64
	wall        int64 // wall time of the current call; non-decreasing

	// pending counts the timers in the store (committed and staged by
	// successful calls); staged is the current call's change to it.
	pending, staged int
	// minDue[kind] is at most the earliest pending timer's time of that
	// kind (math.MaxInt64: none): a check skips the store when its clock is
	// below it. Sets lower it; fires and cancels leave it low until a check
	// finds nothing due and recomputes it.
	minDue [2]int64

	// marks are the keys marked in this commit window, with the last
	// marking call's timestamp; callMarks the current call's, merged on
	// success. carried are keys of committed windows whose commit calls
	// did not fit in their commit point; they survive aborts until a
	// commit point that called them commits. left are the keys the
	// current commit point did not get to, taken the carried ones called.
	marks         keymap.Window[int64]
	callMarks     keymap.Scratch[int64]
	carried, left map[string]int64
	// markBytes is the bytes of the keys in marks and callMarks;
	// carriedBytes of those in carried. The marked and carried keys
	// together are bounded by TimeLimits.CommitMarks and maxMarkBytes:
	// keys carried past commit points whose calls ran out of time count
	// against the next windows' marks, so a slow on_commit cannot make
	// the carried set grow without end (it makes commit_mark return
	// ELIMIT, and the plugin emit at once, ABI.md 8.3).
	markBytes, carriedBytes int
	taken                   map[string]int64 // carried as of the current commit point's start
	// hold charges a new marked key to the task's account (task.hold;
	// nil: no account). The carried keys are what the account keeps past
	// a window's end (carriedHeld).
	hold func(n int) error

	// firings counts the timers fired in this commit window.
	firings int
	// canceled is set when the current call canceled a pending timer (a
	// batch of firings then stops: a later one may be the canceled timer).
	canceled bool
	kbuf     []byte

	// stores are the processor's own stores, by index; formatsOK is set
	// once checkFormats found them matching their expiry config.
	stores    []storeInfo
	formatsOK bool
	// settled is the version the task's stores are known to be in the
	// layout of (settleVersion); nil: to be read from the store. An abort
	// forgets it (the window may have held the migration).
	settled *versions.Version[Plugin]
	// sweepAt is when a store with an expiry on the wall clock is next
	// swept though no record came (ms).
	sweepAt int64
	// recordsSeen is set by a record since the last sweep.
	recordsSeen bool
}

// storeInfo is one of the processor's own stores as the time keeper sees
// it: whether it has an expiry, and where its next sweep goes on.
type storeInfo struct {
	name   string
	expiry bool
	sweep  []byte
}

func newTimekeeper(st *state.Task, store int, lim TimeLimits) *timekeeper {
	return &timekeeper{st: st, store: store, lim: lim.withDefaults(), stream: abi.NoTime, streamSaved: abi.NoTime,
		minDue:  [2]int64{math.MaxInt64, math.MaxInt64},
		carried: map[string]int64{}}
}

// load reads the committed stream time and counts the pending timers, once
// the task's state is restored (and again after an abort dropped staged
// changes).
func (k *timekeeper) load() error {
	if k.loaded {
		return nil
	}
	k.stream, k.streamSaved, k.pending = abi.NoTime, abi.NoTime, 0
	k.minDue = [2]int64{math.MaxInt64, math.MaxInt64}
	if k.st == nil {
		k.loaded = true
		return nil
	}
	v, found, err := k.st.Get(k.store, []byte{timeKeyStream})
	if err != nil {
		return fmt.Errorf("reading the stream time: %w", err)
	}
	if found {
		if len(v) != 8 {
			return fmt.Errorf("reading the stream time: %d bytes, want 8", len(v))
		}
		k.stream = int64(binary.BigEndian.Uint64(v))
		k.streamSaved = k.stream
	}
	for kind := range k.minDue {
		lo, hi := timerRange(abi.TimerKind(kind))
		it, err := k.st.Scan(k.store, lo, hi)
		if err != nil {
			return fmt.Errorf("counting timers: %w", err)
		}
		first := true
		for {
			key, _, ok, err := it.Next()
			if err != nil {
				it.Close()
				return fmt.Errorf("counting timers: %w", err)
			}
			if !ok {
				break
			}
			if first {
				_, ts, _ := decodeTimerKey(key)
				k.minDue[kind] = ts
				first = false
			}
			k.pending++
		}
		it.Close()
	}
	k.loaded = true
	return nil
}

// reset forgets everything not committed (the window aborted or was
// rolled back): the next use reloads from the store.
func (k *timekeeper) reset() {
	k.loaded = false
	k.staged = 0
	k.marks.Reset()
	k.callMarks.Reset()
	k.markBytes = 0
	// The aborted commit point's calls of carried keys are undone: they
	// are carried again.
	for key, ts := range k.taken {
		k.carried[key] = ts
	}
	k.carriedBytes = keyBytes(k.carried)
	k.taken, k.left = nil, nil
	k.firings = 0
	k.formatsOK = false // a format record of the aborted window is gone
	k.settled = nil     // so is a migration of the aborted window
}

// committed starts a new commit window after a commit point committed:
// the keys it did not call are carried to the next.
func (k *timekeeper) committed() {
	if k.taken != nil {
		k.carried = k.left
		if k.carried == nil {
			k.carried = map[string]int64{}
		}
		k.carriedBytes = keyBytes(k.carried)
		k.taken, k.left = nil, nil
	}
	k.firings = 0
}

// keyBytes is the bytes of m's keys.
func keyBytes(m map[string]int64) int {
	n := 0
	for key := range m {
		n += len(key)
	}
	return n
}

// observe moves the stream time to a record's timestamp before the record
// is processed (a negative timestamp, "none", does not move it).
func (k *timekeeper) observe(ts int64) {
	if ts > k.stream {
		k.stream = ts
	}
	k.recordsSeen = true
}

// beginCall starts a call into the plugin at wall time now (ms): the wall
// time the call sees never goes back.
func (k *timekeeper) beginCall(now int64) {
	if now > k.wall {
		k.wall = now
	}
	k.staged = 0
	k.canceled = false
	k.callMarks.Reset()
	if k.st != nil {
		k.st.SetClocks(k.stream, k.wall)
	}
}

// endCall keeps (ok) or drops the call's timer changes and marks; the
// caller commits or aborts the state's record with it.
func (k *timekeeper) endCall(ok bool) {
	if ok {
		k.pending += k.staged
		for i, key := range k.callMarks.Keys() {
			k.marks.Set(key, k.callMarks.Values()[i])
		}
	} else {
		for _, key := range k.callMarks.Keys() {
			if !k.marks.Has(key) {
				k.markBytes -= len(key)
			}
		}
	}
	k.staged = 0
	k.callMarks.Reset()
}

// Now implements Time.
func (k *timekeeper) Now() (stream, wall int64) { return k.stream, k.wall }

// SetTimer implements Time.
func (k *timekeeper) SetTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	if k.st == nil {
		return false, ErrNoTimers
	}
	if err := k.load(); err != nil {
		return false, err
	}
	tk := k.timerKey(kind, ts, key)
	_, found, err := k.st.Get(k.store, tk)
	if err != nil || found {
		return false, err
	}
	if k.pending+k.staged >= k.lim.Timers {
		return false, ErrTimerLimit
	}
	if err := k.st.Put(k.store, tk, timerValue); err != nil {
		return false, err
	}
	k.staged++
	k.minDue[kind] = min(k.minDue[kind], ts)
	return true, nil
}

// CancelTimer implements Time.
func (k *timekeeper) CancelTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	if k.st == nil {
		return false, ErrNoTimers
	}
	if err := k.load(); err != nil {
		return false, err
	}
	removed, err := k.remove(kind, ts, key)
	if removed {
		k.canceled = true
	}
	return removed, err
}

func (k *timekeeper) remove(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	tk := k.timerKey(kind, ts, key)
	_, found, err := k.st.Get(k.store, tk)
	if err != nil || !found {
		return false, err
	}
	if err := k.st.Delete(k.store, tk); err != nil {
		return false, err
	}
	k.staged--
	return true, nil
}

// Mark implements Time.
func (k *timekeeper) Mark(key []byte, ts int64) (bool, error) {
	if k.callMarks.Find(key) >= 0 {
		k.callMarks.Set(key, ts)
		return false, nil
	}
	_, carried := k.carried[string(key)]
	marked := carried || k.marks.Has(key)
	if !marked && (len(k.carried)+k.marks.Len()+k.callMarks.Len() >= k.lim.CommitMarks ||
		k.carriedBytes+k.markBytes+len(key) > maxMarkBytes) {
		return false, ErrMarkLimit
	}
	if !marked && k.hold != nil {
		if err := k.hold(len(key) + markOverhead); err != nil {
			return false, err
		}
	}
	k.callMarks.Set(key, ts)
	if !marked {
		k.markBytes += len(key)
	}
	return !marked, nil
}

// markOverhead is what a marked key holds beyond its bytes (map slots,
// string headers, its timestamp).
const markOverhead = 64

// carriedHeld is what the carried keys hold in memory: the bytes the
// task's account keeps charged past a window's end.
func (k *timekeeper) carriedHeld() int { return k.carriedBytes + len(k.carried)*markOverhead }

// timer is a pending timer as a check found it.
type timer struct {
	kind abi.TimerKind
	ts   int64
	key  []byte
}

// due returns, in firing order (abi.TimerLess), the timers of the given
// kinds whose time has come by the clocks of now, at most n. A kind's
// clock is stream time for event-time timers, wall for processing-time
// timers. A kind found with nothing due gets its minimum recomputed.
func (k *timekeeper) due(event, processing bool, wall int64, n int) ([]timer, error) {
	if k.st == nil || n <= 0 {
		return nil, nil
	}
	if err := k.load(); err != nil {
		return nil, err
	}
	var out []timer
	clocks := [2]int64{k.stream, wall}
	for kind, want := range [2]bool{event, processing} {
		if !want || k.minDue[kind] > clocks[kind] {
			continue
		}
		lo, hi := timerRange(abi.TimerKind(kind))
		it, err := k.st.Scan(k.store, lo, hi)
		if err != nil {
			return nil, err
		}
		got, next := 0, int64(math.MaxInt64)
		for {
			key, _, ok, err := it.Next()
			if err != nil {
				it.Close()
				return nil, err
			}
			if !ok {
				break
			}
			_, ts, tkey := decodeTimerKey(key)
			if ts > clocks[kind] || got == n {
				next = ts
				break
			}
			out = append(out, timer{kind: abi.TimerKind(kind), ts: ts, key: bytes.Clone(tkey)})
			got++
		}
		it.Close()
		if got == 0 {
			k.minDue[kind] = next
		}
	}
	slices.SortFunc(out, func(a, b timer) int {
		if abi.TimerLess(a.kind, a.ts, a.key, b.kind, b.ts, b.key) {
			return -1
		}
		if abi.TimerLess(b.kind, b.ts, b.key, a.kind, a.ts, a.key) {
			return 1
		}
		return 0
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// pendingTimer reports whether tm is still pending (an earlier firing of
// the same check may have canceled it).
func (k *timekeeper) pendingTimer(tm timer) (bool, error) {
	_, found, err := k.st.Get(k.store, k.timerKey(tm.kind, tm.ts, tm.key))
	return found, err
}

// saveStream writes the stream time to the store when it moved since it
// was last written: at a commit point, so it commits with the window.
func (k *timekeeper) saveStream() error {
	if k.st == nil || k.stream == k.streamSaved || k.stream == abi.NoTime {
		return nil
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(k.stream))
	if err := k.st.PutHost(k.store, []byte{timeKeyStream}, v[:]); err != nil {
		return err
	}
	k.st.CommitRecord()
	k.streamSaved = k.stream
	return nil
}

// takeMarks returns the window's marked keys in byte order with their
// timestamps, and clears them.
func (k *timekeeper) takeMarks() []timer {
	k.taken = maps.Clone(k.carried)
	if k.taken == nil {
		k.taken = map[string]int64{}
	}
	k.left = nil
	if k.marks.Len() == 0 && len(k.carried) == 0 {
		return nil
	}
	all := k.taken
	if k.marks.Len() > 0 {
		all = maps.Clone(k.carried) // carried is never nil
		for key, ts := range k.marks.All() {
			all[key] = ts // a newer mark's timestamp wins
		}
	}
	out := make([]timer, 0, len(all))
	for key, ts := range all {
		out = append(out, timer{kind: abi.TriggerCommit, ts: ts, key: []byte(key)})
	}
	k.marks.Reset()
	k.markBytes = 0
	slices.SortFunc(out, func(a, b timer) int { return bytes.Compare(a.key, b.key) })
	return out
}

// carryMarks puts marked keys back for the next commit point (their calls
// did not fit in this one's time).
func (k *timekeeper) carryMarks(ms []timer) {
	k.left = make(map[string]int64, len(ms))
	for _, m := range ms {
		k.left[string(m.key)] = m.ts
	}
}

func (k *timekeeper) timerKey(kind abi.TimerKind, ts int64, key []byte) []byte {
	b := append(k.kbuf[:0], timeKeyTimer, byte(kind))
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	b = append(b, key...)
	k.kbuf = b
	return b
}

// timerRange is the time store's key range of one kind's timers.
func timerRange(kind abi.TimerKind) (lo, hi []byte) {
	return []byte{timeKeyTimer, byte(kind)}, []byte{timeKeyTimer, byte(kind) + 1}
}

// decodeTimerKey splits a timer's store key; key aliases k.
func decodeTimerKey(k []byte) (kind abi.TimerKind, ts int64, key []byte) {
	if len(k) < 10 {
		return 0, math.MaxInt64, nil // not a timer key: never due
	}
	return abi.TimerKind(k[1]), int64(binary.BigEndian.Uint64(k[2:10])), k[10:]
}

// eventDue reports whether an event-time timer may be due: the check after
// a record costs one comparison when none is.
func (k *timekeeper) eventDue() bool {
	return k.st != nil && k.loaded && k.minDue[abi.TimerEventTime] <= k.stream
}

// eventDueAt reports whether an event-time timer may be due once a record
// with timestamp ts has moved the stream time (a batch of records ends
// there, so the check runs right after it).
func (k *timekeeper) eventDueAt(ts int64) bool {
	return k.st != nil && k.loaded && k.minDue[abi.TimerEventTime] <= max(k.stream, ts)
}

// commitWork reports whether the commit point has calls to make for the
// task at wall time now: marked keys, a timer of either kind that may be
// due, or a stream time to save.
func (k *timekeeper) commitWork(now int64) bool {
	if k.marks.Len() > 0 || len(k.carried) > 0 {
		return true
	}
	if k.st != nil && k.sweepDue(now) {
		return true
	}
	if k.st == nil || !k.loaded {
		return false
	}
	return k.minDue[abi.TimerEventTime] <= k.stream || k.minDue[abi.TimerProcessingTime] <= now ||
		(k.stream != k.streamSaved && k.stream != abi.NoTime)
}

// checkFormats makes sure each store's stored format matches its expiry
// config (a store with an expiry keeps stamps before its values): a store
// that held data before it got a TTL, or lost its TTL after, would be
// misread. The format of a store with an expiry is recorded in the time
// store when it is first used, empty; the record travels with the
// changelog. Called outside calls (it may commit a write).
func (k *timekeeper) checkFormats() error {
	if k.formatsOK || k.st == nil {
		return nil
	}
	wrote := false
	for i, si := range k.stores {
		key := append([]byte{timeKeyFormat}, si.name...)
		_, marked, err := k.st.Get(k.store, key)
		if err != nil {
			return err
		}
		switch {
		case marked && !si.expiry:
			return fmt.Errorf("store %q holds values with expiry stamps but has no TTL in the config now; turning a TTL off needs a new store name", si.name)
		case !marked && si.expiry:
			empty, err := k.st.Empty(i)
			if err != nil {
				return err
			}
			if !empty {
				return fmt.Errorf("store %q holds data written without a TTL; a TTL needs a new, empty store (a new store name)", si.name)
			}
			if err := k.st.PutHost(k.store, key, []byte("ttl")); err != nil {
				return err
			}
			wrote = true
		}
	}
	if wrote {
		k.st.CommitRecord()
	}
	k.formatsOK = true
	return nil
}

// sweepDue reports whether a commit point at wall time now should sweep
// the stores with an expiry: after records (the stream time and the
// entries moved), or once a second on a quiet task for wall-clock ones.
func (k *timekeeper) sweepDue(now int64) bool {
	if !k.formatsOK {
		return false
	}
	expiring, wall := false, false
	for i, si := range k.stores {
		if si.expiry {
			expiring = true
			wall = wall || k.st.ExpiryOnWall(i)
		}
	}
	return expiring && (k.recordsSeen || (wall && now >= k.sweepAt))
}

// sweep deletes a bounded batch of expired entries of each store with an
// expiry, as a change of the commit window (their tombstones go to the
// changelog with it); it returns how many it deleted.
func (k *timekeeper) sweep(now int64) (int, error) {
	k.st.SetClocks(k.stream, max(now, k.wall))
	total := 0
	for i := range k.stores {
		si := &k.stores[i]
		if !si.expiry {
			continue
		}
		next, n, err := k.st.ExpireSome(i, si.sweep, expiryBatch)
		if err != nil {
			return total, err
		}
		si.sweep = next
		total += n
	}
	k.st.CommitRecord()
	k.recordsSeen = false
	k.sweepAt = now + idleSweepEvery
	return total, nil
}
