// Package state keeps the stores of wasmstream tasks in Pebble: the host
// opens one database per stateful processor (and one for the global
// tables) in the app's state directory (host/statedb.go), so that a disk that
// fails one database stops only its processor (failure.go). It knows
// nothing of Wasm or Kafka: the engine reads and writes a Task through
// Get/Put/Delete/Scan, the runner stages and commits those writes
// (CommitRecord, Dirty, Apply), and the restorer fills stores from their
// changelogs (ApplyRestored, Wipe).
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
//   - No write waits without bound: every Pebble write runs under
//     Options.WriteTimeout, and a write the disk refuses or does not answer
//     fails the database (failure.go) until Recover.
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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures Open. The zero value is usable.
type Options struct {
	// Name says what the database holds, for its errors (such as
	// `processor "counter"`); "" names only its directory.
	Name string
	// FS is the file system; nil means the operating system's. Tests use
	// vfs.NewMem or vfs.NewCrashableMem, and vfs/errorfs to fail it.
	FS vfs.FS
	// Shared is the block cache and open-file cache the database shares
	// with the process's others; nil gives it its own, of BlockCacheBytes.
	Shared *Shared
	// BlockCacheBytes is Pebble's block cache when Shared is nil. 0 means
	// 64 MiB.
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
	// WriteTimeout bounds every write to Pebble (a commit window, a
	// restored batch, a wipe, a log sync; opening and closing): a write
	// not done by then fails with CauseTimeout, and the database with it
	// (failure.go). 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// DiskReserveBytes is the free space a write must leave on the file
	// system: a write that would leave less fails with CauseNoSpace, and
	// the database with it (failure.go: Pebble must keep room to finish
	// its own writes). 0 means the larger of DefaultDiskReserve and eight
	// memtables; negative never checks.
	DiskReserveBytes int64
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

// DefaultWriteTimeout is Options.WriteTimeout's default. A healthy write
// takes milliseconds (a commit window's batch, a restored batch's sstables
// and their sync); ten seconds leaves room for a slow network disk and a
// burst of Pebble's write stall, and keeps a stuck disk from holding a
// processor, or a stop, for longer.
const DefaultWriteTimeout = 10 * time.Second

// DefaultDiskReserve is the least of Options.DiskReserveBytes's default:
// room for Pebble to flush its memtables (two of 8 MiB), preallocate a new
// write-ahead log (1.1 memtables) and rewrite its manifest, with a margin.
const DefaultDiskReserve = 64 << 20

const (
	defaultBlockCache  = 64 << 20
	defaultMemTable    = 8 << 20
	defaultRecordCache = DefaultRecordCacheBytes
	defaultIngest      = 1 << 20
)

// Shared is what the databases of one process share: Pebble's block cache
// and its cache of open files, so that a database per processor costs no
// more cache memory or file handles than one for all. Each database keeps
// its own reference while it is open.
type Shared struct {
	cache *pebble.Cache
	files *pebble.FileCache
}

// NewShared makes the caches the databases of a process share: a block
// cache of cacheBytes (0: 64 MiB) and Pebble's default open-file cache
// (about 1,000 files). Close releases the caller's reference.
func NewShared(cacheBytes int64) *Shared {
	if cacheBytes <= 0 {
		cacheBytes = defaultBlockCache
	}
	return &Shared{
		cache: pebble.NewCache(cacheBytes),
		files: pebble.NewFileCache(runtime.GOMAXPROCS(0), pebble.FileCacheSize(1000)),
	}
}

// Close releases the caller's reference to the caches; the databases that
// use them release theirs when they close.
func (s *Shared) Close() {
	s.files.Unref()
	s.cache.Unref()
}

// DB is one state database: the stores of one processor's tasks, or the
// global tables. Its methods are safe for concurrent use; each Task it
// hands out is used by one goroutine at a time.
type DB struct {
	pdb    *pebble.DB // replaced only by Recover, when no handle is in use
	popts  *pebble.Options
	lock   *pebble.Lock
	shared *Shared // the caches Pebble uses; the DB holds a reference
	fs     vfs.FS
	dir    string
	name   string // Options.Name
	log    *slog.Logger
	wopts  *pebble.WriteOptions
	cache  int // per-task record cache budget; <= 0 disables

	memTable     uint64
	reserve      int64 // DiskReserveBytes; <= 0: not checked
	writeTimeout time.Duration
	syncInterval time.Duration // <= 0: no interval syncer

	ingestMin int    // ApplyRestored batch size from which it ingests; <= 0 never
	ingestDir string // where sstables are written before they are ingested
	ingestSeq atomic.Uint64

	closed atomic.Bool

	// failure is the database's failure since it was opened or recovered
	// (nil: healthy); failures counts them by cause, ever; stuck is set
	// when a failed database could not be closed (failure.go).
	failure  atomic.Pointer[WriteError]
	failures [NumCauses]atomic.Int64
	stuck    atomic.Bool

	// life serializes Close and Recover, which replace or close pdb;
	// pclosed is closed when the close of pdb in flight returns, with
	// pcloseErr (closePebble).
	life      sync.Mutex
	pclosed   chan struct{}
	pcloseErr error

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
// files or an unknown key layout), a *WriteError (the disk refused or did
// not answer within the write timeout), or a wrapped Pebble error.
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

	writeTimeout := opts.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	lock, ingestDir, err := prepare(fs, dir, writeTimeout)
	if err != nil {
		return nil, err
	}

	shared := opts.Shared
	if shared == nil {
		shared = NewShared(opts.BlockCacheBytes)
		defer shared.Close() // the DB holds its own references
	}
	shared.cache.Ref()
	shared.files.Ref()
	db := &DB{
		lock:         lock,
		shared:       shared,
		fs:           fs,
		dir:          dir,
		name:         opts.Name,
		log:          log,
		wopts:        pebble.NoSync,
		memTable:     opts.MemTableBytes,
		writeTimeout: writeTimeout,
		syncInterval: opts.SyncInterval,
		tasks:        map[string]*Task{},
		ingestMin:    opts.IngestRestoredBytes,
		ingestDir:    ingestDir,
	}
	// A write the file system refuses for want of space fails the database
	// at once, whichever of Pebble's writes it was (its write-ahead log is
	// written in the background, and a failed flush is retried): from then
	// on nothing more is written to it.
	db.fs = vfs.OnDiskFull(fs, func() {
		db.fail("a write of Pebble's own (its log, a flush or a compaction)", &os.SyscallError{Syscall: "write", Err: syscall.ENOSPC})
	})
	if db.memTable == 0 {
		db.memTable = defaultMemTable
	}
	db.reserve = opts.DiskReserveBytes
	if db.reserve == 0 {
		db.reserve = max(DefaultDiskReserve, 8*int64(db.memTable))
	}
	if db.syncInterval == 0 {
		db.syncInterval = DefaultSyncInterval
	}
	if db.ingestMin == 0 {
		db.ingestMin = defaultIngest
	}
	if opts.Sync {
		db.wopts = pebble.Sync
		db.syncInterval = -1
	}
	switch {
	case opts.RecordCacheBytes == 0:
		db.cache = defaultRecordCache
	case opts.RecordCacheBytes > 0:
		db.cache = opts.RecordCacheBytes
	}
	if err := db.open(); err != nil {
		db.releaseShared()
		if db.stuck.Load() {
			// The lock goes when the Pebble that did not answer has.
			go func(closed <-chan struct{}) {
				<-closed
				_ = lock.Close()
			}(db.pclosed)
			return nil, err
		}
		_ = lock.Close()
		return nil, err
	}
	db.startSyncer()
	return db, nil
}

// prepare makes dir usable and locks it, within the write timeout (a
// stalled disk must not hold a process that starts): it returns the lock
// and the (emptied) directory for sstables made for ingestion.
func prepare(fs vfs.FS, dir string, timeout time.Duration) (*pebble.Lock, string, error) {
	type prepared struct {
		lock      *pebble.Lock
		ingestDir string
		err       error
	}
	ch := make(chan prepared, 1)
	go func() {
		var p prepared
		p.lock, p.ingestDir, p.err = prepareDir(fs, dir)
		ch <- p
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case p := <-ch:
		return p.lock, p.ingestDir, p.err
	case <-timer.C:
		go func() { // nobody waits: unlock if it ever locks
			if p := <-ch; p.lock != nil {
				_ = p.lock.Close()
			}
		}()
		return nil, "", &WriteError{What: "preparing the directory", Dir: dir, Cause: CauseTimeout,
			Err: fmt.Errorf("%w within %s (state.write_timeout)", errWriteTimeout, timeout)}
	}
}

func prepareDir(fs vfs.FS, dir string) (*pebble.Lock, string, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("%w: cannot create %s: %w", ErrDirUnusable, dir, err)
	}
	// Pebble would fail later with a less obvious message; probe first.
	probe := fs.PathJoin(dir, ".wasmstream-write-probe")
	f, err := fs.Create(probe, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s is not writable: %w", ErrDirUnusable, dir, err)
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
		return nil, "", fmt.Errorf("%w: %s is %s: %w", ErrLocked, dir, who, err)
	}

	// Sstables made for ingestion are written beside the database, on the
	// same file system (Ingest hard-links them in); any left there belong to
	// ingests a crash interrupted, which never happened.
	ingestDir := fs.PathJoin(dir, ingestDirName)
	if err := fs.RemoveAll(ingestDir); err != nil {
		_ = lock.Close()
		return nil, "", fmt.Errorf("%w: cannot clear %s: %w", ErrDirUnusable, ingestDir, err)
	}
	if err := fs.MkdirAll(ingestDir, 0o755); err != nil {
		_ = lock.Close()
		return nil, "", fmt.Errorf("%w: cannot create %s: %w", ErrDirUnusable, ingestDir, err)
	}

	return lock, ingestDir, nil
}

// open opens Pebble on the database's directory, under the write timeout
// (Open writes a new write-ahead log and manifest), and checks the key
// layout. A Pebble that opens after the timeout is closed again.
func (db *DB) open() error {
	db.popts = db.pebbleOptions()
	type opened struct {
		pdb *pebble.DB
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		var o opened
		defer func() {
			if r := recover(); r != nil {
				o.err = panicError(r)
			}
			ch <- o
		}()
		o.pdb, o.err = pebble.Open(db.dir, db.popts)
	}()
	timer := time.NewTimer(db.writeTimeout)
	defer timer.Stop()
	var o opened
	select {
	case o = <-ch:
	case <-timer.C:
		// Nobody waits for this Pebble: it is closed if it ever opens, and
		// until then the database is stuck (closePebble waits for it).
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			if late := <-ch; late.pdb != nil {
				_ = late.pdb.Close()
			}
		}()
		db.pclosed, db.pcloseErr = closed, nil
		db.stuck.Store(true)
		return db.fail("opening the database", fmt.Errorf("%w within %s (state.write_timeout)", errWriteTimeout, db.writeTimeout))
	}
	if err := o.err; err != nil {
		switch {
		case pebble.IsCorruptionError(err):
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, db.dir, err)
		case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EIO):
			return db.fail("opening the database", err)
		}
		return fmt.Errorf("state: opening %s: %w", db.dir, err)
	}
	db.pdb = o.pdb
	if err := db.checkFormat(); err != nil {
		_ = db.closePebble(db.writeTimeout)
		return err
	}
	return nil
}

// pebbleOptions are the options of one Pebble open (Pebble keeps and
// changes what it is given, so every open gets its own).
func (db *DB) pebbleOptions() *pebble.Options {
	logger := pebbleLogger{log: db.log, fatal: db.pebbleFatal}
	events := pebble.MakeLoggingEventListener(logger)
	// A failed flush or compaction fails the database: Pebble would retry
	// it forever, logging each time, while its memtables fill.
	events.BackgroundError = func(err error) {
		if db.failure.Load() == nil {
			db.fail("Pebble's background work (a flush or a compaction)", err)
		}
	}
	events.DataCorruption = func(info pebble.DataCorruptionInfo) {
		db.fail("reading "+info.Path, fmt.Errorf("%w: %v", ErrCorrupt, info.Details))
	}
	events.DiskSlow = func(info pebble.DiskSlowInfo) {
		db.log.Warn("state: the disk is slow: " + info.String())
	}
	events.LowDiskSpace = func(info pebble.LowDiskSpaceInfo) {
		db.log.Warn("state: the disk is nearly full: " + info.String())
	}
	o := &pebble.Options{
		FS:            db.fs,
		Lock:          db.lock,
		Cache:         db.shared.cache,
		FileCache:     db.shared.files,
		MemTableSize:  db.memTable,
		Logger:        logger,
		EventListener: &events,
	}
	o.EnsureDefaults()
	return o
}

// pebbleFatal is told of Pebble's fatal errors (pebbleLogger.Fatalf).
func (db *DB) pebbleFatal(err error) { db.fail("Pebble", err) }

func (db *DB) startSyncer() {
	if db.syncInterval > 0 {
		db.syncStop, db.syncDone = make(chan struct{}), make(chan struct{})
		go db.syncLoop(db.syncInterval)
	}
}

// stopSyncer stops the syncer and waits for it: at most the write timeout
// (the sync it may be running).
func (db *DB) stopSyncer() {
	if db.syncStop != nil {
		close(db.syncStop)
		<-db.syncDone
		db.syncStop, db.syncDone = nil, nil
	}
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
// batch committed before it durable. A failed database is not synced.
func (db *DB) syncLoop(interval time.Duration) {
	defer close(db.syncDone)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	pdb := db.pdb
	for {
		select {
		case <-db.syncStop:
			return
		case <-tick.C:
		}
		if db.failure.Load() != nil || !db.unsynced.Swap(false) {
			continue
		}
		if err := db.write("syncing the write-ahead log", 0, func() error { return pdb.LogData(nil, pebble.Sync) }); err != nil {
			continue // the database failed: logged by fail
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
		pdb := db.pdb
		return db.write("writing the format marker", 1, func() error {
			return pdb.Set(formatKey, []byte{layoutVersion}, pebble.Sync)
		})
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

// closePebble closes Pebble, waiting at most wait for it. A close that
// does not return in time (a write stuck in the file system holds Pebble's
// commit pipeline, which Close needs) goes on in the background, and the
// database is stuck (ErrStuck) until it returns: its directory stays
// locked, and a later closePebble waits for that same close.
func (db *DB) closePebble(wait time.Duration) error {
	if db.pclosed == nil && db.pdb == nil {
		return nil // closed already
	}
	if db.pclosed == nil {
		pdb, ch := db.pdb, make(chan struct{})
		db.pclosed, db.pcloseErr = ch, nil
		go func() {
			defer close(ch)
			defer func() {
				if r := recover(); r != nil {
					db.pcloseErr = panicError(r)
				}
			}()
			db.pcloseErr = pdb.Close()
		}()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-db.pclosed:
		db.pclosed, db.pdb = nil, nil
		db.stuck.Store(false)
		if err := db.pcloseErr; err != nil && db.failure.Load() == nil {
			return fmt.Errorf("state: closing %s: %w", db.dir, err)
		}
		return nil // a failed database's close error is its failure's
	case <-timer.C:
		db.stuck.Store(true)
		return fmt.Errorf("%w: %s did not close within %s: a write is stuck in the file system (restart the process to open it again)", ErrStuck, db.dir, wait)
	}
}

// Close closes every Task handle and the database, and releases the
// directory lock. Scan iterators must be closed first. Close is idempotent.
// It returns within twice the write timeout (a sync in flight, then
// Pebble's close), and at once for a database that failed because a write
// did not answer (that write holds what Pebble's close needs): ErrStuck,
// its directory stays locked until the process ends.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.life.Lock()
	defer db.life.Unlock()
	db.closeHandles()
	db.stopSyncer()
	wait := db.writeTimeout
	if f := db.failure.Load(); f != nil && f.Cause == CauseTimeout {
		wait = 0
	}
	err := db.closePebble(wait)
	if db.stuck.Load() {
		// The lock is released when the stuck close returns, if ever.
		go func(closed <-chan struct{}, lock *pebble.Lock) {
			<-closed
			_ = lock.Close()
		}(db.pclosed, db.lock)
	} else if lerr := db.lock.Close(); err == nil && lerr != nil {
		err = fmt.Errorf("state: closing %s: %w", db.dir, lerr)
	}
	db.releaseShared()
	return err
}

// releaseShared drops the database's references to the shared caches.
func (db *DB) releaseShared() {
	if db.shared != nil {
		db.shared.files.Unref()
		db.shared.cache.Unref()
		db.shared = nil
	}
}

// closeHandles closes every Task handle: their methods return ErrClosed.
func (db *DB) closeHandles() {
	db.mu.Lock()
	for k, t := range db.tasks {
		t.closed.Store(true)
		delete(db.tasks, k)
	}
	db.mu.Unlock()
}

// Recover reopens a failed database: Pebble is closed and opened again on
// the same directory (under the same lock), which replays its write-ahead
// log to the last write that reached the disk, and the failure is cleared.
// A healthy database is left as it is. No handle of the database may be in
// use: the ones made before are closed (their methods return ErrClosed).
// A database whose failed write is still stuck cannot be reopened
// (ErrStuck; a later Recover tries again); one whose disk still refuses
// writes fails again (a *WriteError). ctx bounds the caller's wait; the
// reopen itself takes at most twice the write timeout.
func (db *DB) Recover(ctx context.Context) error {
	if db.failure.Load() == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- db.reopen() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (db *DB) reopen() error {
	db.life.Lock()
	defer db.life.Unlock()
	if db.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	failed := db.failure.Load()
	if failed == nil {
		return nil // recovered meanwhile
	}
	db.closeHandles()
	db.stopSyncer()
	if err := db.closePebble(db.writeTimeout); err != nil {
		return err
	}
	db.failure.Store(nil)
	if err := db.open(); err != nil {
		db.failure.CompareAndSwap(nil, failed) // still failed, for the same reason
		return err
	}
	if err := db.checkSpace(0); err != nil {
		return db.fail("reopening the database", err) // the disk is still full
	}
	db.startSyncer()
	db.log.Info("state: the database was reopened after its failure", "failure", failed.Error())
	return nil
}

// Dir is the database's directory.
func (db *DB) Dir() string { return db.dir }

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
type pebbleLogger struct {
	log *slog.Logger
	// fatal, if set, is told of a fatal error before Fatalf ends its
	// goroutine (it fails the database).
	fatal func(error)
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on errors it does not survive (a failed
// commit or MANIFEST write: a disk that refuses writes) and on broken
// invariants; it must not return. On a goroutine of Pebble's own (a flush,
// a compaction) it fails the database and ends the goroutine, whose
// deferred unlocks run: one database stops taking writes, and the process
// and its other databases go on (the database may then not close: Recover
// reports ErrStuck). Elsewhere it panics: on the goroutine of a guarded
// write (DB.write) the panic is that write's error.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := &fatalError{msg: "pebble: " + fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok {
			err.cause = e // for causeOf: "no space left" is in it
			break
		}
	}
	l.log.Error(err.msg)
	if l.fatal != nil {
		l.fatal(err)
		if onPebbleGoroutine() {
			runtime.Goexit()
		}
	}
	panic(err)
}

// fatalError is a Pebble fatal error, with the error it names, if any.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }
