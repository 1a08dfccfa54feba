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
}

// Name is the store's name.
func (s *Store) Name() string { return s.name }

// Get returns the committed value of key. An empty value is ([]byte{},
// true); a missing key is (nil, false).
func (s *Store) Get(key string) ([]byte, bool) {
	v, ok := s.data[key]
	return clone(v), ok
}

// Put sets a committed value, for seeding state before a record. A nil
// value is stored as empty, as state_put does.
func (s *Store) Put(key string, value []byte) {
	s.data[key] = append([]byte{}, value...)
}

// Delete removes a committed key.
func (s *Store) Delete(key string) { delete(s.data, key) }

// Keys returns the committed keys in byte order.
func (s *Store) Keys() []string {
	return slices.Sorted(maps.Keys(s.data))
}

// Len is the number of committed keys.
func (s *Store) Len() int { return len(s.data) }

// read is what state_get sees: the record's staged writes over the
// committed data.
func (s *Store) read(key string) ([]byte, bool) {
	if v, ok := s.pending[key]; ok {
		return v, v != nil
	}
	v, ok := s.data[key]
	return v, ok
}

func (s *Store) stage(key string, value []byte) {
	if s.pending == nil {
		s.pending = map[string][]byte{}
	}
	s.pending[key] = value
}

// view is the sorted keys a scan sees now.
func (s *Store) view() []string {
	keys := make([]string, 0, len(s.data)+len(s.pending))
	for k := range s.data {
		if v, ok := s.pending[k]; !ok || v != nil {
			keys = append(keys, k)
		}
	}
	for k, v := range s.pending {
		if _, ok := s.data[k]; !ok && v != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (s *Store) commit() {
	for k, v := range s.pending {
		if v == nil {
			delete(s.data, k)
		} else {
			s.data[k] = v
		}
	}
}
