package state

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Global tables (a whole topic materialized in every process) live in their
// own namespace, beside the tasks':
//
//	G = 0x02 | uvarint(len(topic)) | topic       a table's prefix
//	G | 0x00 | be32(partition)                   checkpoint: be64 next offset of that topic partition
//	G | 0x01 | userkey                           a value
//
// The prefix is the topic, not a processor's table name: the data is the
// topic's latest value per key whoever reads it. Like a store's, a table's
// checkpoints are written only in the batch that holds the data they
// describe (I3), and Wipe deletes data and checkpoints in one batch.
const tableNamespace = 0x02

func tablePrefix(topic string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(topic))
	b = append(b, tableNamespace)
	b = binary.AppendUvarint(b, uint64(len(topic)))
	return append(b, topic...)
}

// Table is the local copy of one topic read as a global table. Its methods
// are safe for concurrent use: one goroutine applies batches while task
// goroutines read (each read sees a consistent Pebble state; a Scan reads
// one snapshot through its iterator).
type Table struct {
	db     *DB
	topic  string
	prefix []byte
	data   []byte // prefix | kindData
	dataHi []byte // prefixEnd(data)
	cp     []byte // prefix | kindCheckpoint
}

// Table returns the table of topic. Handles of the same topic share data.
func (db *DB) Table(topic string) *Table {
	p := tablePrefix(topic)
	data := append(append([]byte(nil), p...), kindData)
	return &Table{db: db, topic: topic, prefix: p, data: data, dataHi: prefixEnd(data),
		cp: append(append([]byte(nil), p...), kindCheckpoint)}
}

// Topic is the table's topic.
func (t *Table) Topic() string { return t.topic }

func (t *Table) usable() error {
	if t.db.closed.Load() {
		return fmt.Errorf("%w: table %s", ErrClosed, t.topic)
	}
	return nil
}

func (t *Table) dataKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(t.data)+len(key)), t.data...), key...)
}

// Checkpoints returns the next offset to read of every partition the table
// has read from (none for a new or wiped table).
func (t *Table) Checkpoints() (map[int32]int64, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: t.cp, UpperBound: prefixEnd(t.cp)})
	if err != nil {
		return nil, fmt.Errorf("state: table %s checkpoints: %w", t.topic, err)
	}
	defer it.Close()
	out := map[int32]int64{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(t.cp):]
		if len(k) != 4 {
			return nil, fmt.Errorf("%w: table %s checkpoint key of %d bytes", ErrCorrupt, t.topic, len(k))
		}
		o, err := decodeOffset(it.Value())
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.topic, err)
		}
		out[int32(binary.BigEndian.Uint32(k))] = o
	}
	return out, it.Error()
}

// Apply writes changes (a nil Value deletes the key) and the checkpoints
// (partition -> next offset) in one atomic batch.
func (t *Table) Apply(changes []Change, checkpoints map[int32]int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	for p, o := range checkpoints {
		if o < 0 {
			return fmt.Errorf("%w: table %s partition %d: %d", ErrCheckpointRegress, t.topic, p, o)
		}
	}
	b := t.db.pdb.NewBatch() // closed by the write, which owns it
	for _, c := range changes {
		var err error
		if c.Value == nil {
			err = b.Delete(t.dataKey(c.Key), nil)
		} else {
			err = b.Set(t.dataKey(c.Key), c.Value, nil)
		}
		if err != nil {
			_ = b.Close()
			return fmt.Errorf("state: table %s: %w", t.topic, err)
		}
	}
	for p, o := range checkpoints {
		k := binary.BigEndian.AppendUint32(append([]byte(nil), t.cp...), uint32(p))
		if err := b.Set(k, encodeOffset(o), nil); err != nil {
			_ = b.Close()
			return fmt.Errorf("state: table %s: %w", t.topic, err)
		}
	}
	wopts := t.db.wopts
	if err := t.db.write(fmt.Sprintf("%d records of global table %s", len(changes), t.topic), len(b.Repr()), func() error {
		defer b.Close()
		return b.Commit(wopts)
	}); err != nil {
		return err
	}
	t.db.wrote()
	return nil
}

// Wipe deletes the table's data and checkpoints in one synced batch.
func (t *Table) Wipe() error {
	if err := t.usable(); err != nil {
		return err
	}
	b := t.db.pdb.NewBatch() // closed by the write, which owns it
	if err := b.DeleteRange(t.prefix, prefixEnd(t.prefix), nil); err != nil {
		_ = b.Close()
		return fmt.Errorf("state: table %s: wipe: %w", t.topic, err)
	}
	return t.db.write("the wipe of global table "+t.topic, len(b.Repr()), func() error {
		defer b.Close()
		return b.Commit(pebble.Sync)
	})
}

// Get returns a copy of key's value.
func (t *Table) Get(key []byte) (value []byte, found bool, err error) {
	if err := t.usable(); err != nil {
		return nil, false, err
	}
	v, closer, err := t.db.pdb.Get(t.dataKey(key))
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: table %s: get: %w", t.topic, err)
	}
	value = bytes.Clone(v)
	if value == nil {
		value = []byte{}
	}
	_ = closer.Close()
	return value, true, nil
}

// Scan iterates over keys k with start <= k < end in byte order (an empty
// end: no upper bound), over one consistent view of the table.
func (t *Table) Scan(start, end []byte) (Iterator, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	o := &pebble.IterOptions{LowerBound: t.dataKey(start), UpperBound: t.dataHi}
	if len(end) > 0 {
		o.UpperBound = t.dataKey(end)
	}
	it, err := t.db.pdb.NewIter(o)
	if err != nil {
		return nil, fmt.Errorf("state: table %s: scan: %w", t.topic, err)
	}
	t.db.iters.Add(1)
	return &tableIter{db: t.db, it: it, skip: len(t.data)}, nil
}

type tableIter struct {
	db      *DB
	it      *pebble.Iterator
	skip    int // the data prefix's length
	started bool
	closed  bool
}

func (i *tableIter) Next() (key, value []byte, ok bool, err error) {
	if i.closed {
		return nil, nil, false, ErrClosed
	}
	if !i.started {
		i.started, ok = true, i.it.First()
	} else {
		ok = i.it.Next()
	}
	if !ok {
		return nil, nil, false, i.it.Error()
	}
	return i.it.Key()[i.skip:], i.it.Value(), true, nil
}

func (i *tableIter) Close() error {
	if i.closed {
		return nil
	}
	i.closed = true
	i.db.iters.Add(-1)
	return i.it.Close()
}
