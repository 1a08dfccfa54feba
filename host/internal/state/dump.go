package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNoDatabase: the directory holds no state database (nothing ran there
// with this app, or it is the wrong directory). Returned by OpenReadOnly.
var ErrNoDatabase = errors.New("state: no state database")

// Reader reads a state directory for debugging tools (`wasmstream state
// dump`) without writing to it: Pebble is opened read-only (no flush, no
// compaction, no WAL recycling), and the directory lock is held while it is
// open, so no wasmstream process can write underneath it. The only file it
// touches is Pebble's LOCK file, always empty, which locking opens with
// O_CREATE|O_TRUNC (its mtime moves).
type Reader struct {
	pdb  *pebble.DB
	dir  string
	lock *pebble.Lock
}

// StoreInfo is one store of one task found in a state directory.
type StoreInfo struct {
	Processor string
	Partition int32
	Store     string
	// Checkpoint is the next changelog offset to restore: the store holds
	// the effect of every changelog record below it. Valid when
	// HasCheckpoint; a store without one (never restored, or wiped) is
	// restored from the changelog's start.
	Checkpoint    int64
	HasCheckpoint bool
	// HasData is set when the store holds at least one key.
	HasData bool
}

// OpenReadOnly opens the state database in dir without writing to it.
//
// Errors: ErrNoDatabase (dir or the database in it does not exist),
// ErrLocked (a wasmstream process, or an open DB in this one, uses it),
// ErrDirUnusable (the lock file cannot be created: permissions),
// ErrCorrupt (damaged files or an unknown key layout).
func OpenReadOnly(dir string, log *slog.Logger) (*Reader, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoDatabase, dir)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrDirUnusable, dir, err)
	case !st.IsDir():
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNoDatabase, dir)
	}
	// Refuse a directory that is not a Pebble database before locking it:
	// locking creates a LOCK file, which must not appear in, say, the
	// parent state directory given by mistake.
	if ok, err := hasManifest(dir); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDirUnusable, dir, err)
	} else if !ok {
		return nil, fmt.Errorf("%w: %s holds no Pebble database", ErrNoDatabase, dir)
	}

	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			// Creating the LOCK file failed: not a lock conflict.
			return nil, fmt.Errorf("%w: %s: cannot create its lock file: %w", ErrDirUnusable, dir, err)
		}
		return nil, fmt.Errorf("%w: %s is in use (%w)", ErrLocked, dir, err)
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	pdb, err := pebble.Open(dir, &pebble.Options{
		FS:       vfs.Default,
		Lock:     lock,
		Cache:    cache,
		ReadOnly: true,
		Logger:   pebbleLogger{log: log.With("component", "state", "dir", dir)},
	})
	if err != nil {
		_ = lock.Close()
		switch {
		case errors.Is(err, pebble.ErrDBDoesNotExist):
			return nil, fmt.Errorf("%w: %s holds no Pebble database", ErrNoDatabase, dir)
		case pebble.IsCorruptionError(err):
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, dir, err)
		}
		return nil, fmt.Errorf("state: opening %s read-only: %w", dir, err)
	}
	r := &Reader{pdb: pdb, dir: dir, lock: lock}
	if err := r.checkFormat(); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// hasManifest reports whether dir looks like a Pebble database: it has a
// manifest marker (Pebble v2) or a CURRENT file (older formats).
func hasManifest(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Name() == "CURRENT" || strings.HasPrefix(e.Name(), "marker.manifest.") {
			return true, nil
		}
	}
	return false, nil
}

// checkFormat refuses a database written with another key layout. A
// database without the marker (created and never written) is read as
// version 1: it holds nothing else either.
func (r *Reader) checkFormat() error {
	v, closer, err := r.pdb.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: %s: reading the format marker: %w", r.dir, err)
	}
	defer closer.Close()
	if len(v) != 1 || v[0] != layoutVersion {
		return fmt.Errorf("%w: %s has key layout %x, this version reads %d", ErrCorrupt, r.dir, v, layoutVersion)
	}
	return nil
}

// Dir is the directory read.
func (r *Reader) Dir() string { return r.dir }

// Close closes the database and releases the directory lock. Idempotent.
func (r *Reader) Close() error {
	if r.pdb == nil {
		return nil
	}
	err := r.pdb.Close()
	if lerr := r.lock.Close(); err == nil {
		err = lerr
	}
	r.pdb, r.lock = nil, nil
	return err
}

// Stores lists every store of every task in the database, sorted by
// processor, partition and store. It seeks past each store's values rather
// than reading them, so it is cheap on a large database.
func (r *Reader) Stores() ([]StoreInfo, error) {
	it, err := r.pdb.NewIter(&pebble.IterOptions{
		LowerBound: []byte{taskNamespace},
		UpperBound: []byte{taskNamespace + 1},
	})
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w", r.dir, err)
	}
	defer it.Close()
	byKey := map[string]*StoreInfo{}
	var out []*StoreInfo
	for valid := it.First(); valid; {
		k := it.Key()
		dk, ok := decodeKey(k)
		if !ok {
			return nil, fmt.Errorf("%w: %s: key %x does not follow the key layout", ErrCorrupt, r.dir, k)
		}
		id := fmt.Sprintf("%s\x00%d\x00%s", dk.processor, dk.partition, dk.store)
		info := byKey[id]
		if info == nil {
			info = &StoreInfo{Processor: dk.processor, Partition: dk.partition, Store: dk.store}
			byKey[id] = info
			out = append(out, info)
		}
		if dk.kind == kindCheckpoint {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, fmt.Errorf("state: %s: reading checkpoint of %s/%d store %q: %w", r.dir, dk.processor, dk.partition, dk.store, err)
			}
			cp, err := decodeOffset(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %s/%d store %q: %w", r.dir, dk.processor, dk.partition, dk.store, err)
			}
			info.Checkpoint, info.HasCheckpoint = cp, true
		} else {
			info.HasData = true
		}
		// Next: whatever follows this store's keys of this kind.
		valid = it.SeekGE(prefixEnd(k[:dk.storeEnd]))
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("state: %s: %w", r.dir, err)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Processor != b.Processor {
			return a.Processor < b.Processor
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Store < b.Store
	})
	res := make([]StoreInfo, len(out))
	for i, p := range out {
		res[i] = *p
	}
	return res, nil
}

// Scan calls fn with every key and value of a store of the task processor
// on partition, in key order. key and value are valid only during the call.
// An error from fn stops the scan and is returned.
func (r *Reader) Scan(processor string, partition int32, store string, fn func(key, value []byte) error) error {
	prefix := storePrefix(taskPrefix(processor, partition), kindData, store)
	it, err := r.pdb.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("state: %s: %w", r.dir, err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("state: %s: %s/%d store %q: %w", r.dir, processor, partition, store, err)
		}
		if err := fn(it.Key()[len(prefix):], v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("state: %s: %s/%d store %q: %w", r.dir, processor, partition, store, err)
	}
	return nil
}

// ScanCommitted calls fn with every committed key and value of store in
// every task of processor, by partition and then key, as the database
// holds them: what a commit window staged is not there yet, and a store
// with an expiry has its values behind their stamps (Expiry.Live splits
// them). For a test driver reading stores between its commit points; key
// and value are valid only during the call.
func (db *DB) ScanCommitted(processor, store string, fn func(partition int32, key, value []byte) error) error {
	if db.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	// A task prefix without its partition: prefix-free (keys.go), so the
	// range holds exactly the processor's tasks.
	prefix := taskPrefix(processor, 0)
	prefix = prefix[:len(prefix)-4]
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("state: %s: %w", db.dir, err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		dk, ok := decodeKey(it.Key())
		if !ok {
			return fmt.Errorf("%w: %s: key %x does not follow the key layout", ErrCorrupt, db.dir, it.Key())
		}
		if dk.kind != kindData || dk.store != store {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("state: %s: %s/%d store %q: %w", db.dir, processor, dk.partition, store, err)
		}
		if err := fn(dk.partition, it.Key()[dk.storeEnd:], v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("state: %s: %w", db.dir, err)
	}
	return nil
}

// decodedKey is a task key split by the layout of keys.go.
type decodedKey struct {
	processor string
	partition int32
	kind      byte
	store     string
	storeEnd  int // length of the store prefix (task prefix, kind, store name)
}

// decodeKey splits a key of the task namespace; ok is false for a key that
// does not follow the layout.
func decodeKey(k []byte) (d decodedKey, ok bool) {
	if len(k) == 0 || k[0] != taskNamespace {
		return d, false
	}
	rest := k[1:]
	plen, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) < plen+4+1 {
		return d, false
	}
	rest = rest[n:]
	d.processor = string(rest[:plen])
	rest = rest[plen:]
	d.partition = int32(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	d.kind = rest[0]
	if d.kind != kindCheckpoint && d.kind != kindData {
		return d, false
	}
	rest = rest[1:]
	slen, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) < slen {
		return d, false
	}
	d.store = string(rest[n : n+int(slen)])
	d.storeEnd = len(k) - len(rest) + n + int(slen)
	if d.kind == kindCheckpoint && d.storeEnd != len(k) {
		return d, false // a checkpoint key ends with the store name
	}
	if !bytes.Equal(k[:d.storeEnd], storePrefix(taskPrefix(d.processor, d.partition), d.kind, d.store)) {
		return d, false
	}
	return d, true
}
