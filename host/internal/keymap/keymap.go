// Package keymap holds the two maps from byte keys that the record path
// stages its per-call and per-window work in (state writes, commit marks),
// shaped so that the common case allocates nothing:
//
//   - Scratch is a call's: few keys, kept in the order first set, their
//     bytes in one buffer reused from call to call, found by scanning (an
//     index map is built past ScanMax keys).
//   - Window is a commit window's: its values sit in a slice indexed by a
//     map from key, so a key set again (a counter's hot key) is updated
//     through a lookup, where a map of values would need the key as a new
//     string for every write; the last key found is remembered, so a
//     lookup followed by a write of the same key hashes it once.
//
// Neither is safe for concurrent use.
package keymap

import (
	"bytes"
	"iter"
)

// ScanMax is the number of keys up to which a Scratch is scanned rather
// than indexed.
const ScanMax = 8

// Scratch maps byte keys to values for one call; the zero value is empty.
type Scratch[V any] struct {
	keys [][]byte // into buf
	vals []V      // vals[i] is keys[i]'s
	buf  []byte
	idx  map[string]int // key -> position; nil while len(keys) <= ScanMax
}

// Len is the number of keys.
func (s *Scratch[V]) Len() int { return len(s.keys) }

// Keys are the keys in the order first set; Keys()[i]'s value is
// Values()[i]. Both are valid until the next Set or Reset, and the key
// bytes must not be modified.
func (s *Scratch[V]) Keys() [][]byte { return s.keys }

// Values are the values, in the order of Keys.
func (s *Scratch[V]) Values() []V { return s.vals }

// Find returns key's position in Keys, or -1.
func (s *Scratch[V]) Find(key []byte) int {
	if s.idx != nil {
		if i, ok := s.idx[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, k := range s.keys {
		if bytes.Equal(k, key) {
			return i
		}
	}
	return -1
}

// FindString is Find for a key held as a string.
func (s *Scratch[V]) FindString(key string) int {
	if s.idx != nil {
		if i, ok := s.idx[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range s.keys {
		if string(k) == key {
			return i
		}
	}
	return -1
}

// Set makes v key's value; it copies key.
func (s *Scratch[V]) Set(key []byte, v V) {
	if i := s.Find(key); i >= 0 {
		s.vals[i] = v
		return
	}
	// A key's slice is capped at its end, and buf only grows by append:
	// when it moves, the earlier keys keep the old array.
	off := len(s.buf)
	s.buf = append(s.buf, key...)
	s.keys = append(s.keys, s.buf[off:len(s.buf):len(s.buf)])
	s.vals = append(s.vals, v)
	switch {
	case s.idx != nil:
		s.idx[string(key)] = len(s.keys) - 1
	case len(s.keys) > ScanMax:
		s.idx = make(map[string]int, 2*len(s.keys))
		for i, k := range s.keys {
			s.idx[string(k)] = i
		}
	}
}

// Reset removes every key. The buffers stay for the next call unless this
// one made them large.
func (s *Scratch[V]) Reset() {
	if len(s.keys) > 1024 || cap(s.buf) > 1<<20 {
		*s = Scratch[V]{}
		return
	}
	clear(s.vals) // a spent call's values are not kept alive
	s.keys, s.vals, s.buf, s.idx = s.keys[:0], s.vals[:0], s.buf[:0], nil
}

// Window maps byte keys to values for one commit window; the zero value is
// empty. It remembers the last key it found or set: the record path looks
// a key up and then sets it (a state get, then the record's write of the
// same key; a commit mark checked, then kept), and the second lookup then
// compares the key's bytes instead of hashing it again.
type Window[V any] struct {
	idx  map[string]int32 // key -> position in vals and keys
	vals []V
	keys []string // keys[i] is vals[i]'s, the same string idx holds
	last int32    // position of the last key found or set, plus 1; 0 for none
}

// Len is the number of keys.
func (w *Window[V]) Len() int { return len(w.vals) }

// find returns key's position, or -1.
func (w *Window[V]) find(key []byte) int32 {
	if w.last > 0 && w.keys[w.last-1] == string(key) {
		return w.last - 1
	}
	i, ok := w.idx[string(key)]
	if !ok {
		return -1
	}
	w.last = i + 1
	return i
}

// Get returns key's value.
func (w *Window[V]) Get(key []byte) (V, bool) {
	i := w.find(key)
	if i < 0 {
		var zero V
		return zero, false
	}
	return w.vals[i], true
}

// Has reports whether key is set.
func (w *Window[V]) Has(key []byte) bool { return w.find(key) >= 0 }

// At returns the value of k, which must be set.
func (w *Window[V]) At(k string) V { return w.vals[w.idx[k]] }

// Set makes v key's value. When key is new it returns the key as the
// window holds it and true; otherwise "" and false.
func (w *Window[V]) Set(key []byte, v V) (string, bool) {
	if i := w.find(key); i >= 0 {
		w.vals[i] = v
		return "", false
	}
	if w.idx == nil {
		w.idx = map[string]int32{}
	}
	k := string(key)
	w.idx[k] = int32(len(w.vals))
	w.vals = append(w.vals, v)
	w.keys = append(w.keys, k)
	w.last = int32(len(w.vals))
	return k, true
}

// All yields every key with its value, in the order the keys were first
// set.
func (w *Window[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for i, k := range w.keys {
			if !yield(k, w.vals[i]) {
				return
			}
		}
	}
}

// Values returns the values in the order their keys were first set; the
// slice is the window's own, valid until the next Set or Reset.
func (w *Window[V]) Values() []V { return w.vals }

// Reset removes every key.
func (w *Window[V]) Reset() {
	if len(w.vals) > 1<<16 {
		*w = Window[V]{} // do not keep a huge table around
		return
	}
	clear(w.idx)
	clear(w.vals)
	clear(w.keys) // the strings are not kept alive
	w.vals, w.keys, w.last = w.vals[:0], w.keys[:0], 0
}
