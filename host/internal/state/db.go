// Package state keeps the stores of wasmstream tasks in one Pebble database
// per process. It knows nothing of Wasm or Kafka: the engine reads and writes
// a Task through Get/Put/Delete/Scan, the runner stages and commits those
// writes (CommitRecord, Dirty, Apply), and the restorer fills stores from
// their changelogs (ApplyRestored, Wipe).
//
// Invariants this package guarantees by construction:
//
//   - Isolation: a Task reads and writes only inside its own key prefix
//     (processor + partition), and a store only inside its store prefix; see
//     keys.go.
//   - I3, the checkpoint is the store's own: a store's changelog checkpoint
//     is written only by Apply and ApplyRestored, in the same atomic Pebble
//     operation as the data it describes (a batch, or for large restored
//     batches one ingestion of two sstables, see ingest.go), and Wipe
//     deletes data and checkpoints in one batch. A store without a
//     checkpoint (never restored, or wiped) refuses Apply checkpoints
//     (ErrNotRestored), so no offset learned
//     elsewhere (a producer callback, an old commit window) can make a
//     checkpoint claim records the store does not hold.
//   - A failed record leaves nothing (AbortRecord), an aborted transaction
//     leaves nothing (Discard).
//
// Durability: by default Apply and ApplyRestored do not fsync (Options.Sync);
// instead the write-ahead log is synced on a bounded interval
// (Options.SyncInterval, default 1s), by a background goroutine that runs
// only when something was written since its last sync. A crash (SIGKILL,
// power loss) loses at most the batches of the last interval, but only
// whole batches, each with its checkpoint, and a suffix of them: the store
// falls back to an older but consistent (data, checkpoint) pair and restore
// replays only the changelog after it. Without the interval sync a SIGKILL
// alone loses up to the last 32 KiB of the log (Pebble keeps a partly
// filled log block in process memory until a sync asks for it), which for
// a quiet store is every commit since it opened. Wipe always syncs, and so does an ingested restore batch (it is
// durable when ApplyRestored returns; an unsynced batch of another store
// written before it may still be lost, which leaves that store consistent).
package state

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures Open. The zero value is usable.
type Options struct {
	// FS is the file system; nil means the operating system's. Tests use
	// vfs.NewMem or vfs.NewCrashableMem.
	FS vfs.FS
	// BlockCacheBytes is Pebble's block cache, shared by all tasks.
	// 0 means 64 MiB.
	BlockCacheBytes int64
	// MemTableBytes is the size of one Pebble memtable. 0 means 8 MiB: in
	// BenchmarkCounter a larger memtable makes each insert slower (the
	// skiplist holds more versions of the hot keys) more than it saves in
	// flushes (4 MiB: ~1.0 us/record, 32 MiB: ~1.4).
	MemTableBytes uint64
	// RecordCacheBytes bounds each Task's cache of committed values (keys,
	// values and a fixed per-entry overhead). 0 means 16 MiB; negative
	// disables the cache.
	RecordCacheBytes int
	// Sync makes Apply and ApplyRestored wait for the write-ahead log to be
	// synced. Not needed for consistency (see the package doc).
	Sync bool
	// SyncInterval bounds how much committed state a crash can lose when
	// Sync is off: the write-ahead log is synced this long after a write
	// at the latest. 0 means DefaultSyncInterval; negative never syncs on
	// a timer (a crash then loses up to Pebble's unflushed log block).
	SyncInterval time.Duration
	// IngestRestoredBytes is the size (keys and values) from which an
	// ApplyRestored batch is written as sstables and ingested into Pebble
	// instead of going through the write-ahead log and a memtable (see
	// ingest.go). 0 means 1 MiB: in BenchmarkApplyRestored (100-byte
	// values) batches of 0.55 MB take about as long either way, of 1.1 MB
	// about half as long ingested (0.4-0.7 against 0.8 us/record), of 0.22
	// MB twice as long (an ingestion's fixed costs: two files, their syncs,
	// a MANIFEST edit). Negative never ingests.
	IngestRestoredBytes int
	// Logger receives Pebble's messages (its informational ones at Debug).
	// nil means slog.Default().
	Logger *slog.Logger
}

// DefaultRecordCacheBytes is Options.RecordCacheBytes's default: each
// task's cache of committed values (Task.SetCacheBudget).
const DefaultRecordCacheBytes = 16 << 20

// DefaultSyncInterval is Options.SyncInterval's default: a crash loses at
// most a second of commits, whose records restore reads again from the
// changelog; one fsync a second costs nothing measurable next to the
// commits themselves.
const DefaultSyncInterval = time.Second

const (
	defaultBlockCache  = 64 << 20
	defaultMemTable    = 8 << 20
	defaultRecordCache = DefaultRecordCacheBytes
	defaultIngest      = 1 << 20
)

// DB is the process's state database. Its methods are safe for concurrent
// use; each Task it hands out is used by one goroutine at a time.
type DB struct {
	pdb   *pebble.DB
	popts *pebble.Options // as opened, with Pebble's defaults filled in
	lock  *pebble.Lock
	fs    vfs.FS
	dir   string
	log   *slog.Logger
	wopts *pebble.WriteOptions
	cache int // per-task record cache budget; <= 0 disables

	ingestMin int    // ApplyRestored batch size from which it ingests; <= 0 never
	ingestDir string // where sstables are written before they are ingested
	ingestSeq atomic.Uint64

	closed atomic.Bool

	// unsynced is set by every write that did not wait for a sync and
	// cleared by the syncer before it syncs; syncStop ends the syncer,
	// which closes syncDone when it returned.
	unsynced atomic.Bool
	syncStop chan struct{}
	syncDone chan struct{}
	syncs    atomic.Uint64 // interval syncs that wrote something, for tests

	// iters counts the Pebble iterators of scans not yet closed (Open).
	iters atomic.Int64

	mu    sync.Mutex
	tasks map[string]*Task // by task prefix: the current handle of each task
}

// Open counts what the database has open: task handles (each task's
// current one, until it is closed) and the Pebble iterators of scans not
// yet closed (a task's and a table's). A process that moves tasks in and
// out without a leak comes back to the same counts. Safe for concurrent
// use.
func (db *DB) Open() (tasks, iterators int) {
	db.mu.Lock()
	tasks = len(db.tasks)
	db.mu.Unlock()
	return tasks, int(db.iters.Load())
}

// Open opens (creating if needed) the state database in dir. Only one DB
// may be open on a directory at a time, across processes and within one.
//
// Errors: ErrDirUnusable (cannot create or write dir), ErrLocked (another
// process, or an unclosed DB in this one, holds it), ErrCorrupt (damaged
// files or an unknown key layout), or a wrapped Pebble error.
func Open(dir string, opts Options) (*DB, error) {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "state", "dir", dir)

	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: cannot create %s: %w", ErrDirUnusable, dir, err)
	}
	// Pebble would fail later with a less obvious message; probe first.
	probe := fs.PathJoin(dir, ".wasmstream-write-probe")
	f, err := fs.Create(probe, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not writable: %w", ErrDirUnusable, dir, err)
	}
	_ = f.Close()
	_ = fs.Remove(probe)

	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		who := "already open in this process (close that DB first)"
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			// fcntl(F_SETLK) refuses a lock another process holds.
			who = "in use by another process (another wasmstream with the same state.dir?)"
		}
		return nil, fmt.Errorf("%w: %s is %s: %w", ErrLocked, dir, who, err)
	}

	cacheSize := opts.BlockCacheBytes
	if cacheSize <= 0 {
		cacheSize = defaultBlockCache
	}
	memtable := opts.MemTableBytes
	if memtable == 0 {
		memtable = defaultMemTable
	}
	// Sstables made for ingestion are written beside the database, on the
	// same file system (Ingest hard-links them in); any left there belong to
	// ingests a crash interrupted, which never happened.
	ingestDir := fs.PathJoin(dir, ingestDirName)
	if err := fs.RemoveAll(ingestDir); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: cannot clear %s: %w", ErrDirUnusable, ingestDir, err)
	}
	if err := fs.MkdirAll(ingestDir, 0o755); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: cannot create %s: %w", ErrDirUnusable, ingestDir, err)
	}

	cache := pebble.NewCache(cacheSize)
	defer cache.Unref() // Pebble holds its own reference while open
	popts := &pebble.Options{
		FS:           fs,
		Lock:         lock,
		Cache:        cache,
		MemTableSize: memtable,
		Logger:       pebbleLogger{log},
	}
	popts.EnsureDefaults()
	pdb, err := pebble.Open(dir, popts)
	if err != nil {
		_ = lock.Close()
		if pebble.IsCorruptionError(err) {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, dir, err)
		}
		return nil, fmt.Errorf("state: opening %s: %w", dir, err)
	}

	db := &DB{
		pdb:       pdb,
		popts:     popts,
		lock:      lock,
		fs:        fs,
		dir:       dir,
		log:       log,
		wopts:     pebble.NoSync,
		tasks:     map[string]*Task{},
		ingestMin: opts.IngestRestoredBytes,
		ingestDir: ingestDir,
	}
	if db.ingestMin == 0 {
		db.ingestMin = defaultIngest
	}
	if opts.Sync {
		db.wopts = pebble.Sync
	}
	switch {
	case opts.RecordCacheBytes == 0:
		db.cache = defaultRecordCache
	case opts.RecordCacheBytes > 0:
		db.cache = opts.RecordCacheBytes
	}
	if err := db.checkFormat(); err != nil {
		_ = pdb.Close()
		_ = lock.Close()
		return nil, err
	}
	interval := opts.SyncInterval
	if interval == 0 {
		interval = DefaultSyncInterval
	}
	if !opts.Sync && interval > 0 {
		db.syncStop, db.syncDone = make(chan struct{}), make(chan struct{})
		go db.syncLoop(interval)
	}
	return db, nil
}

// wrote records a write that did not wait for the log to be synced.
func (db *DB) wrote() {
	if db.syncStop != nil {
		db.unsynced.Store(true)
	}
}

// syncLoop syncs the write-ahead log every interval when something was
// written since the last sync. LogData(nil, Sync) writes no record: it
// flushes Pebble's pending log block and fsyncs the log, which makes every
// batch committed before it durable.
func (db *DB) syncLoop(interval time.Duration) {
	defer close(db.syncDone)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-db.syncStop:
			return
		case <-tick.C:
		}
		if !db.unsynced.Swap(false) {
			continue
		}
		if err := db.pdb.LogData(nil, pebble.Sync); err != nil {
			// The next write sets unsynced again and the next tick retries;
			// Pebble reports a failing disk through its own errors as well.
			db.log.Error("state: syncing the write-ahead log", "err", err)
			continue
		}
		db.syncs.Add(1)
	}
}

// checkFormat records the key layout version in a new database and refuses
// a database written with another one.
func (db *DB) checkFormat() error {
	v, closer, err := db.pdb.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := db.pdb.Set(formatKey, []byte{layoutVersion}, pebble.Sync); err != nil {
			return fmt.Errorf("state: %s: writing the format marker: %w", db.dir, err)
		}
		return nil
	case err != nil:
		if pebble.IsCorruptionError(err) {
			return fmt.Errorf("%w: %s: reading the format marker: %w", ErrCorrupt, db.dir, err)
		}
		return fmt.Errorf("state: %s: reading the format marker: %w", db.dir, err)
	}
	defer closer.Close()
	if len(v) != 1 || v[0] != layoutVersion {
		return fmt.Errorf("%w: %s has key layout %x, this version reads %d", ErrCorrupt, db.dir, v, layoutVersion)
	}
	return nil
}

// Close closes every Task handle and the database, and releases the
// directory lock. Scan iterators must be closed first. Close is idempotent.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.mu.Lock()
	for k, t := range db.tasks {
		t.closed.Store(true)
		delete(db.tasks, k)
	}
	db.mu.Unlock()
	if db.syncStop != nil {
		close(db.syncStop)
		<-db.syncDone
	}
	err := db.pdb.Close()
	if lerr := db.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("state: closing %s: %w", db.dir, err)
	}
	return nil
}

// Task returns the state of one task: processor on partition, with the
// given stores (store i of the Task is stores[i]; data is keyed by store
// name, so the order may change between runs).
//
// There is one live handle per task: a second call for the same processor
// and partition closes the previous handle (its methods then return
// ErrClosed), so a handle left behind by an earlier assignment can never
// write again. A store list with an empty or duplicated name gives a Task
// whose every method returns ErrInvalidTask.
func (db *DB) Task(processor string, partition int32, stores []string) *Task {
	t := newTask(db, processor, partition, stores)
	if db.closed.Load() {
		t.closed.Store(true)
		return t
	}
	key := string(t.prefix)
	db.mu.Lock()
	if old := db.tasks[key]; old != nil {
		old.closed.Store(true)
	}
	db.tasks[key] = t
	db.mu.Unlock()
	return t
}

func (db *DB) release(t *Task) {
	db.mu.Lock()
	if db.tasks[string(t.prefix)] == t {
		delete(db.tasks, string(t.prefix))
	}
	db.mu.Unlock()
}

// pebbleLogger sends Pebble's log lines to slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on unrecoverable errors; it must not return.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	l.log.Error(msg)
	panic(msg)
}
