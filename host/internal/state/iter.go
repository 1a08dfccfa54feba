package state

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Iterator walks a Scan in key order: Next returns the next entry, or ok ==
// false at the end; key and value must not be modified and stay valid until
// the next call to Next or Close. Close releases it (idempotent).
//
// It is an alias of an unnamed interface type, so that a package declaring
// its iterator the same way (type Iterator = interface{...}) names the
// identical type, and *Task's Scan satisfies that package's interface too.
type Iterator = interface {
	Next() (key, value []byte, ok bool, err error)
	Close() error
}

// memEntry is one staged write inside a scan's range.
type memEntry struct {
	key []byte
	entry
}

// iterator merges the staged writes (the record's overlay over the
// window's pending writes) with a Pebble iterator over committed values.
// Staged entries win over Pebble's for the same key; staged tombstones hide
// keys. The overlay's entries in range are copied when the scan opens (the
// record may write while it is open; a record's writes are bounded by
// limits.state_bytes_per_record); the pending writes are read in place,
// through the store's sorted key index, since they change only when a
// record ends, which a scan does not outlive (gen checks it). The Pebble
// iterator is a consistent snapshot too, so a scan sees the state as of
// Scan, whatever is written while it is open, and opening one costs no
// copy of what the window staged.
type iterator struct {
	t     *Task
	s     *store
	store string
	mem   []memEntry // the overlay's entries in range, sorted
	mi    int
	pend  []string // the pending keys in range, in order (s.sorted's)
	pi    int
	gen   uint64           // s.gen when the scan opened
	kbuf  []byte           // the last pending key returned
	it    *pebble.Iterator // nil for an empty range
	plen  int              // length of the store prefix to strip from Pebble keys

	started bool // it has been positioned
	pvalid  bool // it is on an entry not yet merged
	advance bool // it must step before the next comparison (its key/value were returned)
	done    bool
	closed  bool
}

// Scan iterates store over keys k with start <= k < end in byte order; an
// empty end means no upper bound. The iterator sees the current record's
// writes, the commit window's and committed values, as of this call. Close
// it before the record ends (the engine does).
func (t *Task) Scan(store int, start, end []byte) (Iterator, error) {
	s, err := t.store(store)
	if err != nil {
		return nil, err
	}
	it, err := t.scan(s, start, end)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	if s.expiry.TTL == 0 {
		return it, nil
	}
	return &liveIterator{it: it, t: t, s: s}, nil
}

// scan is Scan of the values as stored.
func (t *Task) scan(s *store, start, end []byte) (*iterator, error) {
	if err := t.checkKey(s, start); err != nil {
		return nil, err
	}
	if err := t.checkKey(s, end); err != nil {
		return nil, err
	}
	it := &iterator{t: t, s: s, store: s.name, plen: len(s.data), gen: s.gen}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		it.done = true // empty range
		t.iters[it] = struct{}{}
		return it, nil
	}
	lower := append(append(make([]byte, 0, len(s.data)+len(start)), s.data...), start...)
	upper := s.dataEnd
	if len(end) > 0 {
		upper = append(append(make([]byte, 0, len(s.data)+len(end)), s.data...), end...)
	}
	it.pend, it.mem = s.staged(start, end)
	pit, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("state: task %s store %q: scan: %w", t, s.name, err)
	}
	it.it = pit
	t.db.iters.Add(1)
	t.iters[it] = struct{}{}
	return it, nil
}

// staged returns the pending keys with start <= key < end (empty end:
// unbounded), in order, as a part of the store's sorted index (no copy),
// and a sorted copy of the overlay's entries in the range.
func (s *store) staged(start, end []byte) (pend []string, ov []memEntry) {
	in := func(k string) bool {
		return k >= string(start) && (len(end) == 0 || k < string(end))
	}
	if s.pending.Len() > 0 {
		if s.sorted == nil {
			s.sorted = make([]string, 0, s.pending.Len())
			for k := range s.pending.All() {
				s.sorted = append(s.sorted, k)
			}
			slices.Sort(s.sorted)
		}
		lo, _ := slices.BinarySearch(s.sorted, string(start))
		hi := len(s.sorted)
		if len(end) > 0 {
			hi, _ = slices.BinarySearch(s.sorted, string(end))
		}
		pend = s.sorted[lo:max(lo, hi):max(lo, hi)]
	}
	for i, k := range s.overlay.Keys() {
		if in(string(k)) {
			// A copy: the record's key bytes are reused by the next.
			ov = append(ov, memEntry{key: bytes.Clone(k), entry: s.overlay.Values()[i]})
		}
	}
	slices.SortFunc(ov, func(a, b memEntry) int { return bytes.Compare(a.key, b.key) })
	return pend, ov
}

// overlayFirst reports whether the overlay's next entry comes before
// (or is) the pending one's, when both are left.
func (i *iterator) overlayFirst() bool {
	k := i.mem[i.mi].key
	return string(k) <= i.pend[i.pi] // compiled without a copy
}

// peekStaged is the key of the smallest staged entry not yet returned,
// valid until the next call to Next (a pending key is copied to kbuf).
func (i *iterator) peekStaged() ([]byte, bool) {
	hasP, hasO := i.pi < len(i.pend), i.mi < len(i.mem)
	switch {
	case hasO && (!hasP || i.overlayFirst()):
		return i.mem[i.mi].key, true
	case hasP:
		i.kbuf = append(i.kbuf[:0], i.pend[i.pi]...)
		return i.kbuf, true
	}
	return nil, false
}

// nextStaged consumes the entry peekStaged returned, the overlay's winning
// over pending's for the same key.
func (i *iterator) nextStaged() entry {
	hasP, hasO := i.pi < len(i.pend), i.mi < len(i.mem)
	if hasO && (!hasP || i.overlayFirst()) {
		m := &i.mem[i.mi]
		i.mi++
		if hasP && string(m.key) == i.pend[i.pi] {
			i.pi++ // shadowed by the record's write
		}
		return m.entry
	}
	k := i.pend[i.pi]
	i.pi++
	return i.s.pending.At(k)
}

// Next returns the next entry in key order, or ok == false at the end.
func (i *iterator) Next() (key, value []byte, ok bool, err error) {
	if i.closed {
		return nil, nil, false, fmt.Errorf("%w: iterator used after Close", ErrClosed)
	}
	if i.done {
		return nil, nil, false, nil
	}
	if err := i.t.usable(); err != nil {
		return nil, nil, false, err
	}
	if i.s.gen != i.gen {
		return nil, nil, false, fmt.Errorf("state: task %s store %q: scan used after the record that opened it ended", i.t, i.store)
	}
	if !i.started {
		i.started = true
		i.pvalid = i.it.First()
	} else if i.advance {
		i.advance = false
		i.pvalid = i.it.Next()
	}
	for {
		var pk []byte
		if i.pvalid {
			pk = i.it.Key()[i.plen:]
		}
		if sk, ok := i.peekStaged(); ok {
			c := -1
			if i.pvalid {
				c = bytes.Compare(sk, pk)
			}
			if c <= 0 {
				e := i.nextStaged()
				if c == 0 { // the staged entry replaces the committed one
					i.pvalid = i.it.Next()
				}
				if e.del {
					continue
				}
				return sk, e.val, true, nil
			}
		}
		if !i.pvalid {
			if err := i.it.Error(); err != nil {
				return nil, nil, false, fmt.Errorf("state: task %s store %q: scan: %w", i.t, i.store, err)
			}
			i.done = true
			return nil, nil, false, nil
		}
		v, err := i.it.ValueAndErr()
		if err != nil {
			return nil, nil, false, fmt.Errorf("state: task %s store %q: scan value: %w", i.t, i.store, err)
		}
		i.advance = true
		return pk, v, true, nil
	}
}

// Close releases the iterator. It is idempotent.
func (i *iterator) Close() error {
	if i.closed {
		return nil
	}
	i.closed = true
	delete(i.t.iters, i)
	if i.it != nil {
		i.t.db.iters.Add(-1)
		if err := i.it.Close(); err != nil {
			return fmt.Errorf("state: task %s store %q: closing scan: %w", i.t, i.store, err)
		}
	}
	return nil
}
