package runner

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// window is one task's commit window: what the task processed since its last
// commit point, and where its input and changelogs stand. It decides I1 and
// I5 for the task: the offset a commit point commits is next, which only a
// processed (or policy-handled) record moves, and a record the task did not
// finish is fetched again from stoppedAt.
//
// Its fields change only through the methods below (the shape of franz-go's
// uncommit{dirty, head, committed}); no other file reads or writes them.
// Offsets use -1 for "none". A window is used by one goroutine at a time,
// like its task: the processing goroutine during a poll, the loop between
// polls. The changelog positions are the exception: produce promises set
// them concurrently, hence atomics.
//
// Transitions:
//
//	take(o)        a record at o is about to run: start = o if the window was empty
//	processed(o)   it finished (or its failure was handled): next = o+1, dirty
//	failed(o)      it failed under on_error: fail: failedAt = stoppedAt = o
//	stopAt(o)      the batch stopped before o (cancel, restoring): stoppedAt = o
//	takeStop()     the loop rewinds to stoppedAt and clears it
//	committed()    a commit point committed next: dirty and start cleared
//	aborted()      the work was dropped (abort): next, dirty, start and the
//	               changelog positions cleared; the consumer re-delivers
//	rewound()      at_least_once rollback: rewind to start; next, dirty, start cleared
type window struct {
	// start is the offset of the first record taken since the last commit
	// point (-1: none): where an at_least_once rollback rewinds to.
	start int64
	// next is the offset after the last processed record: the offset to
	// commit (-1: nothing processed since the task started or last aborted).
	next  int64
	epoch int32 // leader epoch of the record before next
	dirty bool  // next moved since the last commit

	// failedAt is the offset of the record that stopped the task under
	// on_error: fail (-1: none); next stays there.
	failedAt int64
	// stoppedAt is the offset of the first record of the current batch the
	// task did not finish (-1: it finished them all).
	stoppedAt int64

	// end is the end of the partition (its last stable offset) as of the
	// latest fetch (-1: unknown); fetchEnd the offset after the latest
	// fetched record (-1: none yet).
	end      int64
	fetchEnd int64

	// changelog[i] is the offset after the last changelog record of store i
	// acknowledged since the last commit point (-1: none); set by produce
	// promises, taken after the flush that acknowledged them.
	changelog []atomic.Int64
}

// newWindow returns the empty window of a task with stores changelogs.
func newWindow(stores int) window {
	w := window{start: -1, next: -1, failedAt: -1, stoppedAt: -1, end: -1, fetchEnd: -1}
	if stores > 0 {
		w.changelog = make([]atomic.Int64, stores)
		for i := range w.changelog {
			w.changelog[i].Store(-1)
		}
	}
	return w
}

// take reports whether the record at offset must run: false for a record
// already processed (fetched again after a rewind). A record that runs opens
// the window if it was empty.
func (w *window) take(offset int64) bool {
	if w.next >= 0 && offset < w.next {
		return false
	}
	if w.start < 0 {
		w.start = offset
	}
	return true
}

// processed moves the commit position past the record at offset: it
// succeeded, or its failure was handled by the skip or dead-letter policy.
func (w *window) processed(offset int64, epoch int32) {
	w.next = offset + 1
	w.epoch = epoch
	w.dirty = true
}

// failed stops the task at the record at offset (on_error: fail): the commit
// position stays before it and the batch's rest is fetched again from it.
func (w *window) failed(offset int64) {
	w.failedAt = offset
	w.stoppedAt = offset
}

// stopAt marks offset as the first record of the batch the task did not
// finish.
func (w *window) stopAt(offset int64) { w.stoppedAt = offset }

// stopAtFailure marks the failed record as where the batch stopped: a
// stopped task never counts a record past it.
func (w *window) stopAtFailure() { w.stoppedAt = w.failedAt }

// takeStop returns where the batch stopped, if it did, and clears it: the
// caller rewinds the consumer there.
func (w *window) takeStop() (int64, bool) {
	at := w.stoppedAt
	if at < 0 {
		return 0, false
	}
	w.stoppedAt = -1
	return at, true
}

// fetched records the offset after the batch's last fetched record.
func (w *window) fetched(lastOffset int64) { w.fetchEnd = lastOffset + 1 }

// fetchedEnd is the offset after the latest fetched record (-1: none).
func (w *window) fetchedEnd() int64 { return w.fetchEnd }

// sawEnd records the partition's last stable offset from a fetch (ignored
// when the fetch did not say: negative).
func (w *window) sawEnd(lso int64) {
	if lso >= 0 {
		w.end = lso
	}
}

// lag updates the partition end from a fetch (end: its last stable offset,
// -1 if it did not say; fetched: the offset after its last record, -1 if it
// had none) and returns the lag: the end minus the commit position, or minus
// the fetched end when nothing is processed yet. ok is false while either
// is unknown.
func (w *window) lag(end, fetched int64) (lag int64, ok bool) {
	w.sawEnd(end)
	if fetched > w.end {
		w.end = fetched
	}
	pos := w.next
	if pos < 0 {
		pos = fetched
	}
	if pos < 0 || w.end <= 0 {
		return 0, false
	}
	return max(w.end-pos, 0), true
}

// commitOffset is the offset a commit point commits for the task, if the
// window moved it since the last commit.
func (w *window) commitOffset() (kgo.EpochOffset, bool) {
	if !w.dirty {
		return kgo.EpochOffset{}, false
	}
	return kgo.EpochOffset{Epoch: w.epoch, Offset: w.next}, true
}

// committed closes the window at a commit point that committed it (or had
// nothing of it to commit): the next record opens a new one.
func (w *window) committed() {
	w.dirty = false
	w.start = -1
}

// aborted drops the window's work: the transaction holding it aborted and
// the consumer re-delivers from the committed offset, so no record counts as
// processed and no changelog record as acknowledged.
func (w *window) aborted() {
	for i := range w.changelog {
		w.changelog[i].Store(-1)
	}
	w.next = -1
	w.dirty = false
	w.start = -1
}

// rewound drops the window's offsets for an at_least_once rollback and
// returns where the consumer must fetch again: the window's first record.
// ok is false for an empty window (nothing to rewind).
func (w *window) rewound() (from int64, ok bool) {
	if w.start < 0 {
		return 0, false
	}
	from = w.start
	w.start = -1
	w.next = -1
	w.dirty = false
	return from, true
}

// changelogAcked records that store's changelog record at offset was
// acknowledged. Safe for concurrent use (produce promises).
func (w *window) changelogAcked(store int, offset int64) {
	next := &w.changelog[store]
	for {
		cur := next.Load()
		if offset+1 <= cur || next.CompareAndSwap(cur, offset+1) {
			return
		}
	}
}

// takeCheckpoints returns, by store, the offset after the last acknowledged
// changelog record of the window (stores with none are absent) and clears
// them: the checkpoints written with the window's state.
func (w *window) takeCheckpoints() map[int]int64 {
	checkpoints := map[int]int64{}
	for i := range w.changelog {
		if next := w.changelog[i].Swap(-1); next >= 0 {
			checkpoints[i] = next
		}
	}
	return checkpoints
}
