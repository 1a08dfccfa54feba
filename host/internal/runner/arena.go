package runner

import "github.com/twmb/franz-go/pkg/kgo"

// arena hands out the record structs and the key, value and header bytes
// of a task's emitted records from chunks, so that an emit costs no
// allocation of its own. The general word count emits 8 records per input
// line; allocating each record and its bytes was 3.5 % of the process's
// CPU in its profile, before the collector's share.
//
// A chunk is never reused: it is garbage once no record carved from it is
// referenced any more (franz-go drops a record when its produce promise
// has run, a failed call's staged records are dropped at its end). So
// what the arena keeps alive beyond the records in flight is at most one
// partly used chunk of each kind per task, and a large record gets its
// own allocation rather than pinning a chunk.
//
// Not safe for concurrent use: each task has its own, used by the
// goroutine that runs the task's calls.
type arena struct {
	recs []kgo.Record
	buf  []byte
}

const (
	arenaRecords = 128      // records per chunk (~25 KiB of structs)
	arenaBytes   = 32 << 10 // bytes per chunk
	// arenaLarge is the largest byte request served from a chunk: above
	// it, a request is allocated alone.
	arenaLarge = arenaBytes / 8
)

// record returns a zeroed record.
func (a *arena) record() *kgo.Record {
	if len(a.recs) == 0 {
		a.recs = make([]kgo.Record, arenaRecords)
	}
	r := &a.recs[0]
	a.recs = a.recs[1:]
	return r
}

// bytes returns n bytes whose capacity is n, so an append to them cannot
// reach the bytes of another record.
func (a *arena) bytes(n int) []byte {
	switch {
	case n == 0:
		return []byte{} // not nil, even before the first chunk
	case n > arenaLarge:
		return make([]byte, n)
	case n > len(a.buf):
		a.buf = make([]byte, arenaBytes)
	}
	b := a.buf[:n:n]
	a.buf = a.buf[n:]
	return b
}

// copyOf returns a copy of b from the arena; nil stays nil (a null key or
// value is not an empty one).
func (a *arena) copyOf(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := a.bytes(len(b))
	copy(c, b)
	return c
}
