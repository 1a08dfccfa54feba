package state

import "bytes"

// recordWrites is the current record's writes to one store: one entry per
// key, the latest write winning. A record writes few keys (the word
// count's counter one), so they are kept in the order first written in a
// slice, their bytes in one buffer reused from record to record, and
// found by scanning: a write costs no map operation and no allocation for
// its key. Past scanMax keys an index map is built, so that a record that
// writes many keys does not pay a scan per access.
type recordWrites struct {
	keys [][]byte // into buf
	ents []entry  // ents[i] is keys[i]'s
	buf  []byte
	idx  map[string]int // key -> position; nil while len(keys) <= scanMax
}

// scanMax is the number of keys up to which a record's writes are scanned
// rather than indexed.
const scanMax = 8

func (w *recordWrites) len() int { return len(w.keys) }

// find returns key's position, or -1.
func (w *recordWrites) find(key []byte) int {
	if w.idx != nil {
		if i, ok := w.idx[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, k := range w.keys {
		if bytes.Equal(k, key) {
			return i
		}
	}
	return -1
}

// findString is find for a key held as a string.
func (w *recordWrites) findString(key string) int {
	if w.idx != nil {
		if i, ok := w.idx[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range w.keys {
		if string(k) == key {
			return i
		}
	}
	return -1
}

// set makes e key's write; it copies key.
func (w *recordWrites) set(key []byte, e entry) {
	if i := w.find(key); i >= 0 {
		w.ents[i] = e
		return
	}
	// A key's slice is capped at its end, and buf only grows by append:
	// when it moves, the earlier keys keep the old array.
	off := len(w.buf)
	w.buf = append(w.buf, key...)
	w.keys = append(w.keys, w.buf[off:len(w.buf):len(w.buf)])
	w.ents = append(w.ents, e)
	switch {
	case w.idx != nil:
		w.idx[string(key)] = len(w.keys) - 1
	case len(w.keys) > scanMax:
		w.idx = make(map[string]int, 2*len(w.keys))
		for i, k := range w.keys {
			w.idx[string(k)] = i
		}
	}
}

// reset drops every write. The buffers stay for the next record unless
// this one made them large.
func (w *recordWrites) reset() {
	if len(w.keys) > 1024 || cap(w.buf) > 1<<20 {
		*w = recordWrites{}
		return
	}
	clear(w.ents) // the values are not kept alive by a spent record
	w.keys, w.ents, w.buf, w.idx = w.keys[:0], w.ents[:0], w.buf[:0], nil
}

// windowWrites is the commit window's writes to one store: one entry per
// key, the latest write winning. The entries sit in a slice indexed by a
// map from key, so a key written again in the window (a counter's hot
// key) is updated through a lookup, which allocates nothing; a map of
// entries would need the key as a new string for every write.
type windowWrites struct {
	idx  map[string]int32 // key -> position in ents
	ents []entry
}

func (w *windowWrites) len() int { return len(w.ents) }

// get returns key's entry.
func (w *windowWrites) get(key []byte) (entry, bool) {
	i, ok := w.idx[string(key)]
	if !ok {
		return entry{}, false
	}
	return w.ents[i], true
}

// at returns the entry of k, a key of the window.
func (w *windowWrites) at(k string) entry { return w.ents[w.idx[k]] }

// set makes e key's write. It returns the key as the window holds it when
// the key is new to the window ("" and false when it was already there).
func (w *windowWrites) set(key []byte, e entry) (string, bool) {
	if i, ok := w.idx[string(key)]; ok {
		w.ents[i] = e
		return "", false
	}
	if w.idx == nil {
		w.idx = map[string]int32{}
	}
	k := string(key)
	w.idx[k] = int32(len(w.ents))
	w.ents = append(w.ents, e)
	return k, true
}

// reset drops every write.
func (w *windowWrites) reset() {
	if len(w.ents) > 1<<16 {
		*w = windowWrites{} // do not keep a huge table around
		return
	}
	clear(w.idx)
	clear(w.ents)
	w.ents = w.ents[:0]
}
