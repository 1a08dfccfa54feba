package runner

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// window is one task's commit window: what the task processed since its last
// commit point, and where its inputs and changelogs stand. It decides I1 and
// I5 for the task through its cursors, one per input partition the task
// reads (one, or partition p of every input of a co-partitioned
// processor): the offset a commit point commits for a partition is its
// cursor's next, which only a processed (or policy-handled) record moves,
// and a record the task did not finish is fetched again from the cursor's
// stoppedAt.
//
// Its fields and its cursors' change only through the methods below (the
// shape of franz-go's uncommit{dirty, head, committed}); no other file reads
// or writes them. Offsets use -1 for "none". A window is used by one
// goroutine at a time, like its task: the processing goroutine during a
// poll, the loop between polls. The changelog positions are the exception:
// produce promises set them concurrently, hence atomics.
//
// A cursor also holds its partition's records fetched but not processed
// yet (held): a batch cut at the commit deadline, or waiting for another
// input, goes on from them after the commit point instead of fetching them
// again. They are dropped whenever the consumer is set back (an abort, a
// rewind, a failure's stop), so a record is never both held and fetched
// again.
//
// Cursor transitions:
//
//	hold(rs)       fetched records join held
//	take(o)        a record at o is about to run: start = o if the cursor was empty
//	processed(o)   it finished (or its failure was handled): next = o+1, dirty
//	failed(o)      it failed under on_error: fail: failedAt = stoppedAt = o
//	stopAt(o)      the batch stopped before o (cancel, restoring): stoppedAt = o
//	takeStop()     the loop rewinds to stoppedAt and clears it, and held
//	committed()    a commit point committed next: dirty and start cleared
//	aborted()      the work was dropped (abort): next, dirty, start, held
//	               cleared; the consumer re-delivers
//	rewound()      at_least_once rollback: rewind to start; next, dirty,
//	               start, held cleared
type window struct {
	// cursors[i] is where the task stands on its i-th input partition.
	cursors []cursor
	// changelog[i] is the offset after the last changelog record of store i
	// acknowledged since the last commit point (-1: none); set by produce
	// promises, taken after the flush that acknowledged them.
	changelog []atomic.Int64
}

// cursor is where a task stands on one of its input partitions.
type cursor struct {
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
	// empty is set when the partition's latest fetch had no record: the
	// consumer was at its end then. waitedOut is set when a task stopped
	// waiting for the partition's records (see task.lagging) and cleared
	// when a fetch next shows the partition.
	empty     bool
	waitedOut bool

	// held are the partition's records fetched and not processed yet, in
	// offset order, and heldBytes their size (heldRecordBytes each): set
	// only by hold and setHeld. heldFull is set while the partition is
	// paused because they were too many or too large (maxHeld,
	// maxHeldBytes) or the task's account could not grant them.
	held      []*kgo.Record
	heldBytes int64
	heldFull  bool
}

// heldRecordOverhead is what a held record costs beyond its key, value and
// headers: the client's record and its slices.
const heldRecordOverhead = 256

// heldRecordBytes is what the host holds for a fetched record until its
// task processed it.
func heldRecordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value) + heldRecordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// setHeld replaces the held records with recs (what is left of them after
// a batch, or none).
func (c *cursor) setHeld(recs []*kgo.Record) {
	c.held, c.heldBytes = recs, 0
	for _, r := range recs {
		c.heldBytes += heldRecordBytes(r)
	}
}

// room is how many of recs (a fetch, in offset order) the cursor can hold
// within maxHeldBytes: at least one when it holds none, so its task moves
// whatever the size of a record.
func (c *cursor) room(recs []*kgo.Record) int {
	bytes := c.heldBytes
	for n, r := range recs {
		bytes += heldRecordBytes(r)
		if bytes > maxHeldBytes && (n > 0 || len(c.held) > 0) {
			return n
		}
	}
	return len(recs)
}

// heldBytes is the size of the records the task's inputs hold.
func (w *window) heldBytes() int64 {
	var n int64
	for i := range w.cursors {
		n += w.cursors[i].heldBytes
	}
	return n
}

// newWindow returns the empty window of a task reading inputs partitions
// with stores changelogs.
func newWindow(inputs, stores int) window {
	w := window{cursors: make([]cursor, inputs)}
	for i := range w.cursors {
		w.cursors[i] = newCursor()
	}
	if stores > 0 {
		w.changelog = make([]atomic.Int64, stores)
		for i := range w.changelog {
			w.changelog[i].Store(-1)
		}
	}
	return w
}

func newCursor() cursor {
	return cursor{start: -1, next: -1, failedAt: -1, stoppedAt: -1, end: -1, fetchEnd: -1}
}

// in is the cursor of the task's i-th input partition.
func (w *window) in(i int) *cursor { return &w.cursors[i] }

// committed closes every cursor at a commit point that committed the
// window (or had nothing of it to commit).
func (w *window) committed() {
	for i := range w.cursors {
		w.cursors[i].committed()
	}
}

// aborted drops the window's work: the transaction holding it aborted and
// the consumer re-delivers from the committed offsets, so no record counts
// as processed and no changelog record as acknowledged.
func (w *window) aborted() {
	for i := range w.changelog {
		w.changelog[i].Store(-1)
	}
	for i := range w.cursors {
		w.cursors[i].aborted()
	}
}

// failAtPosition stops the task on every input where it stands: after its
// last processed record (a callback failed under on_error: fail, between
// records). An input with no processed record since the task started or
// last aborted stands at its committed offset, where the consumer already
// is: nothing to rewind.
func (w *window) failAtPosition() {
	for i := range w.cursors {
		if c := &w.cursors[i]; c.next >= 0 {
			c.failed(c.next)
		}
	}
}

// stopAtFailure makes every input that failed stop at its failed record.
func (w *window) stopAtFailure() {
	for i := range w.cursors {
		if c := &w.cursors[i]; c.failedAt >= 0 {
			c.stopAtFailure()
		}
	}
}

// refetched forgets what was fetched: the consumer was set back to the
// committed offsets.
func (w *window) refetched() {
	for i := range w.cursors {
		w.cursors[i].fetchEnd, w.cursors[i].empty = -1, false
		w.cursors[i].setHeld(nil)
	}
}

// holding reports whether any input holds records not processed yet.
func (w *window) holding() bool {
	for i := range w.cursors {
		if len(w.cursors[i].held) > 0 {
			return true
		}
	}
	return false
}

// resumed forgets the failure that stopped the task (a rollback gave its
// record to the previous version).
func (w *window) resumed() {
	for i := range w.cursors {
		w.cursors[i].failedAt = -1
	}
}

// take reports whether the record at offset must run: false for a record
// already processed (fetched again after a rewind). A record that runs opens
// the cursor's window if it was empty.
func (c *cursor) take(offset int64) bool {
	if c.next >= 0 && offset < c.next {
		return false
	}
	if c.start < 0 {
		c.start = offset
	}
	return true
}

// processed moves the commit position past the record at offset: it
// succeeded, or its failure was handled by the skip or dead-letter policy.
func (c *cursor) processed(offset int64, epoch int32) {
	c.next = offset + 1
	c.epoch = epoch
	c.dirty = true
}

// failed stops the task at the record at offset (on_error: fail): the commit
// position stays before it and the batch's rest is fetched again from it.
func (c *cursor) failed(offset int64) {
	c.failedAt = offset
	c.stoppedAt = offset
}

// stopAt marks offset as the first record of the batch the task did not
// finish.
func (c *cursor) stopAt(offset int64) { c.stoppedAt = offset }

// stopAtFailure marks the failed record as where the batch stopped: a
// stopped task never counts a record past it.
func (c *cursor) stopAtFailure() { c.stoppedAt = c.failedAt }

// takeStop returns where the batch stopped, if it did, and clears it: the
// caller rewinds the consumer there, so what was fetched from there on is
// no longer in view (caughtUp must not count it).
func (c *cursor) takeStop() (int64, bool) {
	at := c.stoppedAt
	if at < 0 {
		return 0, false
	}
	c.stoppedAt = -1
	c.fetchEnd, c.empty = at, false
	c.setHeld(nil)
	return at, true
}

// hold adds fetched records (in offset order, after those held) and
// records the offset after the last.
func (c *cursor) hold(recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	if len(c.held) == 0 {
		c.held = recs
	} else {
		c.held = append(c.held[:len(c.held):len(c.held)], recs...)
	}
	for _, r := range recs {
		c.heldBytes += heldRecordBytes(r)
	}
	c.fetchEnd = recs[len(recs)-1].Offset + 1
}

// sawMarkers records that the fetch held (after hold's records)
// transaction markers up to end (-1: none): the consumer has read the
// partition through them, so caughtUp counts them.
func (c *cursor) sawMarkers(end int64) {
	if end > c.fetchEnd {
		c.fetchEnd = end
	}
}

// sawEmpty records a fetch of the partition without records.
func (c *cursor) sawEmpty() { c.empty, c.waitedOut = true, false }

// sawRecords records a fetch of the partition with records.
func (c *cursor) sawRecords() { c.empty, c.waitedOut = false, false }

// caughtUp reports whether the consumer has fetched everything the
// partition held as of its latest fetch: that fetch was empty, or its
// records reached the partition's end. False while nothing is known (no
// fetch since the task started).
func (c *cursor) caughtUp() bool {
	return c.empty || (c.end >= 0 && c.fetchEnd >= c.end)
}

// fetchedEnd is the offset after the latest fetched record (-1: none).
func (c *cursor) fetchedEnd() int64 { return c.fetchEnd }

// sawEnd records the partition's last stable offset from a fetch (ignored
// when the fetch did not say: negative).
func (c *cursor) sawEnd(lso int64) {
	if lso >= 0 {
		c.end = lso
	}
}

// lag updates the partition end from a fetch (end: its last stable offset,
// -1 if it did not say; fetched: the offset after its last record, -1 if it
// had none) and returns the lag: the end minus the commit position, or minus
// the fetched end when nothing is processed yet. ok is false while either
// is unknown.
func (c *cursor) lag(end, fetched int64) (lag int64, ok bool) {
	c.sawEnd(end)
	if fetched > c.end {
		c.end = fetched
	}
	pos := c.next
	if pos < 0 {
		pos = fetched
	}
	if pos < 0 || c.end <= 0 {
		return 0, false
	}
	return max(c.end-pos, 0), true
}

// commitOffset is the offset a commit point commits for the partition, if
// the cursor moved it since the last commit.
func (c *cursor) commitOffset() (kgo.EpochOffset, bool) {
	if !c.dirty {
		return kgo.EpochOffset{}, false
	}
	return kgo.EpochOffset{Epoch: c.epoch, Offset: c.next}, true
}

// committed closes the cursor's window at a commit point: the next record
// opens a new one.
func (c *cursor) committed() {
	c.dirty = false
	c.start = -1
}

// aborted drops the cursor's work (see window.aborted); the consumer goes
// back to the committed offset, so nothing fetched is in view any more.
func (c *cursor) aborted() {
	c.next = -1
	c.dirty = false
	c.start = -1
	c.fetchEnd, c.empty = -1, false
	c.setHeld(nil)
}

// rewound drops the cursor's offsets for an at_least_once rollback and
// returns where the consumer must fetch again: the window's first record.
// ok is false for an empty window (nothing to rewind).
func (c *cursor) rewound() (from int64, ok bool) {
	if c.start < 0 {
		return 0, false
	}
	from = c.start
	c.start = -1
	c.next = -1
	c.dirty = false
	c.fetchEnd, c.empty = from, false
	c.setHeld(nil)
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
