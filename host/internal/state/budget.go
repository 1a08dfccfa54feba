package state

import (
	"errors"
	"fmt"
)

// A task's budget on disk (SetDiskBudget) bounds what a plugin can make one
// task keep: every store of the task, its time store (timers, stream time)
// included. It is checked when a write is staged, against what the task
// holds on disk by Pebble's estimate of its key range (compressed sstables;
// EstimateDiskUsage reads only the LSM's metadata) plus every byte written
// since that estimate, staged or applied: a Put that would go past it fails
// with a *DiskBudgetError (ErrDiskBudget; the engine gives the plugin
// ELIMIT). The estimate is taken again, at most once per commit window,
// when the sum reaches the budget: what a compaction reclaimed (overwritten
// values, deleted keys) counts from then on. Bytes applied since the last
// estimate still count after it up to two memtables (Pebble's estimate does
// not see unflushed writes), and a key written twice in a window counts
// twice, so the check errs high by at most two memtables and the current
// window's writes, never low. Deletes are never refused: they are how a task gets back under.
// Restores (ApplyRestored) and wipes are not held to it: they write what
// was committed.

// ErrDiskBudget is matched by every *DiskBudgetError.
var ErrDiskBudget = errors.New("state: task over its disk budget")

// DiskBudgetError is a write refused because the task's stores would hold
// more than its disk budget.
type DiskBudgetError struct {
	Task   string // processor/topic/partition
	Store  string
	Used   int64 // bytes the task holds by the estimate, with what it staged
	Size   int   // bytes of the refused write
	Budget int64
}

func (e *DiskBudgetError) Error() string {
	return fmt.Sprintf("state: task %s store %q: a write of %d bytes would take the task's stores past their disk budget: %d of %d bytes used (limits.state_disk)",
		e.Task, e.Store, e.Size, e.Used, e.Budget)
}

// Is makes errors.Is(err, ErrDiskBudget) true.
func (e *DiskBudgetError) Is(target error) bool { return target == ErrDiskBudget }

// diskBudget is a task's account of its bytes on disk.
type diskBudget struct {
	budget   int64 // bytes; <= 0: no budget
	measured bool  // base is an estimate of this handle's
	base     int64 // the task's range on disk, by Pebble's estimate
	// applied counts the bytes of commit windows applied since the
	// estimate, staged the commit window's and record the current
	// record's.
	applied, staged, record int64
	// reestimated is set when the estimate was taken in this window.
	reestimated bool
}

// SetDiskBudget bounds the bytes the task's stores may hold on disk; 0 or
// less removes the bound.
func (t *Task) SetDiskBudget(n int64) { t.disk.budget = n }

// chargeDisk accounts for a write of n bytes to s in the current record, or
// refuses it.
func (t *Task) chargeDisk(s *store, n int) error {
	d := &t.disk
	if d.budget <= 0 {
		return nil
	}
	if !d.measured || (!d.reestimated && d.used()+int64(n) > d.budget) {
		if err := t.estimateDisk(); err != nil {
			return err
		}
	}
	if used := d.used(); used+int64(n) > d.budget {
		return &DiskBudgetError{Task: t.String(), Store: s.name, Used: used, Size: n, Budget: d.budget}
	}
	d.record += int64(n)
	return nil
}

func (d *diskBudget) used() int64 { return d.base + d.applied + d.staged + d.record }

// estimateDisk takes Pebble's estimate of the task's range on disk again.
func (t *Task) estimateDisk() error {
	d := &t.disk
	n, err := t.db.pdb.EstimateDiskUsage(t.prefix, t.end)
	if err != nil {
		return fmt.Errorf("state: task %s: estimating its size on disk: %w", t, err)
	}
	d.base, d.measured, d.reestimated = int64(n), true, true
	d.applied = min(d.applied, 2*int64(t.db.memTable)) // what may be unflushed
	return nil
}

// recordEnded moves the record's bytes to the window (ok) or drops them.
func (d *diskBudget) recordEnded(ok bool) {
	if ok {
		d.staged += d.record
	}
	d.record = 0
}

// windowEnded moves the window's bytes to the applied ones (ok) or drops
// them (the window was discarded).
func (d *diskBudget) windowEnded(ok bool) {
	if ok {
		d.applied += d.staged
	}
	d.staged, d.record, d.reestimated = 0, 0, false
}
