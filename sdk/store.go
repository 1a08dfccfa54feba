package sdk

import (
	"slices"

	"github.com/wasmstream/wasmstream/abi"
)

// StoreHandle is a named key-value state store of the processor, declared
// in the host's processor config. The host keeps one store per task (input
// partition), backs it with a changelog topic and commits it together with
// the record's outputs; a plugin sees only its own task's data.
//
// Writes are staged: later reads in the same record see them, and they
// stand only if the record succeeds. Keys are at most abi.MaxKeySize bytes
// and values at most abi.MaxValueSize; larger ones fail with an error
// wrapping abi.ErrnoTooLarge. An empty value is a value (Get reports it
// as found), distinct from a missing key.
//
// State calls are not allowed during init (abi.ErrnoPhase).
//
// A handle may also name one of the processor's global tables (abi/ABI.md
// section 4): Get and the scans read it as it is at the moment of the
// call; Put and Delete fail with an error wrapping abi.ErrnoInval.
type StoreHandle struct {
	ref
}

// Store returns the handle of the store called name. Like Output, it does
// not call the host; a handle made while the plugin starts is resolved
// when the instance starts, one made later on first use.
func Store(name string) *StoreHandle {
	h := &StoreHandle{ref{name: name, call: abi.ImportStoreIndex}}
	declare(&h.ref)
	return h
}

// Name is the store's name.
func (s *StoreHandle) Name() string { return s.name }

// Check resolves the store now and reports whether the processor declares
// it (an error wrapping abi.ErrnoNoName if not).
func (s *StoreHandle) Check() error {
	_, err := s.index()
	return err
}

// getBuf is the buffer a Get reads into when its destination has no spare
// capacity. Most values fit; a larger one is read a second time.
var getBuf [1024]byte

// Get returns the value of key and whether the key has one. The returned
// slice is the caller's (a copy; one allocation of the value's size). A
// missing key is (nil, false, nil); an empty value is ([]byte{}, true,
// nil). AppendGet reads without allocating.
func (s *StoreHandle) Get(key []byte) ([]byte, bool, error) {
	v, ok, err := s.AppendGet(nil, key)
	if ok && v == nil {
		v = []byte{}
	}
	return v, ok, err
}

// AppendGet appends the value of key to dst and returns the extended slice
// and whether the key has one (dst unchanged if not). With a reused dst,
// reading a value allocates nothing: the per-record path of a stateful
// processor (see the package doc's "Cheap processors").
func (s *StoreHandle) AppendGet(dst, key []byte) ([]byte, bool, error) {
	idx, err := s.index()
	if err != nil {
		return dst, false, err
	}
	// The host writes the value straight into dst's spare capacity when it
	// has some (a reused dst: no copy), else into getBuf, from which it is
	// appended. It writes only a value that fits, so dst's spare bytes
	// change only where append would write them. A value larger than the
	// buffer is read a second time, into dst grown to fit it; a third
	// read happens only if the value changed size in between, which a host
	// serving one record at a time never does. The bound turns a broken
	// host into an error instead of a loop.
	out, direct := dst[len(dst):cap(dst)], true
	if len(out) == 0 {
		out, direct = getBuf[:], false
	}
	for range 3 {
		n := hostStateGet(idx, key, out)
		switch {
		case n == -int32(abi.ErrnoNotFound):
			return dst, false, nil
		case n < 0:
			return dst, false, hostErr(abi.ImportStateGet, s.name, n)
		case int(n) <= len(out) && direct:
			return dst[:len(dst)+int(n)], true, nil
		case int(n) <= len(out):
			return append(dst, out[:n]...), true, nil
		}
		dst = slices.Grow(dst, int(n))
		out, direct = dst[len(dst):cap(dst)], true
	}
	return dst, false, &HostError{Call: abi.ImportStateGet, Name: s.name, Errno: abi.ErrnoIO}
}

// Put sets key to value (nil is stored as an empty value).
func (s *StoreHandle) Put(key, value []byte) error {
	idx, err := s.index()
	if err != nil {
		return err
	}
	if r := hostStatePut(idx, key, value); r < 0 {
		return hostErr(abi.ImportStatePut, s.name, r)
	}
	return nil
}

// Delete removes key. Deleting a missing key is not an error.
func (s *StoreHandle) Delete(key []byte) error {
	idx, err := s.index()
	if err != nil {
		return err
	}
	if r := hostStateDelete(idx, key); r < 0 {
		return hostErr(abi.ImportStateDelete, s.name, r)
	}
	return nil
}

// Scan returns an iterator over the keys k with start <= k < end in byte
// order, with the record's own staged writes applied. A nil or empty end
// means no upper bound. At most abi.MaxOpenCursors iterators may be open at
// once in one record (abi.ErrnoLimit); Close them, or exhaust them, which
// closes them. The host closes any left open when the record ends.
func (s *StoreHandle) Scan(start, end []byte) (*Iterator, error) {
	idx, err := s.index()
	if err != nil {
		return nil, err
	}
	c := hostScanOpen(idx, start, end)
	if c < 0 {
		return nil, hostErr(abi.ImportScanOpen, s.name, c)
	}
	return &Iterator{store: s.name, cursor: uint32(c), open: true}, nil
}

// ScanPrefix is Scan over the keys that start with prefix.
func (s *StoreHandle) ScanPrefix(prefix []byte) (*Iterator, error) {
	return s.Scan(prefix, prefixEnd(prefix))
}

// prefixEnd is the smallest key greater than every key with the prefix, or
// nil (no upper bound) when there is none (prefix empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}

// Iterator walks a Scan:
//
//	it, err := store.Scan(start, end)
//	if err != nil { return err }
//	defer it.Close()
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { return err }
type Iterator struct {
	store  string
	cursor uint32
	open   bool
	buf    []byte
	key    []byte
	value  []byte
	err    error
}

// iterBufSize is an iterator's first entry buffer; it grows to fit larger
// entries.
const iterBufSize = 512

// Next advances to the next entry and reports whether there is one. At the
// end, or on an error (see Err), it closes the cursor and returns false.
func (it *Iterator) Next() bool {
	if !it.open {
		return false
	}
	if it.buf == nil {
		it.buf = make([]byte, iterBufSize)
	}
	for range 3 {
		n := hostScanNext(it.cursor, it.buf)
		switch {
		case n == 0:
			it.close()
			return false
		case n < 0:
			it.err = hostErr(abi.ImportScanNext, it.store, n)
			it.close()
			return false
		case int(n) <= len(it.buf):
			k, v, err := abi.DecodeScanEntry(it.buf[:n])
			if err != nil {
				it.err = &HostError{Call: abi.ImportScanNext, Name: it.store, Errno: abi.ErrnoInval}
				it.close()
				return false
			}
			it.key, it.value = k, v
			return true
		}
		it.buf = make([]byte, max(int(n), 2*len(it.buf)))
	}
	it.err = &HostError{Call: abi.ImportScanNext, Name: it.store, Errno: abi.ErrnoIO}
	it.close()
	return false
}

// Key is the current entry's key, valid until the next call to Next.
func (it *Iterator) Key() []byte { return it.key }

// Value is the current entry's value, valid until the next call to Next.
func (it *Iterator) Value() []byte { return it.value }

// Err is the error that ended the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close releases the cursor; it is safe to call more than once and after
// Next returned false. It returns Err, or the close's own error.
func (it *Iterator) Close() error {
	it.close()
	return it.err
}

func (it *Iterator) close() {
	if !it.open {
		return
	}
	it.open = false
	it.key, it.value = nil, nil
	if r := hostScanClose(it.cursor); r < 0 && it.err == nil {
		it.err = hostErr(abi.ImportScanClose, it.store, r)
	}
}
