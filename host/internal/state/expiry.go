package state

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Expiry is a store's time to live (abi/ABI.md section 8.7): an entry
// expires once the store's clock reaches the time it was last written plus
// TTL. Expired entries are absent from reads at once and deleted by
// ExpireSome.
//
// A store with an expiry keeps each value behind an 8-byte stamp (the
// clock at the write, big-endian ms), in Pebble and in its changelog, so
// the stamp travels with the entry and a restore cannot bring an expired
// entry back. Get and Scan strip it: callers see their own values. The
// stamp changes the stored format, so a store's expiry must not be turned
// on or off once it holds data (the runner checks, see its time store).
type Expiry struct {
	// TTL is the time to live in ms; 0: entries never expire.
	TTL int64
	// Wall measures it against the wall clock; false: the stream time.
	Wall bool
}

// stampSize is the size of the stamp before each value of a store with an
// expiry.
const stampSize = 8

// SetExpiry gives store an expiry. Call it before the store is used.
func (t *Task) SetExpiry(store int, e Expiry) error {
	s, err := t.store(store)
	if err != nil {
		return err
	}
	s.expiry = e
	return nil
}

// SetClocks sets the clocks the next calls see (ms since the epoch; stream
// may be math.MinInt64, "no stream time"): writes to a store with an
// expiry are stamped with its clock, and reads hide what expired by it.
func (t *Task) SetClocks(stream, wall int64) {
	t.streamNow, t.wallNow = stream, wall
}

// clock is the store's clock now; math.MinInt64 when it has none yet.
func (t *Task) clock(s *store) int64 {
	if s.expiry.Wall {
		return t.wallNow
	}
	return t.streamNow
}

// stamp returns value behind the store's clock (0 while it has none).
func (t *Task) stamp(s *store, value []byte) []byte {
	now := max(t.clock(s), 0)
	b := make([]byte, stampSize, stampSize+len(value))
	binary.BigEndian.PutUint64(b, uint64(now))
	return append(b, value...)
}

// live splits a stored value of a store with an expiry into the caller's
// value and whether it has expired by the store's clock.
func (t *Task) live(s *store, stored []byte) (value []byte, expired bool, err error) {
	value, expired, ok := s.expiry.Live(stored, t.clock(s))
	if !ok {
		return nil, false, fmt.Errorf("state: task %s store %q: a value of %d bytes has no expiry stamp (did the store hold data before it got a TTL?)", t, s.name, len(stored))
	}
	return value, expired, nil
}

// Live splits a value as a store with expiry e holds it into the caller's
// value and whether it has expired when the store's clock reads now (ms;
// math.MinInt64: no time yet, nothing expired). ok is false for a value
// too short to have a stamp.
func (e Expiry) Live(stored []byte, now int64) (value []byte, expired, ok bool) {
	if len(stored) < stampSize {
		return nil, false, false
	}
	stamp := int64(binary.BigEndian.Uint64(stored))
	expired = now != math.MinInt64 && stamp <= math.MaxInt64-e.TTL && now >= stamp+e.TTL
	return stored[stampSize:], expired, true
}

// PluginValue is the part of a value of store as stored (in Pebble and in
// its changelog) that its writer gave: the value behind its stamp in a
// store with an expiry, the value itself otherwise (and for an invalid
// store, or a stored value too short for a stamp). It reads only the
// store's configuration, fixed before the store is used.
func (t *Task) PluginValue(store int, stored []byte) []byte {
	if store >= 0 && store < len(t.stores) && t.stores[store].expiry.TTL > 0 && len(stored) >= stampSize {
		return stored[stampSize:]
	}
	return stored
}

// getLive is Get for a store with an expiry.
func (t *Task) getLive(s *store, key []byte) ([]byte, bool, error) {
	stored, found, err := t.get(s, key)
	if err != nil || !found {
		return nil, false, err
	}
	v, expired, err := t.live(s, stored)
	if err != nil || expired {
		return nil, false, err
	}
	return v, true, nil
}

// liveIterator is a Scan of a store with an expiry: expired entries are
// skipped and stamps stripped.
type liveIterator struct {
	it *iterator
	t  *Task
	s  *store
}

func (i *liveIterator) Next() (key, value []byte, ok bool, err error) {
	for {
		k, stored, ok, err := i.it.Next()
		if err != nil || !ok {
			return nil, nil, ok, err
		}
		v, expired, err := i.t.live(i.s, stored)
		if err != nil {
			return nil, nil, false, err
		}
		if !expired {
			return k, v, true, nil
		}
	}
}

func (i *liveIterator) Close() error { return i.it.Close() }

// ExpireSome deletes (for the current record, like Delete) the expired
// entries among at most limit entries of store from key from on, and
// returns where the next call goes on: nil after the store's last entry
// (start again from the beginning). A store's expired entries are thus all
// deleted within a bounded number of calls, each of bounded cost, without
// an index; reads hide them in between.
func (t *Task) ExpireSome(store int, from []byte, limit int) (next []byte, deleted int, err error) {
	s, err := t.store(store)
	if err != nil {
		return nil, 0, err
	}
	if s.expiry.TTL == 0 {
		return nil, 0, nil
	}
	it, err := t.scan(s, from, nil)
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var expired [][]byte
	for n := 0; n < limit; n++ {
		k, stored, ok, err := it.Next()
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			next = nil
			break
		}
		next = append(append([]byte(nil), k...), 0) // the key after k
		if _, exp, err := t.live(s, stored); err == nil && exp {
			expired = append(expired, append([]byte(nil), k...))
		}
	}
	for _, k := range expired {
		if err := t.Delete(store, k); err != nil {
			return nil, 0, err
		}
	}
	return next, len(expired), nil
}

// Empty reports whether store holds no entry, staged or committed, as
// stored (expired or not).
func (t *Task) Empty(store int) (bool, error) {
	s, err := t.store(store)
	if err != nil {
		return false, err
	}
	it, err := t.scan(s, nil, nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	_, _, ok, err := it.Next()
	return !ok, err
}

// ExpiryOnWall reports whether store has an expiry on the wall clock.
func (t *Task) ExpiryOnWall(store int) bool {
	s, err := t.store(store)
	return err == nil && s.expiry.TTL > 0 && s.expiry.Wall
}
