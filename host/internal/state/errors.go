package state

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Every error it returns wraps one of these
// (test with errors.Is) or, for storage failures, the underlying Pebble error
// with context.
var (
	// ErrDirUnusable: the state directory cannot be created or is not
	// writable. The wrapped OS error says why.
	ErrDirUnusable = errors.New("state: directory unusable")
	// ErrLocked: the database is locked, by another process (another
	// wasmstream using the same state.dir) or by an earlier Open in this
	// process that was not closed.
	ErrLocked = errors.New("state: database locked")
	// ErrCorrupt: the database files are damaged, or were written with a key
	// layout this version does not understand. Restoring from the changelogs
	// into an empty state.dir rebuilds them.
	ErrCorrupt = errors.New("state: database corrupt")
	// ErrClosed: the DB was closed, or the Task handle was closed or replaced
	// by a newer DB.Task call for the same task.
	ErrClosed = errors.New("state: closed")
	// ErrInvalidTask: DB.Task was given an unusable store list (an empty or
	// duplicated store name). Every method of such a Task returns it.
	ErrInvalidTask = errors.New("state: invalid task")
	// ErrNoStore: a store index outside the Task's store list.
	ErrNoStore = errors.New("state: no such store")
	// ErrTooLarge is matched by every *SizeError (keys and values).
	ErrTooLarge = errors.New("state: too large")
	// ErrKeyTooLarge is matched by a *SizeError about a key (MaxKeySize).
	ErrKeyTooLarge = errors.New("state: key too large")
	// ErrValueTooLarge is matched by a *SizeError about a value
	// (abi.MaxValueSize).
	ErrValueTooLarge = errors.New("state: value too large")
	// ErrEntryTooLarge is matched by a *SizeError about a whole entry, its
	// key and its value as stored, over its store's entry limit
	// (Task.SetEntryLimit): the store's changes could not be recorded
	// where they go (its changelog).
	ErrEntryTooLarge = errors.New("state: entry too large for the store's changelog")
	// ErrRecordOpen: Apply was called while the record overlay holds writes
	// of a record that was neither committed (CommitRecord) nor aborted
	// (AbortRecord).
	ErrRecordOpen = errors.New("state: record still open")
	// ErrPendingWrites: ApplyRestored was called while processed writes are
	// pending; restore happens before processing, never during it.
	ErrPendingWrites = errors.New("state: processed writes pending")
	// ErrNotRestored: a checkpoint was given for a store that has none: it
	// was never restored, or it was wiped since. Such a store must be
	// restored (which writes its checkpoint) before processed changes may
	// move its checkpoint; otherwise the checkpoint would claim records the
	// store does not hold (invariant I3, the Kafka Streams revive bug).
	ErrNotRestored = errors.New("state: store not restored")
	// ErrCheckpointMissing: Apply was called with dirty keys in a store but
	// no checkpoint for it.
	ErrCheckpointMissing = errors.New("state: checkpoint missing for a dirty store")
	// ErrCheckpointRegress: a checkpoint lower than the store's current one
	// (or, for a store with dirty keys, not higher), or negative.
	ErrCheckpointRegress = errors.New("state: checkpoint does not move forward")
)

// SizeError reports a key or value over the ABI limit, or an entry over
// its store's entry limit. It matches ErrTooLarge and, depending on What,
// ErrKeyTooLarge, ErrValueTooLarge or ErrEntryTooLarge.
type SizeError struct {
	What  string // "key", "value" or "entry"
	Store string // the store's name
	Size  int    // bytes given
	Max   int    // bytes allowed (MaxKeySize, abi.MaxValueSize or the entry limit)
}

func (e *SizeError) Error() string {
	if e.What == "entry" {
		return fmt.Sprintf("state: store %q: an entry of %d bytes (key and value as stored) is over the %d bytes its changelog takes in one record", e.Store, e.Size, e.Max)
	}
	return fmt.Sprintf("state: store %q: %s of %d bytes is over the limit of %d", e.Store, e.What, e.Size, e.Max)
}

// Is makes errors.Is(err, ErrTooLarge) and the key/value variants work.
func (e *SizeError) Is(target error) bool {
	switch target {
	case ErrTooLarge:
		return true
	case ErrKeyTooLarge:
		return e.What == "key"
	case ErrValueTooLarge:
		return e.What == "value"
	case ErrEntryTooLarge:
		return e.What == "entry"
	}
	return false
}
