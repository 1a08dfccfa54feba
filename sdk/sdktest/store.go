package sdktest

import (
	"maps"
	"slices"
)

// Store is a fake state store: committed data plus the writes staged by the
// record being processed.
type Store struct {
	name string
	data map[string][]byte
	// pending holds the current record's writes; a nil value is a delete.
	// Values are never nil otherwise: an empty value is []byte{}.
	pending map[string][]byte

	// ttl is the store's time to live in ms (0: none), measured on the
	// clock now returns (ABI.md section 8.7). stamps holds each committed
	// entry's stamp, pendingStamps those of the staged writes.
	ttl           int64
	now           func() int64
	stamps        map[string]int64
	pendingStamps map[string]int64
}

// Name is the store's name.
func (s *Store) Name() string { return s.name }

// Get returns the committed value of key. An empty value is ([]byte{},
// true); a missing key is (nil, false). With a TTL, an expired entry that
// the last commit point has not deleted yet is still returned here (it is
// in the store), though the plugin no longer reads it.
func (s *Store) Get(key string) ([]byte, bool) {
	v, ok := s.data[key]
	return clone(v), ok
}

// Put sets a committed value, for seeding state before a record. A nil
// value is stored as empty, as state_put does. With a TTL the entry is
// stamped with the store's clock now.
func (s *Store) Put(key string, value []byte) {
	s.data[key] = append([]byte{}, value...)
	if s.ttl > 0 {
		s.stamps[key] = s.now()
	}
}

// Delete removes a committed key.
func (s *Store) Delete(key string) {
	delete(s.data, key)
	delete(s.stamps, key)
}

// Keys returns the committed keys in byte order.
func (s *Store) Keys() []string {
	return slices.Sorted(maps.Keys(s.data))
}

// Len is the number of committed keys.
func (s *Store) Len() int { return len(s.data) }

// expired reports whether an entry stamped at stamp has expired.
func (s *Store) expired(stamp int64) bool { return s.ttl > 0 && s.now() >= stamp+s.ttl }

// read is what state_get sees: the record's staged writes over the
// committed data, without expired entries.
func (s *Store) read(key string) ([]byte, bool) {
	if v, ok := s.pending[key]; ok {
		if v != nil && s.expired(s.pendingStamps[key]) {
			return nil, false
		}
		return v, v != nil
	}
	v, ok := s.data[key]
	if ok && s.expired(s.stamps[key]) {
		return nil, false
	}
	return v, ok
}

func (s *Store) stage(key string, value []byte) {
	if s.pending == nil {
		s.pending = map[string][]byte{}
	}
	s.pending[key] = value
	if s.ttl > 0 && value != nil {
		if s.pendingStamps == nil {
			s.pendingStamps = map[string]int64{}
		}
		s.pendingStamps[key] = s.now()
	}
}

// view is the sorted keys a scan sees now.
func (s *Store) view() []string {
	keys := make([]string, 0, len(s.data)+len(s.pending))
	for k := range s.data {
		if _, ok := s.pending[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k, v := range s.pending {
		if v != nil {
			keys = append(keys, k)
		}
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { _, ok := s.read(k); return !ok })
	slices.Sort(keys)
	return keys
}

func (s *Store) commit() {
	for k, v := range s.pending {
		if v == nil {
			delete(s.data, k)
			delete(s.stamps, k)
		} else {
			s.data[k] = v
			if s.ttl > 0 {
				s.stamps[k] = s.pendingStamps[k]
			}
		}
	}
}

// discard drops the staged writes.
func (s *Store) discard() {
	s.pending, s.pendingStamps = nil, nil
}

// expire deletes the committed entries that have expired, as the host
// does at a commit point.
func (s *Store) expire() {
	if s.ttl == 0 {
		return
	}
	for k, stamp := range s.stamps {
		if s.expired(stamp) {
			delete(s.data, k)
			delete(s.stamps, k)
		}
	}
}
