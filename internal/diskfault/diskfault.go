// Package diskfault is a file system for tests that fails the way a disk
// does: it wraps a Pebble vfs.FS and, on command, runs out of space past a
// quota of bytes, refuses every write with an errno (ENOSPC, EIO), or stops
// answering writes until told to go on. Refusals and stalls are injected
// through Pebble's own vfs/errorfs; the quota counts the bytes of the files
// written through it.
package diskfault

import (
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FS is a vfs.FS with faults. Its methods are safe for concurrent use.
type FS struct {
	vfs.FS // errorfs over the wrapped file system

	quota atomic.Int64 // bytes the files may hold; <= 0: no quota
	errno atomic.Int64 // nonzero: every write fails with it
	// stall, when not nil, is closed when writes may go on.
	stallMu sync.Mutex
	stall   chan struct{}
	stalled atomic.Int64 // writes waiting in a stall now

	mu    sync.Mutex
	sizes map[string]int64 // bytes of each file written through the FS
	used  int64
}

// New wraps fs.
func New(fs vfs.FS) *FS {
	f := &FS{sizes: map[string]int64{}}
	f.FS = errorfs.Wrap(fs, errorfs.InjectorFunc(f.inject))
	return f
}

// OnDisk is New over the operating system's file system.
func OnDisk() *FS { return New(vfs.Default) }

// SetQuota makes the files written through the FS hold at most n bytes
// (counted from when they were created through it): a write past it fails
// with ENOSPC. 0 removes the quota.
func (f *FS) SetQuota(n int64) { f.quota.Store(n) }

// Fail makes every write (creating, writing, syncing, preallocating a file)
// fail with errno until Clear.
func (f *FS) Fail(errno syscall.Errno) { f.errno.Store(int64(errno)) }

// Stall makes every write wait until Clear.
func (f *FS) Stall() {
	f.stallMu.Lock()
	defer f.stallMu.Unlock()
	if f.stall == nil {
		f.stall = make(chan struct{})
	}
}

// Stalled is how many writes wait in a stall now.
func (f *FS) Stalled() int64 { return f.stalled.Load() }

// Clear ends Fail and Stall (the quota stays).
func (f *FS) Clear() {
	f.errno.Store(0)
	f.stallMu.Lock()
	defer f.stallMu.Unlock()
	if f.stall != nil {
		close(f.stall)
		f.stall = nil
	}
}

// Used is the bytes the files written through the FS hold.
func (f *FS) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used
}

// refused are the operations a full or failing disk refuses: the ones that
// create or grow files, or make them durable (not removing, renaming or
// locking them, which a full disk allows).
func refused(k errorfs.OpKind) bool {
	switch k {
	case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpLink, errorfs.OpMkdirAll,
		errorfs.OpFilePreallocate, errorfs.OpFileWrite, errorfs.OpFileWriteAt,
		errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush:
		return true
	}
	return false
}

// inject is the errorfs injector: stalls, then refusals.
func (f *FS) inject(op errorfs.Op) error {
	if !refused(op.Kind) {
		return nil
	}
	f.stallMu.Lock()
	stall := f.stall
	f.stallMu.Unlock()
	if stall != nil {
		f.stalled.Add(1)
		<-stall
		f.stalled.Add(-1)
	}
	if e := syscall.Errno(f.errno.Load()); e != 0 {
		return &os.PathError{Op: "write", Path: op.Path, Err: e}
	}
	return nil
}

// grow accounts for file path reaching end bytes, or refuses it with
// ENOSPC past the quota.
func (f *FS) grow(path string, end int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := f.sizes[path]
	if end <= size {
		return nil
	}
	if q := f.quota.Load(); q > 0 && f.used+end-size > q {
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	f.used += end - size
	f.sizes[path] = end
	return nil
}

func (f *FS) forget(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used -= f.sizes[path]
	delete(f.sizes, path)
}

func (f *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	f.forget(name) // truncated
	return &quotaFile{File: file, fs: f, path: name}, nil
}

func (f *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	f.rename(oldname, newname)
	return &quotaFile{File: file, fs: f, path: newname}, nil
}

func (f *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	return &quotaFile{File: file, fs: f, path: name}, nil
}

func (f *FS) Remove(name string) error {
	if err := f.FS.Remove(name); err != nil {
		return err
	}
	f.forget(name)
	return nil
}

func (f *FS) RemoveAll(name string) error {
	if err := f.FS.RemoveAll(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, n := range f.sizes {
		if p == name || strings.HasPrefix(p, name+"/") {
			f.used -= n
			delete(f.sizes, p)
		}
	}
	return nil
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.FS.Rename(oldname, newname); err != nil {
		return err
	}
	f.rename(oldname, newname)
	return nil
}

func (f *FS) rename(oldname, newname string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used -= f.sizes[newname]
	if n, ok := f.sizes[oldname]; ok {
		f.sizes[newname] = n
	} else {
		delete(f.sizes, newname)
	}
	delete(f.sizes, oldname)
}

// Unwrap is the errorfs the FS adds its quota to.
func (f *FS) Unwrap() vfs.FS { return f.FS }

// quotaFile counts what is written to it against the FS's quota.
type quotaFile struct {
	vfs.File
	fs   *FS
	path string
	pos  int64 // where Write writes next
}

func (q *quotaFile) Write(p []byte) (int, error) {
	if err := q.fs.grow(q.path, q.pos+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := q.File.Write(p)
	q.pos += int64(n)
	return n, err
}

func (q *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	if err := q.fs.grow(q.path, off+int64(len(p))); err != nil {
		return 0, err
	}
	return q.File.WriteAt(p, off)
}

func (q *quotaFile) Read(p []byte) (int, error) {
	n, err := q.File.Read(p)
	q.pos += int64(n)
	return n, err
}

var _ io.Writer = (*quotaFile)(nil)

// Link counts the link as a file of its own (a hard link holds no more
// bytes, but the original is usually removed right after, as Pebble does
// when it ingests a table).
func (f *FS) Link(oldname, newname string) error {
	if err := f.FS.Link(oldname, newname); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used += f.sizes[oldname] - f.sizes[newname]
	f.sizes[newname] = f.sizes[oldname]
	return nil
}

// GetDiskUsage reports the quota as the disk's size, and what it leaves as
// free; without a quota, the wrapped file system's figures.
func (f *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	q := f.quota.Load()
	if q <= 0 {
		return f.FS.GetDiskUsage(path)
	}
	used := f.Used()
	free := uint64(max(q-used, 0))
	return vfs.DiskUsage{AvailBytes: free, TotalBytes: uint64(q), UsedBytes: uint64(used)}, nil
}
