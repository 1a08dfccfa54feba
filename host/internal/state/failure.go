package state

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// A database whose disk refuses a write (no space, an I/O error) or does
// not answer in time fails as a whole, and stays failed until Recover:
// Pebble cannot be trusted to go on after a failed write (a failed
// write-ahead log write makes its next commit panic; a failed flush is
// retried forever while its memtables fill and every later write waits in
// Pebble's write stall), so nothing more is written to it. Every write
// runs under a deadline (Options.WriteTimeout), so none waits on a stalled
// disk without bound. The host opens one database per stateful processor
// (RATIONALE.md, "State"): a failed database stops the processor that
// wrote to it and no other.

// ErrWriteFailed is matched by every *WriteError.
var ErrWriteFailed = errors.New("state: write failed")

// ErrStuck: a failed database could not be closed in time (a write is still
// stuck in the file system), so it cannot be opened again in this process.
// Restart the process.
var ErrStuck = errors.New("state: database stuck")

// Cause is why a write failed: a label of the store failure metric.
type Cause uint8

const (
	// CauseIO: the file system or Pebble failed the write (EIO, EROFS, a
	// corrupt file, Pebble's own fatal error).
	CauseIO Cause = iota
	// CauseNoSpace: no space left on the device (ENOSPC, or EDQUOT: over
	// a quota).
	CauseNoSpace
	// CauseTimeout: the write did not finish within Options.WriteTimeout
	// (a stalled disk, or Pebble's write stall behind a flush that cannot
	// finish).
	CauseTimeout

	NumCauses
)

var causeLabels = [NumCauses]string{CauseIO: "io", CauseNoSpace: "no_space", CauseTimeout: "timeout"}

// String is the cause's metric label: "io", "no_space" or "timeout".
func (c Cause) String() string {
	if c < NumCauses {
		return causeLabels[c]
	}
	return causeLabels[CauseIO]
}

// phrase is the cause as the error message says it.
func (c Cause) phrase() string {
	switch c {
	case CauseNoSpace:
		return "no space left on the device"
	case CauseTimeout:
		return "the disk did not answer in time"
	}
	return "an I/O error"
}

// errWriteTimeout marks the error of a write that passed its deadline.
var errWriteTimeout = errors.New("no answer")

// WriteError is a write the database could not make, or did not try
// because the database had failed before (Earlier). It names the write
// (the task and its stores, a table, or the database's own work), the
// database's directory and the cause. It matches ErrWriteFailed.
type WriteError struct {
	// What is the write, such as `the commit window of task p/in/0
	// (stores "counts", "time")`.
	What string
	// Dir is the database's directory; Name says what it holds
	// (Options.Name), "" when unnamed.
	Dir   string
	Name  string
	Cause Cause
	// Err is the failure as the file system or Pebble reported it.
	Err error
	// Earlier is set when this write was not tried: the database failed
	// before (Err is that failure's).
	Earlier bool
}

func (e *WriteError) Error() string {
	where := e.Dir
	if e.Name != "" {
		where = e.Name + " in " + e.Dir
	}
	if e.Earlier {
		return fmt.Sprintf("state: %s: not written: the database (%s) failed earlier: %s: %v; %s", e.What, where, e.Cause.phrase(), e.Err, e.Cause.fix())
	}
	return fmt.Sprintf("state: %s: the database (%s) failed: %s: %v; %s", e.What, where, e.Cause.phrase(), e.Err, e.Cause.fix())
}

// fix is what an operator does about a failure of the cause.
func (c Cause) fix() string {
	switch c {
	case CauseNoSpace:
		return "free space on the file system of state.dir (or move state.dir to a larger one): " +
			"the host reopens the database and its processor starts again on its own, restoring from its changelogs what the disk did not keep"
	case CauseTimeout:
		return "the disk did not finish a write within the write timeout: check the disk (or its network mount); " +
			"the host reopens the database once the write returns, and if it never does, restart the process"
	}
	return "check the disk (the kernel log names the device and the error) and the permissions of state.dir: " +
		"the host reopens the database and its processor starts again on its own once the disk takes writes"
}

func (e *WriteError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrWriteFailed) true.
func (e *WriteError) Is(target error) bool { return target == ErrWriteFailed }

// causeOf classifies the error of a failed write.
func causeOf(err error) Cause {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return CauseNoSpace
	case errors.Is(err, errWriteTimeout):
		return CauseTimeout
	}
	return CauseIO
}

// Failure returns the database's failure (nil while it is healthy): the
// first write it could not make since it was opened or recovered. Safe
// for concurrent use.
func (db *DB) Failure() *WriteError { return db.failure.Load() }

// Failures counts the database's failures by cause (indexed by Cause) since
// Open, across Recover: a failure counts once, however many writes it
// refuses. Safe for concurrent use.
func (db *DB) Failures() [NumCauses]int64 {
	var n [NumCauses]int64
	for i := range n {
		n[i] = db.failures[i].Load()
	}
	return n
}

// Stuck reports that the database failed and could not be closed since
// (ErrStuck): only a new process can open its directory again. Safe for
// concurrent use.
func (db *DB) Stuck() bool { return db.stuck.Load() }

// fail records that the write what failed with err and returns its error.
// The first failure fails the database (and is counted and logged); later
// ones only report their own write.
func (db *DB) fail(what string, err error) *WriteError {
	we := &WriteError{What: what, Dir: db.dir, Name: db.name, Cause: causeOf(err), Err: err}
	if db.failure.CompareAndSwap(nil, we) {
		db.failures[we.Cause].Add(1)
		db.log.Error("state: a write failed; the database takes no more writes and its processor stops until it is reopened",
			"cause", we.Cause.String(), "err", we)
	}
	return we
}

// refused is the error of a write not tried because the database failed.
func (db *DB) refused(what string) error {
	f := db.failure.Load()
	if f == nil {
		return nil
	}
	return db.refusal(f, what)
}

// refusal is the error of the write what, not tried because of failure f.
func (db *DB) refusal(f *WriteError, what string) *WriteError {
	return &WriteError{What: what, Dir: db.dir, Name: db.name, Cause: f.Cause, Err: f.Err, Earlier: true}
}

// write runs f, one Pebble write, and waits for it at most the write
// timeout. f runs on a goroutine of its own, so that a write stuck in the
// file system (or in Pebble's write stall) holds neither the caller nor a
// lock of the caller's: past the deadline the write counts as failed and
// the database with it, and f is left to finish or not. f must own what it
// uses (a batch it closes itself, buffers nobody else touches): the caller
// may go on while it runs. A panic in f (Pebble panics when a write-ahead
// log write failed, and its fatal errors panic through pebbleLogger) is the
// write's error. what names the write for the error. A database that
// failed before refuses the write without trying it.
func (db *DB) write(what string, size int, f func() error) error {
	if err := db.refused(what); err != nil {
		return err
	}
	if err := db.checkSpace(size); err != nil {
		return db.fail(what, err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = panicError(r)
			}
			done <- err
		}()
		err = f()
	}()
	timer := time.NewTimer(db.writeTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return db.fail(what, err)
		}
		return nil
	case <-timer.C:
		return db.fail(what, fmt.Errorf("%w within %s (state.write_timeout); the write may still be stuck in the file system", errWriteTimeout, db.writeTimeout))
	}
}

// checkSpace refuses a write of about size bytes when it would leave the
// file system with less free space than the database keeps in reserve
// (Options.DiskReserveBytes): Pebble must never run out of space itself.
// It does not survive that everywhere: a write-ahead log that cannot be
// closed or created when its memtable rotates makes it panic with its lock
// released, which the Go runtime turns into a fatal error no recover can
// catch. So the database fails (no space) while Pebble can still finish
// what it has in flight: flushing its memtables, starting a new log,
// rewriting its manifest. A file system that cannot say (ErrUnsupported)
// is not checked.
//
// A write is charged twice its size: until its memtable is flushed and its
// log deleted, it is on disk twice (in the log and in the flushed
// sstable), and a database whose writes are large must fail while the
// reserve is still whole, not after its flush ate into it: the reserve is
// shared by every database on the file system, and a processor whose
// small writes would fit must not fail for a neighbour's large ones
// (host/smalldisk_test.go on a real 400 MB file system: charged once, the
// healthy processor's database failed beside the filler's).
func (db *DB) checkSpace(size int) error {
	if db.reserve <= 0 {
		return nil
	}
	u, err := db.fs.GetDiskUsage(db.dir)
	if err != nil {
		return nil // unknown; Pebble's own errors still fail the database
	}
	if need := uint64(db.reserve) + 2*uint64(size); u.AvailBytes < need {
		return &spaceError{free: u.AvailBytes, size: size, reserve: db.reserve}
	}
	return nil
}

// spaceError is checkSpace's refusal; it matches syscall.ENOSPC.
type spaceError struct {
	free    uint64
	size    int
	reserve int64
}

func (e *spaceError) Error() string {
	return fmt.Sprintf("%d bytes free on the file system, under twice the %d bytes of this write (its log and its flushed table) and the %d the database keeps free for Pebble's own writes",
		e.free, e.size, e.reserve)
}

func (e *spaceError) Unwrap() error { return syscall.ENOSPC }

// panicError is the error of a recovered panic, wrapping it when it is one.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("pebble panicked: %w", err)
	}
	return fmt.Errorf("pebble panicked: %v", r)
}

// onPebbleGoroutine reports whether the calling goroutine was started by
// Pebble (a flush, a compaction, its write-ahead log writer), which the
// runtime's stack trace says in its last line: "created by
// github.com/cockroachdb/pebble/...".
func onPebbleGoroutine() bool {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	const created = "\ncreated by "
	i := bytes.LastIndex(buf, []byte(created))
	return i >= 0 && bytes.HasPrefix(buf[i+len(created):], []byte("github.com/cockroachdb/pebble/"))
}
