package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Interactive queries (host/internal/query) read a store of a task as the
// database holds it: committed state only, since a commit window's writes
// reach Pebble only when Apply takes the window after its commit (under
// exactly_once, after the transaction committed; under at_least_once,
// after its changelog records were acknowledged). A read sees one Pebble
// snapshot, so the values and the checkpoint it returns belong together.
// It holds db.life while it reads: a Close or Recover waits for it (a
// read is bounded by its limit), and a read never runs on a closed Pebble.

// ErrNoCheckpoint: the store has no checkpoint in this database (the task
// was never restored here, or was wiped): nothing it holds can be trusted
// as committed state.
var ErrNoCheckpoint = errors.New("state: store has no checkpoint here")

// KV is one key and value a query read (copies: the caller keeps them).
type KV struct {
	Key, Value []byte
}

// QueryGet returns the committed value of key in store of the task
// (processor, partition), found false if there is none, and the store's
// checkpoint (the changelog offset after the last record the state holds).
// ErrNoCheckpoint if the store has no checkpoint; ErrClosed, or the
// database's failure, if it cannot be read.
func (db *DB) QueryGet(processor string, partition int32, store string, key []byte) (value []byte, found bool, checkpoint int64, err error) {
	err = db.query(processor, partition, store, func(snap *pebble.Snapshot, data []byte) error {
		v, closer, err := snap.Get(append(append([]byte(nil), data...), key...))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, found = append([]byte(nil), v...), true
		return closer.Close()
	}, &checkpoint)
	return value, found, checkpoint, err
}

// QueryScan returns up to limit committed keys and values of store of the
// task, in key order, from start (inclusive; nil: the first) to end
// (exclusive; nil: past the last), and whether more follow; with the
// store's checkpoint. It stops early (more) once the keys and values it
// holds reach maxBytes, after at least one. Errors as QueryGet's.
func (db *DB) QueryScan(processor string, partition int32, store string, start, end []byte, limit, maxBytes int) (kvs []KV, more bool, checkpoint int64, err error) {
	err = db.query(processor, partition, store, func(snap *pebble.Snapshot, data []byte) error {
		lo := append(append([]byte(nil), data...), start...)
		hi := prefixEnd(data)
		if end != nil {
			hi = append(append([]byte(nil), data...), end...)
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		defer it.Close()
		size := 0
		for valid := it.First(); valid; valid = it.Next() {
			if len(kvs) == limit || len(kvs) > 0 && size >= maxBytes {
				more = true
				break
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			kvs = append(kvs, KV{Key: append([]byte(nil), it.Key()[len(data):]...), Value: append([]byte(nil), v...)})
			size += len(it.Key()) - len(data) + len(v)
		}
		return it.Error()
	}, &checkpoint)
	return kvs, more, checkpoint, err
}

// query runs read on a snapshot of the database, with the store's data
// prefix, after reading the store's checkpoint into cp from the same
// snapshot.
func (db *DB) query(processor string, partition int32, store string, read func(*pebble.Snapshot, []byte) error, cp *int64) error {
	db.life.Lock()
	defer db.life.Unlock()
	if db.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	if f := db.failure.Load(); f != nil {
		return f
	}
	task := taskPrefix(processor, partition)
	snap := db.pdb.NewSnapshot()
	defer snap.Close()
	v, closer, err := snap.Get(storePrefix(task, kindCheckpoint, store))
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: %s/%d store %q", ErrNoCheckpoint, processor, partition, store)
	}
	if err != nil {
		return fmt.Errorf("state: %s: %s/%d store %q: %w", db.dir, processor, partition, store, err)
	}
	*cp, err = decodeOffset(v)
	_ = closer.Close()
	if err != nil {
		return fmt.Errorf("state: %s: %s/%d store %q: %w", db.dir, processor, partition, store, err)
	}
	if err := read(snap, storePrefix(task, kindData, store)); err != nil {
		return fmt.Errorf("state: %s: %s/%d store %q: %w", db.dir, processor, partition, store, err)
	}
	return nil
}
