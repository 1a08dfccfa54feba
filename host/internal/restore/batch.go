package restore

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/wasmstream/wasmstream/host/internal/state"
)

// sorter puts a batch in key order and keeps only the last record of each
// key, on the reading goroutine, before the batch goes to the applier.
//
// Why here: Task.ApplyRestored writes in key order (memtable inserts next to
// each other are cheaper, and a batch it ingests becomes an sstable, whose
// keys must be in order) and sorts a batch that is not sorted already, on
// the applier goroutine, which is the one a restore waits for. Sorting on
// the reader moves that work off the critical path, and a radix sort on an
// 8-byte integer key (the bytes after the batch's common key prefix) costs
// about a fifth of comparing byte slices through an index
// (BenchmarkSortBatch: ~45 against ~225 ns per record). A key that appears
// more than once in a batch is written once: ApplyRestored would let the
// last one win anyway, so the result is the same.
type sorter struct {
	keys, tmp []sortKey
}

// sortKey is one record's place in the sort: the 8 bytes of its key after
// the batch's common prefix, big-endian and zero-padded, and its index in
// changelog order.
type sortKey struct {
	k uint64
	i int32
}

// sort writes recs to dst (which it returns, grown if needed) in key order,
// one record per key: the last in changelog order. recs is not modified.
func (s *sorter) sort(dst, recs []state.Change) []state.Change {
	dst = dst[:0]
	if len(recs) == 0 {
		return dst
	}
	// A batch whose keys only increase (a changelog written in key order)
	// is taken as it is.
	increasing := true
	for i := 1; i < len(recs); i++ {
		if bytes.Compare(recs[i-1].Key, recs[i].Key) >= 0 {
			increasing = false
			break
		}
	}
	if increasing {
		return append(dst, recs...)
	}
	lcp := len(recs[0].Key)
	first := recs[0].Key
	for i := 1; i < len(recs) && lcp > 0; i++ {
		k := recs[i].Key
		n := min(lcp, len(k))
		j := 0
		for j < n && k[j] == first[j] {
			j++
		}
		lcp = j
	}
	keys := s.keys[:0]
	for i := range recs {
		keys = append(keys, sortKey{k: prefix8(recs[i].Key[lcp:]), i: int32(i)})
	}
	tmp := slices.Grow(s.tmp[:0], len(keys))[:len(keys)]
	keys, tmp = radixSort(keys, tmp)
	s.keys, s.tmp = keys[:0], tmp[:0]
	// Equal integers (keys that share their first 8 bytes after the prefix,
	// or repeats of a key): their remaining bytes decide, then changelog
	// order, so a key's later record stays after its earlier ones.
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].k == keys[lo].k {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(keys[lo:hi], func(a, b sortKey) int {
				if c := bytes.Compare(recs[a.i].Key[lcp:], recs[b.i].Key[lcp:]); c != 0 {
					return c
				}
				return int(a.i - b.i)
			})
		}
		lo = hi
	}
	for j, sk := range keys {
		if j+1 < len(keys) && keys[j+1].k == sk.k && bytes.Equal(recs[keys[j+1].i].Key, recs[sk.i].Key) {
			continue // a later record of the same key follows
		}
		dst = append(dst, recs[sk.i])
	}
	return dst
}

// radixSort sorts keys by k, stably, using tmp (same length) as scratch, one
// pass per byte of k that is not the same in every key. It returns the
// sorted slice and the other one (keys and tmp, in some order).
func radixSort(keys, tmp []sortKey) (sorted, other []sortKey) {
	var and, or uint64 = ^uint64(0), 0
	for _, sk := range keys {
		and &= sk.k
		or |= sk.k
	}
	varying := and ^ or // bits that differ between some keys
	for shift := uint(0); shift < 64; shift += 8 {
		if (varying>>shift)&0xff == 0 {
			continue
		}
		var count [256]int
		for _, sk := range keys {
			count[byte(sk.k>>shift)]++
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, sk := range keys {
			d := byte(sk.k >> shift)
			tmp[count[d]] = sk
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys, tmp
}

// prefix8 is the first 8 bytes of b as a big-endian integer, zero-padded:
// integer order is byte order for these bytes, and keys that differ only
// after them (or in padding) compare equal and are ordered by their bytes.
func prefix8(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b)
	}
	var buf [8]byte
	copy(buf[:], b)
	return binary.BigEndian.Uint64(buf[:])
}
