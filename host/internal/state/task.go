package state

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/invariants"
	"github.com/wasmstream/wasmstream/host/internal/keymap"
)

// Change is one dirty key of a commit window: its latest value, or a
// tombstone. It becomes exactly one changelog record (a tombstone is a record
// with a null value) and one Pebble write.
type Change struct {
	Store  int    // index into the Task's stores
	Key    []byte // user key
	Value  []byte // nil when Delete
	Delete bool
}

// entry is a staged write: a value or a tombstone. Its slices are owned by
// the Task and never modified after creation, so they may be shared between
// the overlay, the pending set, the cache, Get results, Dirty and open scans.
type entry struct {
	val []byte
	del bool
}

// cacheEntryOverhead approximates the bytes a cache entry costs beyond its
// key and value (map slot, string and slice headers).
const cacheEntryOverhead = 64

type store struct {
	name    string
	data    []byte // prefix of this store's values
	dataEnd []byte // prefixEnd(data)
	cpKey   []byte // key of this store's checkpoint

	// The read path, top wins: overlay (the current record), pending (the
	// commit window), cache (committed values, or absent markers), Pebble.
	overlay keymap.Scratch[entry] // the current record's writes
	pending keymap.Window[entry]  // the commit window's writes
	cache   map[string]entry
	// sorted holds pending's keys in order once a Scan needed them; it is
	// kept up to date from then on until the window ends, so processors
	// that never scan never pay for it.
	sorted []string
	// gen counts the changes of pending (and of sorted): an open scan
	// reads both in place, without a copy, and fails if they changed
	// under it (a scan must end with its record).
	gen uint64

	cpLoaded bool  // cp/cpOK reflect Pebble
	cpOK     bool  // the store has a checkpoint
	cp       int64 // next changelog offset the store holds everything below

	// expiry is the store's time to live (expiry.go); zero: none.
	expiry Expiry
	// maxEntry is the most bytes of key plus stored value one entry may
	// hold (SetEntryLimit); 0: no limit but the ABI's.
	maxEntry int
}

// Task is one task's state: a processor's stores on one partition. It is not
// safe for concurrent use: one goroutine uses it at a time (the task's
// processing goroutine, or its restorer before processing starts).
//
// The methods Get, Put, Delete and Scan implement the engine's State shape.
type Task struct {
	db        *DB
	processor string
	partition int32
	name      string // SetName's; "" means processor/partition
	prefix    []byte // task prefix
	end       []byte // prefixEnd(prefix)
	stores    []*store
	err       error // construction error, returned by every method

	closed  atomic.Bool
	wipeGen atomic.Uint64

	cacheBytes int
	// cacheBudget bounds cacheBytes (SetCacheBudget); the DB's
	// RecordCacheBytes until set. <= 0: no cache.
	cacheBudget int
	// streamNow and wallNow are the clocks the current call sees, for the
	// stores with an expiry (SetClocks).
	streamNow, wallNow int64
	kbuf               []byte   // scratch Pebble key
	keys               []string // scratch key list for Apply
	order              []int32  // scratch record order for ApplyRestored
	iters              map[*iterator]struct{}
	// disk is the task's account against its disk budget (budget.go).
	disk diskBudget
	// hold, if set, is told the bytes of every write a plugin's call
	// stages (SetHold); its error refuses the write.
	hold func(n int) error
}

// HeldEntryOverhead is the bytes a staged write holds beyond its key (held
// twice: by the record's writes and the window's) and value: entry and map
// slots, string and slice headers (the window's keymap.Window keeps each
// key's string header twice, in its map and in its key order).
const HeldEntryOverhead = 80

// heldBytes is what a staged write of key and value holds in memory until
// its commit window ends.
func heldBytes(key, value []byte) int { return 2*len(key) + len(value) + HeldEntryOverhead }

// SetHold makes every Put and Delete report the bytes it stages in memory
// (two copies of the key, the value, HeldEntryOverhead) to hold before it
// is staged; an error from hold refuses the write and is returned as is.
// The caller keeps the account (the runner's, host/internal/account): the
// store knows only that a write can be refused for what it holds. PutHost
// is not reported (the host's bookkeeping, a few bytes per window).
func (t *Task) SetHold(hold func(n int) error) { t.hold = hold }

func newTask(db *DB, processor string, partition int32, names []string) *Task {
	t := &Task{
		db:        db,
		processor: processor,
		partition: partition,
		prefix:    taskPrefix(processor, partition),
		iters:     map[*iterator]struct{}{},
	}
	t.cacheBudget = db.cache
	t.end = prefixEnd(t.prefix)
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			t.err = fmt.Errorf("%w: processor %q partition %d: store name %q is empty or repeated in %q",
				ErrInvalidTask, processor, partition, n, names)
			t.stores = nil
			return t
		}
		seen[n] = true
		s := &store{
			name:  n,
			data:  storePrefix(t.prefix, kindData, n),
			cpKey: storePrefix(t.prefix, kindCheckpoint, n),
			cache: map[string]entry{},
		}
		s.dataEnd = prefixEnd(s.data)
		t.stores = append(t.stores, s)
	}
	return t
}

// SetCacheBudget sets the bytes the task's cache of committed values may
// hold (keys, values and a fixed overhead per entry; the DB's
// RecordCacheBytes until set); 0 or less turns it off, reads then going to
// Pebble for every key the commit window has not written. Entries over a
// smaller budget are evicted at the next insertion.
func (t *Task) SetCacheBudget(n int) {
	t.cacheBudget = n
	if n <= 0 {
		for _, s := range t.stores {
			clear(s.cache)
		}
		t.cacheBytes = 0
	}
}

// Processor, Partition and Stores describe the task.
func (t *Task) Processor() string { return t.processor }

// Partition is the task's partition.
func (t *Task) Partition() int32 { return t.partition }

// Stores returns the names of the task's stores, by index.
func (t *Task) Stores() []string {
	names := make([]string, len(t.stores))
	for i, s := range t.stores {
		names[i] = s.name
	}
	return names
}

// SetName sets the name String gives the task in logs, errors and restore
// progress: the runner's name for it ("processor/topic/partition"), so a
// task has one name everywhere. Call it before sharing the Task.
func (t *Task) SetName(name string) { t.name = name }

// String is the name given by SetName, else "processor/partition" (a
// store's task has one input topic, which the state does not know).
func (t *Task) String() string {
	if t.name != "" {
		return t.name
	}
	return fmt.Sprintf("%s/%d", t.processor, t.partition)
}

// what names a write of the task for a *WriteError: what is written and
// the stores it writes.
func (t *Task) what(what string, stores ...*store) string {
	names := make([]string, len(stores))
	for i, s := range stores {
		names[i] = strconv.Quote(s.name)
	}
	noun := "store"
	if len(names) != 1 {
		noun = "stores"
	}
	return fmt.Sprintf("%s of task %s (%s %s)", what, t, noun, strings.Join(names, ", "))
}

// WipeGeneration counts the Wipes of this handle. A restorer compares it
// before each ApplyRestored so that a wipe it did not do (corruption
// handling) makes it start over instead of writing a checkpoint over a hole.
// Safe to call from any goroutine.
func (t *Task) WipeGeneration() uint64 { return t.wipeGen.Load() }

// Close releases the handle: open iterators are closed and staged writes
// dropped; nothing is written. Later calls return ErrClosed.
func (t *Task) Close() error {
	for it := range t.iters {
		_ = it.Close()
	}
	if t.closed.Swap(true) {
		return nil
	}
	t.db.release(t)
	for _, s := range t.stores {
		s.overlay, s.pending, s.cache, s.sorted = keymap.Scratch[entry]{}, keymap.Window[entry]{}, nil, nil
		s.gen++
	}
	return nil
}

func (t *Task) usable() error {
	if t.err != nil {
		return t.err
	}
	if t.closed.Load() || t.db.closed.Load() {
		return fmt.Errorf("%w: task %s", ErrClosed, t)
	}
	return nil
}

func (t *Task) store(i int) (*store, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if i < 0 || i >= len(t.stores) {
		return nil, fmt.Errorf("%w: task %s has %d stores, not index %d", ErrNoStore, t, len(t.stores), i)
	}
	return t.stores[i], nil
}

// MaxKeySize is the largest key a store takes: the ABI's limit on a
// plugin's keys (which the engine enforces before calling the store) plus
// KeyOverhead bytes for host-internal stores whose keys wrap a plugin's
// key (the runner's time store puts 10 bytes before a timer's key).
const (
	KeyOverhead = 16
	MaxKeySize  = abi.MaxKeySize + KeyOverhead
)

func (t *Task) checkKey(s *store, key []byte) error {
	if len(key) > MaxKeySize {
		return &SizeError{What: "key", Store: s.name, Size: len(key), Max: MaxKeySize}
	}
	return nil
}

// Get returns the value of key in store, seen through the current record's
// writes, then the commit window's, then committed state. The value must not
// be modified; it stays valid at least until the next call on this Task.
func (t *Task) Get(store int, key []byte) (value []byte, found bool, err error) {
	s, err := t.store(store)
	if err != nil {
		return nil, false, err
	}
	if s.expiry.TTL > 0 {
		return t.getLive(s, key)
	}
	return t.get(s, key)
}

// get is Get of the value as stored (with its stamp in a store with an
// expiry).
func (t *Task) get(s *store, key []byte) (value []byte, found bool, err error) {
	if err := t.checkKey(s, key); err != nil {
		return nil, false, err
	}
	if s.overlay.Len() > 0 {
		if i := s.overlay.Find(key); i >= 0 {
			e := s.overlay.Values()[i]
			return e.val, !e.del, nil
		}
	}
	if e, ok := s.pending.Get(key); ok {
		return e.val, !e.del, nil
	}
	if e, ok := s.cache[string(key)]; ok {
		return e.val, !e.del, nil
	}
	t.kbuf = append(append(t.kbuf[:0], s.data...), key...)
	v, closer, err := t.db.pdb.Get(t.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		t.cachePut(s, string(key), entry{del: true})
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: task %s store %q: get: %w", t, s.name, err)
	}
	val := make([]byte, len(v))
	copy(val, v)
	_ = closer.Close()
	t.cachePut(s, string(key), entry{val: val})
	return val, true, nil
}

// Put sets key to value in store for the current record. It copies both.
func (t *Task) Put(store int, key, value []byte) error {
	s, err := t.store(store)
	if err != nil {
		return err
	}
	if err := t.checkKey(s, key); err != nil {
		return err
	}
	if len(value) > abi.MaxValueSize {
		return &SizeError{What: "value", Store: s.name, Size: len(value), Max: abi.MaxValueSize}
	}
	if s.maxEntry > 0 {
		n := len(key) + len(value)
		if s.expiry.TTL > 0 {
			n += stampSize
		}
		if n > s.maxEntry {
			return &SizeError{What: "entry", Store: s.name, Size: n, Max: s.maxEntry}
		}
	}
	if f := t.db.failure.Load(); f != nil { // the name is made only then: Put is hot
		return t.db.refusal(f, t.what("a write", s)) // nothing of it could be committed
	}
	if err := t.chargeDisk(s, len(s.data)+len(key)+len(value)); err != nil {
		return err
	}
	if t.hold != nil {
		if err := t.hold(heldBytes(key, value)); err != nil {
			return err
		}
	}
	return t.put(s, key, value)
}

// SetEntryLimit sets the most bytes of key plus value as stored (with its
// expiry stamp, in a store with an expiry) one entry of store may hold: a
// Put over it fails with a *SizeError matching ErrEntryTooLarge and writes
// nothing. The owner sets it from what the store's changelog takes in one
// record, so that no change the store accepts is refused there; 0 or less
// removes it. PutHost, the host's own few bytes, is not held to it. It
// applies from the next Put; an invalid store is ignored.
func (t *Task) SetEntryLimit(store, limit int) {
	if store >= 0 && store < len(t.stores) {
		t.stores[store].maxEntry = max(limit, 0)
	}
}

// PutHost is Put for the host's own bookkeeping in a task's store (its
// stream time, expiry markers): a few bytes per key a plugin's writes
// already paid for, so it is not held to the disk budget, which would
// otherwise stop the host from recording what it must.
func (t *Task) PutHost(store int, key, value []byte) error {
	s, err := t.store(store)
	if err != nil {
		return err
	}
	if err := t.checkKey(s, key); err != nil {
		return err
	}
	if len(value) > abi.MaxValueSize {
		return &SizeError{What: "value", Store: s.name, Size: len(value), Max: abi.MaxValueSize}
	}
	if f := t.db.failure.Load(); f != nil {
		return t.db.refusal(f, t.what("a write", s))
	}
	return t.put(s, key, value)
}

func (t *Task) put(s *store, key, value []byte) error {
	if s.expiry.TTL > 0 {
		s.overlay.Set(key, entry{val: t.stamp(s, value)})
		return nil
	}
	s.overlay.Set(key, entry{val: append(make([]byte, 0, len(value)), value...)})
	return nil
}

// Delete removes key from store for the current record.
func (t *Task) Delete(store int, key []byte) error {
	s, err := t.store(store)
	if err != nil {
		return err
	}
	if err := t.checkKey(s, key); err != nil {
		return err
	}
	if f := t.db.failure.Load(); f != nil {
		return t.db.refusal(f, t.what("a delete", s))
	}
	if t.hold != nil {
		if err := t.hold(heldBytes(key, nil)); err != nil {
			return err
		}
	}
	s.overlay.Set(key, entry{del: true})
	return nil
}

// RecordWrites calls yield with each write of the current record (since
// the last CommitRecord or AbortRecord), store by store, until it returns
// false: the key, the value as stored (behind its stamp in a store with an
// expiry: see PluginValue) and whether it is a delete. The slices are the
// Task's; yield must not keep or modify them. The runner uses it to find a
// write the broker refused in a former pass (its changelog record), which
// only a record's own writes can be matched against.
func (t *Task) RecordWrites(yield func(store int, key, stored []byte, del bool) bool) {
	if t.usable() != nil {
		return
	}
	for i, s := range t.stores {
		for k, key := range s.overlay.Keys() {
			e := s.overlay.Values()[k]
			if !yield(i, key, e.val, e.del) {
				return
			}
		}
	}
}

// CommitRecord ends the current record successfully: its writes join the
// commit window's pending set, one entry per key (the latest write wins).
func (t *Task) CommitRecord() {
	if t.usable() != nil {
		return
	}
	for _, s := range t.stores {
		if s.overlay.Len() == 0 {
			continue
		}
		s.gen++
		for i, key := range s.overlay.Keys() {
			k, added := s.pending.Set(key, s.overlay.Values()[i])
			if added && s.sorted != nil {
				j, _ := slices.BinarySearch(s.sorted, k)
				s.sorted = slices.Insert(s.sorted, j, k)
			}
		}
		s.clearOverlay()
	}
	t.disk.recordEnded(true)
}

// AbortRecord ends the current record as failed: its writes are dropped,
// so the record leaves nothing behind.
func (t *Task) AbortRecord() {
	if t.usable() != nil {
		return
	}
	for _, s := range t.stores {
		s.clearOverlay()
	}
	t.disk.recordEnded(false)
}

func (s *store) clearOverlay() { s.overlay.Reset() }

// Dirty returns the commit window's changes: one per dirty key, in no
// particular order. The record overlay is not included. Keys are fresh
// copies; values are shared with the Task and must not be modified; both
// stay valid after Apply or Discard.
func (t *Task) Dirty() []Change {
	if t.usable() != nil {
		return nil
	}
	n, size := 0, 0
	for _, s := range t.stores {
		n += s.pending.Len()
		for k := range s.pending.All() {
			size += len(k)
		}
	}
	if n == 0 {
		return nil
	}
	changes := make([]Change, 0, n)
	buf := make([]byte, 0, size)
	for i, s := range t.stores {
		for k, e := range s.pending.All() {
			off := len(buf)
			buf = append(buf, k...)
			changes = append(changes, Change{Store: i, Key: buf[off:len(buf):len(buf)], Value: e.val, Delete: e.del})
		}
	}
	return changes
}

// batchRecordOverhead bounds what a Pebble batch adds to a key and value:
// the record's kind and two varint lengths.
const batchRecordOverhead = 1 + 2*5

// largeBatch is the size of the values of a window from which Apply sizes
// its batch before filling it; a smaller window's batch reuses a pooled
// buffer, grown as needed (counting its keys, a map walk, cost the counter
// benchmark 7 % per record).
const largeBatch = 1 << 20

// batchSize is the bytes of the batch Apply writes, for a window whose
// values reach largeBatch: every pending entry of the stores and the
// checkpoints, with their framing; 0 for a smaller window.
func (t *Task) batchSize(checkpoints map[int]int64) int {
	vals := 0
	for _, s := range t.stores {
		for _, e := range s.pending.Values() {
			vals += len(e.val)
		}
	}
	if vals < largeBatch {
		return 0
	}
	n := 12 // the batch header
	for _, s := range t.stores {
		for k, e := range s.pending.All() {
			n += len(s.data) + len(k) + len(e.val) + batchRecordOverhead
		}
	}
	for i := range checkpoints {
		n += len(t.stores[i].cpKey) + 8 + batchRecordOverhead
	}
	return n
}

// Apply makes the commit window durable in Pebble: every dirty key and the
// new changelog checkpoint of each given store, in one atomic batch (I3).
// Then the pending set is cleared and the committed values join the cache.
//
// checkpoints maps a store index to the changelog offset the store now holds
// everything below (the offset after its last changelog record of this
// window). Every store with dirty keys needs one, higher than its current
// checkpoint; a clean store may be given one that does not go backwards.
// A store without a checkpoint (never restored, or wiped) is refused with
// ErrNotRestored. On error the window stays pending (Discard it). A write
// the disk refused or did not answer in time (a *WriteError) fails the
// database; one that did not answer may still reach Pebble later, whole,
// with its checkpoints (I3 holds either way).
func (t *Task) Apply(checkpoints map[int]int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	for _, s := range t.stores {
		if s.overlay.Len() > 0 {
			return fmt.Errorf("%w: task %s: Apply with uncommitted writes of the current record in store %q", ErrRecordOpen, t, s.name)
		}
	}
	for i := range checkpoints {
		if i < 0 || i >= len(t.stores) {
			return fmt.Errorf("%w: checkpoint for store %d; task %s has %d stores", ErrNoStore, i, t, len(t.stores))
		}
	}
	dirty := false
	for i, s := range t.stores {
		dirty = dirty || s.pending.Len() > 0
		cp, given := checkpoints[i]
		if !given {
			if s.pending.Len() > 0 {
				return fmt.Errorf("%w: task %s store %q has %d dirty keys", ErrCheckpointMissing, t, s.name, s.pending.Len())
			}
			continue
		}
		if err := t.loadCheckpoint(s); err != nil {
			return err
		}
		if !s.cpOK {
			return fmt.Errorf("%w: task %s store %q has no checkpoint, refusing %d", ErrNotRestored, t, s.name, cp)
		}
		if cp < s.cp || (s.pending.Len() > 0 && cp == s.cp) {
			return fmt.Errorf("%w: task %s store %q: %d after %d with %d dirty keys", ErrCheckpointRegress, t, s.name, cp, s.cp, s.pending.Len())
		}
	}
	if !dirty && len(checkpoints) == 0 {
		return nil
	}

	// A large window's batch is made its full size at once: grown by
	// doubling, it took up to three times its bytes while it grew (the
	// old buffer and the new), beyond the window's own.
	b := t.db.pdb.NewBatchWithSize(t.batchSize(checkpoints)) // closed by the write, which owns it
	written := make([]*store, 0, len(t.stores))
	for i, s := range t.stores {
		if _, cp := checkpoints[i]; cp || s.pending.Len() > 0 {
			written = append(written, s)
		}
		// Keys go into the batch in order: Pebble inserts a batch into its
		// memtable skiplist remembering the previous insert's position, so
		// ordered keys make each insert cheap where random order would walk
		// the skiplist from the top every time (the dominant cost of a
		// commit point).
		keys := s.sorted
		if invariants.Enabled && keys != nil {
			// Apply writes exactly these keys, so sorted must be pending's
			// keys, each once, in order: a key missing would be lost.
			invariants.Assertf(len(keys) == s.pending.Len(), "task %s store %q: %d sorted keys for %d pending", t, s.name, len(keys), s.pending.Len())
			for i, k := range keys {
				invariants.Assertf(i == 0 || keys[i-1] < k, "task %s store %q: sorted keys out of order at %q", t, s.name, k)
				invariants.Assertf(s.pending.Has([]byte(k)), "task %s store %q: sorted key %q is not pending", t, s.name, k)
			}
		}
		if keys == nil {
			keys = t.keys[:0]
			for k := range s.pending.All() {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			t.keys = keys
		}
		for _, k := range keys {
			e := s.pending.At(k)
			t.kbuf = append(append(t.kbuf[:0], s.data...), k...)
			var err error
			if e.del {
				err = b.Delete(t.kbuf, nil)
			} else {
				err = b.Set(t.kbuf, e.val, nil)
			}
			if err != nil {
				_ = b.Close()
				return fmt.Errorf("state: task %s store %q: batch: %w", t, s.name, err)
			}
		}
	}
	for i, cp := range checkpoints {
		if err := b.Set(t.stores[i].cpKey, encodeOffset(cp), nil); err != nil {
			_ = b.Close()
			return fmt.Errorf("state: task %s: batch: %w", t, err)
		}
	}
	wopts := t.db.wopts
	if err := t.db.write(t.what("the commit window", written...), len(b.Repr()), func() error {
		defer b.Close()
		return b.Commit(wopts)
	}); err != nil {
		return err
	}
	t.db.wrote()
	t.disk.windowEnded(true)

	for _, s := range t.stores {
		for k, e := range s.pending.All() {
			t.cachePut(s, k, e)
		}
		s.clearPending()
	}
	for i, cp := range checkpoints {
		t.stores[i].cp = cp
	}
	return nil
}

// Discard drops the commit window and the current record (the transaction
// aborted): reads see committed state again.
func (t *Task) Discard() {
	if t.usable() != nil {
		return
	}
	for _, s := range t.stores {
		s.clearOverlay()
		s.clearPending()
	}
	t.disk.windowEnded(false)
}

func (s *store) clearPending() {
	s.gen++
	s.pending.Reset()
	s.sorted = nil
}

// Checkpoint returns store's changelog checkpoint: the offset of the next
// changelog record to restore (the store holds the effect of every record
// below it). ok is false when the store has none: it was never restored, or
// it was wiped.
func (t *Task) Checkpoint(store int) (offset int64, ok bool, err error) {
	s, err := t.store(store)
	if err != nil {
		return 0, false, err
	}
	if err := t.loadCheckpoint(s); err != nil {
		return 0, false, err
	}
	return s.cp, s.cpOK, nil
}

func (t *Task) loadCheckpoint(s *store) error {
	if s.cpLoaded {
		return nil
	}
	v, closer, err := t.db.pdb.Get(s.cpKey)
	if errors.Is(err, pebble.ErrNotFound) {
		s.cpLoaded, s.cpOK, s.cp = true, false, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: task %s store %q: reading checkpoint: %w", t, s.name, err)
	}
	defer closer.Close()
	cp, err := decodeOffset(v)
	if err != nil {
		return fmt.Errorf("task %s store %q: %w", t, s.name, err)
	}
	s.cpLoaded, s.cpOK, s.cp = true, true, cp
	return nil
}

// Wipe deletes the task's whole key range, every store's data and
// checkpoint (including stores no longer in the store list), in one synced
// atomic batch, and drops everything staged or cached. Afterwards every
// store reports no checkpoint and must be restored before Apply accepts
// checkpoints for it.
func (t *Task) Wipe() error {
	if err := t.usable(); err != nil {
		return err
	}
	b := t.db.pdb.NewBatch() // closed by the write, which owns it
	if err := b.DeleteRange(t.prefix, t.end, nil); err != nil {
		_ = b.Close()
		return fmt.Errorf("state: task %s: wipe: %w", t, err)
	}
	// Whatever happens to the commit, the in-memory view must not outlive
	// the data it described.
	t.wipeGen.Add(1)
	for _, s := range t.stores {
		s.clearOverlay()
		s.clearPending()
		clear(s.cache)
		s.cpLoaded, s.cpOK, s.cp = false, false, 0
	}
	t.cacheBytes = 0
	t.disk = diskBudget{budget: t.disk.budget}
	return t.db.write(t.what("the wipe", t.stores...), len(b.Repr()), func() error {
		defer b.Close()
		return b.Commit(pebble.Sync)
	})
}

// ApplyRestored writes changelog records restored into store, and the
// store's new checkpoint nextOffset (the offset after the last changelog
// record the batch covers), atomically: in one Pebble batch, or, from
// Options.IngestRestoredBytes of keys and values, as sstables ingested in one
// call (see ingest.go). recs are in changelog order; for a key that appears
// more than once the last record wins. A Change with Delete set or a nil
// Value is a tombstone. The store's cache is dropped. nextOffset must not be
// lower than the current checkpoint.
//
// Restoring happens before processing: with processed writes staged it
// returns ErrPendingWrites.
func (t *Task) ApplyRestored(store int, recs []Change, nextOffset int64) error {
	s, err := t.store(store)
	if err != nil {
		return err
	}
	for _, o := range t.stores {
		if o.overlay.Len() > 0 || o.pending.Len() > 0 {
			return fmt.Errorf("%w: task %s store %q", ErrPendingWrites, t, o.name)
		}
	}
	if err := t.loadCheckpoint(s); err != nil {
		return err
	}
	if nextOffset < 0 || (s.cpOK && nextOffset < s.cp) {
		return fmt.Errorf("%w: task %s store %q: restored checkpoint %d after %d", ErrCheckpointRegress, t, s.name, nextOffset, s.cp)
	}
	// Write in key order, like Apply, so that each memtable insert starts
	// next to the previous one (about 2x cheaper for scattered keys); an
	// sstable must be written in key order anyway. Ties keep changelog
	// order, so the later record of a key gets the higher sequence number in
	// the batch and wins (ingestRestored keeps only that one).
	order := t.order[:0]
	for i := range recs {
		order = append(order, int32(i))
	}
	if !slices.IsSortedFunc(recs, compareChangeKeys) {
		slices.SortFunc(order, func(a, b int32) int {
			if c := bytes.Compare(recs[a].Key, recs[b].Key); c != 0 {
				return c
			}
			return int(a - b)
		})
	}
	t.order = order
	size, payload := len(s.cpKey)+8+16, 0
	for i := range recs {
		payload += len(recs[i].Key) + len(recs[i].Value)
		size += len(s.data) + len(recs[i].Key) + len(recs[i].Value) + 16
	}
	if t.db.ingestMin > 0 && payload >= t.db.ingestMin {
		if err := t.ingestRestored(s, recs, order, nextOffset, size); err != nil {
			return err
		}
		t.restoredDone(s, nextOffset)
		return nil
	}
	b := t.db.pdb.NewBatchWithSize(size) // no regrowing (copying) while it fills; closed by the write
	for _, i := range order {
		r := &recs[i]
		t.kbuf = append(append(t.kbuf[:0], s.data...), r.Key...)
		if r.Delete || r.Value == nil {
			err = b.Delete(t.kbuf, nil)
		} else {
			err = b.Set(t.kbuf, r.Value, nil)
		}
		if err != nil {
			_ = b.Close()
			return fmt.Errorf("state: task %s store %q: restore batch: %w", t, s.name, err)
		}
	}
	if err := b.Set(s.cpKey, encodeOffset(nextOffset), nil); err != nil {
		_ = b.Close()
		return fmt.Errorf("state: task %s store %q: restore batch: %w", t, s.name, err)
	}
	wopts := t.db.wopts
	if err := t.db.write(t.what(fmt.Sprintf("%d restored records", len(recs)), s), len(b.Repr()), func() error {
		defer b.Close()
		return b.Commit(wopts)
	}); err != nil {
		return err
	}
	t.db.wrote()
	t.restoredDone(s, nextOffset)
	return nil
}

// restoredDone updates the in-memory view after restored records were
// written: the store's cache is dropped and its checkpoint is nextOffset.
func (t *Task) restoredDone(s *store, nextOffset int64) {
	for k, e := range s.cache {
		t.cacheBytes -= len(k) + len(e.val) + cacheEntryOverhead
	}
	clear(s.cache)
	s.cpLoaded, s.cpOK, s.cp = true, true, nextOffset
}

// cachePut records a committed value (or an absent key) and evicts entries
// when the Task's budget is exceeded. Go map iteration starts at a random
// position, so eviction is random replacement: cheap, no per-access
// bookkeeping on the hot path.
func (t *Task) cachePut(s *store, k string, e entry) {
	budget := t.cacheBudget
	if budget <= 0 {
		return
	}
	if old, ok := s.cache[k]; ok {
		t.cacheBytes -= len(k) + len(old.val) + cacheEntryOverhead
	}
	s.cache[k] = e
	t.cacheBytes += len(k) + len(e.val) + cacheEntryOverhead
	if t.cacheBytes <= budget {
		return
	}
	target := budget - budget/4
	for _, st := range t.stores {
		for ck, ce := range st.cache {
			if t.cacheBytes <= target {
				return
			}
			delete(st.cache, ck)
			t.cacheBytes -= len(ck) + len(ce.val) + cacheEntryOverhead
		}
	}
}

func compareChangeKeys(a, b Change) int { return bytes.Compare(a.Key, b.Key) }
