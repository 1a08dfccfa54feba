package runner

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// StateView is a task's state as an instance reads and writes it: the
// task's stores (*state.Task), or a shadow's overlay over them
// (Env.Overlay).
type StateView interface {
	Get(store int, key []byte) (value []byte, found bool, err error)
	Put(store int, key, value []byte) error
	Delete(store int, key []byte) error
	Scan(store int, start, end []byte) (state.Iterator, error)
}

// shadowState is a shadow's overlay on a task's state: the candidate's
// writes, kept in memory for the shadow's life and never applied, over the
// active stores, which it reads through (so the candidate sees the state
// it would have had where it wrote nothing). A call's writes join the
// overlay when it succeeds and are dropped when it fails, as a record's
// would. Its bytes are bounded (limit): past it the write is refused and
// the shadow stops. Used by the task's goroutine only.
type shadowState struct {
	st    *state.Task
	limit int
	bytes int
	over  []map[string]shadowEntry // by store: the kept writes
	call  []map[string]shadowEntry // by store: the current call's
	full  bool                     // a write was refused for the limit
}

type shadowEntry struct {
	val []byte
	del bool
}

var errShadowState = fmt.Errorf("the shadow's state overlay is full: %w", abi.ErrnoLimit)

func (s *shadowState) stores() int { return len(s.st.Stores()) }

func (s *shadowState) check(store int) error {
	if store < 0 || store >= s.stores() {
		return fmt.Errorf("no store %d: %w", store, abi.ErrnoNoStore)
	}
	if s.over == nil {
		s.over = make([]map[string]shadowEntry, s.stores())
		s.call = make([]map[string]shadowEntry, s.stores())
	}
	return nil
}

// Get implements StateView: the call's writes, then the overlay's, then
// the active state.
func (s *shadowState) Get(store int, key []byte) ([]byte, bool, error) {
	if err := s.check(store); err != nil {
		return nil, false, err
	}
	if e, ok := s.call[store][string(key)]; ok {
		return e.val, !e.del, nil
	}
	if e, ok := s.over[store][string(key)]; ok {
		return e.val, !e.del, nil
	}
	return s.st.Get(store, key)
}

// Put implements StateView.
func (s *shadowState) Put(store int, key, value []byte) error {
	return s.write(store, key, shadowEntry{val: bytes.Clone(value)})
}

// Delete implements StateView.
func (s *shadowState) Delete(store int, key []byte) error {
	return s.write(store, key, shadowEntry{del: true})
}

func (s *shadowState) write(store int, key []byte, e shadowEntry) error {
	if err := s.check(store); err != nil {
		return err
	}
	if len(key) == 0 || len(key) > abi.MaxKeySize {
		return fmt.Errorf("key of %d bytes: %w", len(key), abi.ErrnoInval)
	}
	if len(e.val) > abi.MaxValueSize {
		return fmt.Errorf("value of %d bytes: %w", len(e.val), abi.ErrnoTooLarge)
	}
	n := len(key) + len(e.val) + state.HeldEntryOverhead
	if s.bytes+n > s.limit {
		s.full = true
		return errShadowState
	}
	s.bytes += n // an overwritten entry is counted again: the bound is on what was written
	if s.call[store] == nil {
		s.call[store] = map[string]shadowEntry{}
	}
	s.call[store][string(key)] = e
	return nil
}

// endCall keeps (ok) or drops the call's writes; it returns why the shadow
// must stop ("" if it need not).
func (s *shadowState) endCall(ok bool) string {
	for i, m := range s.call {
		if len(m) == 0 {
			continue
		}
		if ok {
			if s.over[i] == nil {
				s.over[i] = map[string]shadowEntry{}
			}
			for k, e := range m {
				s.over[i][k] = e
			}
		}
		clear(m)
	}
	if s.full {
		return fmt.Sprintf("its state overlay passed its limit of %d bytes", s.limit)
	}
	return ""
}

// Scan implements StateView: the active state's scan with the overlay's
// and the call's writes merged over it.
func (s *shadowState) Scan(store int, start, end []byte) (state.Iterator, error) {
	if err := s.check(store); err != nil {
		return nil, err
	}
	in := func(k string) bool {
		return k >= string(start) && (len(end) == 0 || k < string(end))
	}
	mine := map[string]shadowEntry{}
	for k, e := range s.over[store] {
		if in(k) {
			mine[k] = e
		}
	}
	for k, e := range s.call[store] {
		if in(k) {
			mine[k] = e
		}
	}
	keys := make([]string, 0, len(mine))
	for k := range mine {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	base, err := s.st.Scan(store, start, end)
	if err != nil {
		return nil, err
	}
	return &shadowIter{base: base, keys: keys, mine: mine}, nil
}

// shadowIter merges the overlay's entries (keys, sorted; copied at Scan)
// over the active state's iterator: the overlay wins on equal keys, and
// its deletes hide them.
type shadowIter struct {
	base       state.Iterator
	keys       []string
	mine       map[string]shadowEntry
	bk, bv     []byte
	bok, bdone bool
}

func (it *shadowIter) Next() ([]byte, []byte, bool, error) {
	for {
		if !it.bok && !it.bdone {
			k, v, ok, err := it.base.Next()
			if err != nil {
				return nil, nil, false, err
			}
			it.bk, it.bv, it.bok, it.bdone = k, v, ok, !ok
		}
		var mk string
		haveMine := len(it.keys) > 0
		if haveMine {
			mk = it.keys[0]
		}
		switch {
		case !haveMine && !it.bok:
			return nil, nil, false, nil
		case haveMine && (!it.bok || strings.Compare(mk, string(it.bk)) <= 0):
			if it.bok && mk == string(it.bk) {
				it.bok = false // shadowed by the overlay
			}
			it.keys = it.keys[1:]
			e := it.mine[mk]
			if e.del {
				continue
			}
			return []byte(mk), e.val, true, nil
		default:
			it.bok = false
			return it.bk, it.bv, true, nil
		}
	}
}

func (it *shadowIter) Close() error { return it.base.Close() }
