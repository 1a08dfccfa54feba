package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// Batches (abi/ABI.md section 10). A version-2 module takes many calls in
// one wasmstream_batch call: the host writes the calls into the input
// buffer, the plugin runs them in order and, after each one, writes its
// status and staged emits into its slot and advances the batch's done
// count. The host never sees a call begin or end directly: it learns that
// calls ended from done, which it reads at the start of every host
// function the plugin calls (sync) and when the batch call returns. So a
// call's state writes, timer changes and marks (all made through host
// functions, after the previous call's end was seen) are attributed to
// the right call, and a call that makes no host call costs the host
// nothing until the batch ends.
//
// Everything Process promises per record holds per call of a batch: its
// effects stand only if it succeeds, its limits and time budget are its
// own, a failure is classified the same way. A call that fails, or after
// which the caller asks to stop (BatchHooks.End), cuts the batch: the
// calls after it do not run (the plugin is asked to return, and whatever
// it does for them is refused with EPHASE and dropped), and the caller
// hands them again.

// Call is one call of a batch: a record (wasmstream_process) or a trigger
// (wasmstream_on_timer for the timer kinds, wasmstream_on_commit for
// abi.TriggerCommit). Exactly one of the two is set.
type Call struct {
	Record  *abi.Record
	Trigger *abi.Trigger
}

// BatchHooks are the caller's side of a batch: where each call begins and
// ends. They run on the goroutine of ProcessBatch, inside the plugin's
// host calls.
type BatchHooks interface {
	// Begin is called once per call that runs, before the plugin's first
	// host call of it (so before its State, Time and Sink calls), or just
	// before End if it made none. For a record, the caller moves the
	// stream time to include it here: Time.Now is read after Begin.
	Begin(k int)
	// End is called once per call that ran, after its emits were handed to
	// the Sink: err is nil when it succeeded, else what Process would have
	// returned for it. End returns true to run no call after k in this
	// batch.
	End(k int, err error) (stop bool)
}

// Batch sizes: ProcessBatch writes at most maxBatchCalls calls and (past
// the first call) maxBatchBytes of slots into the input buffer at once;
// the caller hands the rest again.
const (
	maxBatchCalls = 1024
	maxBatchBytes = 1 << 20
)

// ProcessBatch runs calls in order, as Process, OnTimer and OnCommit would
// one by one, with the same outcome, limits and time budget per call, and
// returns how many calls ended (each through one Begin and one End): the
// calls from there on did not run, and the caller hands them again. A
// trigger of a batch keeps the clocks it carries (its StreamTime and
// WallTime are what time_now returns during its call), where OnTimer and
// OnCommit read them from Binding.Time.Now. From
// yieldAt on (never when zero) the plugin is asked to return once the call
// in progress ends: the first call always runs, and a batch returns at
// most a call's time or about yieldSlack (clockStride), or a watchdog
// tick for calls without host calls, after yieldAt. A
// trigger gets the clocks of Binding.Time.Now as OnTimer and OnCommit do;
// since records move the stream time, calls must be all records or all
// triggers (a mixed batch runs only its first run of one kind). A
// version-1 module gets the calls one at a time (wasmstream_process and
// the callbacks); a version-2 module one wasmstream_batch call for as
// many as fit (maxBatchCalls, maxBatchBytes, its input buffer).
func (i *Instance) ProcessBatch(ctx context.Context, calls []Call, h BatchHooks, yieldAt time.Time) int {
	if n := len(calls); n > 1 {
		trigger := calls[0].Trigger != nil
		for k := 1; k < n; k++ {
			if (calls[k].Trigger != nil) != trigger {
				calls = calls[:k]
				break
			}
		}
	}
	if len(calls) == 0 || ctx.Err() != nil {
		return 0
	}
	if i.m.info.Batch && len(calls) > 1 {
		if n, ok := i.runBatch(ctx, calls, h, yieldAt); ok {
			return n
		}
	}
	for k := range calls {
		if k > 0 && (ctx.Err() != nil || !yieldAt.IsZero() && !time.Now().Before(yieldAt)) {
			return k
		}
		h.Begin(k)
		if h.End(k, i.callOne(ctx, &calls[k])) {
			return k + 1
		}
	}
	return len(calls)
}

// callOne is one call through the single-call exports.
func (i *Instance) callOne(ctx context.Context, c *Call) error {
	switch {
	case c.Record != nil:
		return i.Process(ctx, c.Record)
	case c.Trigger.Kind == abi.TriggerCommit:
		return i.OnCommit(ctx, c.Trigger)
	default:
		return i.OnTimer(ctx, c.Trigger)
	}
}

// batchState is the batch an instance is running; zero when none.
type batchState struct {
	active bool
	calls  []Call
	hooks  BatchHooks
	base   uint32   // guest address of the batch (the input buffer)
	slots  []uint32 // guest address of each slot
	n      int      // calls written
	seen   int      // calls whose end the host has seen: done as last read
	began  bool     // Begin ran for call seen
	cut    int      // calls from here on do not run (n when none is cut)
	// broken is set when the plugin broke the batch protocol (done went
	// backwards or past the count, the batch left its memory, the batch
	// call returned something else than 0): the call in progress fails
	// with it. discard is set then, and when an ended call was an ABI
	// misuse: the instance is discarded once the batch call returned.
	broken  string
	discard bool
	// yieldAt is ProcessBatch's; yielded is set once the plugin was asked
	// to return. clockAt is the last reading of the clock against it, and
	// unclocked the calls that ended since (see clockStride).
	yieldAt   time.Time
	yielded   bool
	clockAt   time.Time
	unclocked int
}

// The yield deadline is checked against the clock once every clockStride
// ended calls: reading the clock at every call's end was 2.6 % of a word
// count's CPU in commit mode (a 9-word line is 9 calls there). The stride
// is what keeps the expected lateness of a yield under yieldSlack at the
// call time last measured, from 1 to maxClockStride; calls that turn slow
// bring it back to 1 at the next reading, and meanwhile the watchdog's
// yieldTick asks the plugin to return at tick resolution.
const (
	yieldSlack     = 500 * time.Microsecond
	maxClockStride = 64
)

// clockStride is the number of calls to let end before the next reading
// of the clock, when calls calls took elapsed.
func clockStride(elapsed time.Duration, calls int) int {
	if calls <= 0 {
		return 1
	}
	per := elapsed / time.Duration(calls)
	if per <= 0 {
		return maxClockStride
	}
	return int(min(max(yieldSlack/per, 1), maxClockStride))
}

// batchWatch lets the watchdog see a batch's progress: the guest address
// of its done count, and the value last seen (by the watchdog or by sync).
// A call's time budget starts when the previous call's end shows in done.
// It also asks the plugin to return at yieldTick (0: never), which calls
// without host calls give the host no other chance to do.
//
// The watchdog may hold the watch after its batch ended (it loaded
// Instance.watch just before runBatch cleared it), and the instance reuses
// it for its next batch, whose header lies at the same guest address. mu
// orders the two: the watchdog reads lm and off and writes guest memory
// only while active, under mu, and runBatch sets them and active, and
// clears active, under mu; a watchdog late for one batch does nothing
// until the next is set up (the race detector found its stop word landing
// on the next header as runBatch wrote it).
type batchWatch struct {
	mu        sync.Mutex // leaf (docs/locks.md)
	active    bool
	lm        *linearMemory
	off       uint32 // address of done
	last      atomic.Uint32
	yieldTick atomic.Int64
}

// arm points the watch at a batch whose header is at done's address less
// BatchDone, once runBatch has written the header.
func (w *batchWatch) arm(lm *linearMemory, done uint32) {
	w.mu.Lock()
	w.lm, w.off, w.active = lm, done, true
	w.mu.Unlock()
}

// disarm ends the watch of the batch: the watchdog touches its memory no
// more.
func (w *batchWatch) disarm() {
	w.mu.Lock()
	w.active = false
	w.mu.Unlock()
}

// requestStop sets the batch's stop word from the watchdog goroutine (an
// atomic store on an aligned address the plugin only reads).
func (w *batchWatch) requestStop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active {
		return
	}
	w.lm.storeUint32(uint64(w.off-abi.BatchDone+abi.BatchStop), 1)
}

// setStop sets the stop word of the batch header buf from the instance's
// goroutine. The watchdog may set it at the same moment (requestStop), so
// the store is atomic like the watchdog's (race detector: two Go
// goroutines writing one word); the header is 8-byte aligned (runBatch
// checks).
func setStop(buf []byte) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&buf[abi.BatchStop])), 1)
}

// progress reads done from guest memory, for the watchdog goroutine. The
// plugin writes it from compiled code; the read is atomic on an aligned
// address (the batch is 8-byte aligned, runBatch checks) and never sees a
// buffer a grow is copying from (linearMemory.loadUint32).
func (w *batchWatch) progress() (uint32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active {
		return 0, false
	}
	return w.lm.loadUint32(uint64(w.off))
}

// runBatch runs a prefix of calls through wasmstream_batch. ok is false
// when it ran nothing and the calls should go one at a time (the plugin
// has no buffer for two calls, or one that is not 8-byte aligned).
func (i *Instance) runBatch(ctx context.Context, calls []Call, h BatchHooks, yieldAt time.Time) (int, bool) {
	if i.cur == nil {
		if err := i.revive(ctx); err != nil {
			h.Begin(0)
			h.End(0, err)
			return 1, true
		}
	}
	// As many calls as fit the bounds, at least two.
	n, size := 0, abi.BatchHeaderSize
	for n < len(calls) && n < maxBatchCalls {
		s := abi.SlotSize(payloadSize(&calls[n]))
		if n > 0 && size+s > maxBatchBytes {
			break
		}
		size += s
		n++
	}
	if n < 2 {
		return 0, false
	}
	due := i.recordDue()
	if uint64(size) > uint64(i.cur.inCap) {
		if err := i.growInput(ctx, size, due); err != nil {
			// The plugin may still take the calls one at a time; a
			// trap in its wasmstream_input has discarded the instance
			// and the single-call path revives it.
			return 0, false
		}
	}
	l := i.cur
	if l.batch == nil || l.inPtr%abi.BatchAlign != 0 {
		return 0, false
	}
	buf, ok := l.mem.Read(l.inPtr, uint32(size))
	if !ok {
		return 0, false
	}
	b := &i.bat
	*b = batchState{active: true, calls: calls[:n], hooks: h, base: l.inPtr, n: n, cut: n, slots: b.slots[:0], yieldAt: yieldAt}
	abi.PutBatchHeader(buf, n)
	off := abi.BatchHeaderSize
	for k := range b.calls {
		c := &b.calls[k]
		p := payloadSize(c)
		if c.Record != nil {
			abi.PutSlotHeader(buf[off:], abi.SlotRecord, p)
			c.Record.EncodeTo(buf[off+abi.SlotHeaderSize:])
		} else {
			abi.PutSlotHeader(buf[off:], abi.SlotTrigger, p)
			c.Trigger.EncodeTo(buf[off+abi.SlotHeaderSize:])
		}
		b.slots = append(b.slots, l.inPtr+uint32(off))
		off += abi.SlotSize(p)
	}
	w := &i.bwatch
	w.arm(l.lm, l.inPtr+abi.BatchDone)
	w.last.Store(0)
	w.yieldTick.Store(0)
	if !yieldAt.IsZero() {
		b.clockAt = time.Now()
		left := yieldAt.Sub(b.clockAt)
		if left <= 0 {
			b.yielded = true
			setStop(buf)
		} else {
			w.yieldTick.Store(i.rt.tick.Load() + ticksFor(left, i.rt.tickEvery))
		}
	}
	i.watch.Store(w)

	i.beginCall(phaseNone)
	i.stack[0] = uint64(size)
	// A call's stderr (a Rust panic's message before its trap) is its own,
	// as its host calls are: a write syncs first, so a call that wrote
	// before making any host call has begun (its begin resets the line
	// error messages quote) and the calls before it have ended.
	i.stderr.batch = i
	intr, err := i.call(l.batch, due)
	i.stderr.batch = nil
	i.watch.Store(nil)
	w.disarm()
	ended := i.finishBatch(ctx, intr, err)
	if i.logs.pending > 0 {
		i.logs.summarize(time.Now(), false)
	}
	return ended, true
}

// payloadSize is the bytes of c's record or trigger.
func payloadSize(c *Call) int {
	if c.Record != nil {
		return c.Record.EncodedSize()
	}
	return c.Trigger.EncodedSize()
}

// finishBatch ends what the batch call left: the calls the plugin
// finished, then, for a call that did not finish (a trap, a timeout, a
// broken protocol), that call with its failure. It returns how many calls
// ended.
func (i *Instance) finishBatch(ctx context.Context, intr bool, callErr error) int {
	b := &i.bat
	defer func() {
		i.phase = phaseNone
		b.active, b.calls, b.hooks = false, nil, nil
	}()
	ret := int32(i.stack[0])
	failed := callErr != nil || (intr && !i.clearInterrupt())
	if i.cur != nil {
		// The calls the plugin finished stand, also before a trap: their
		// results are still in its memory, which is not closed yet.
		i.syncEnds()
	}
	if !failed && ret != 0 && b.broken == "" {
		i.breakBatch(fmt.Sprintf("%s returned %d, want 0", abi.ExportBatch, ret))
	}
	k := b.seen
	switch {
	case k >= b.cut:
		// Every call up to the cut ended; the plugin was told to stop.
		if b.discard {
			i.discard(ctx)
		}
		return b.cut
	case failed:
		i.ensureBegun(k)
		err := i.trapped(ctx, callExport(&b.calls[k]), callErr, intr, i.rt.opts.RecordTimeout)
		i.closeCursors()
		b.hooks.End(k, err)
		return k + 1
	case b.broken != "":
		i.ensureBegun(k)
		i.closeCursors()
		b.hooks.End(k, i.recordErr(ABIMisuse, b.broken, nil))
		i.discard(ctx)
		return k + 1
	case b.began:
		// The plugin returned in the middle of a call it had made host
		// calls for: only between calls may it return early.
		i.closeCursors()
		b.hooks.End(k, i.misused(ctx, fmt.Sprintf("%s returned before finishing call %d, which had begun", abi.ExportBatch, k)))
		return k + 1
	case k == 0:
		i.ensureBegun(0)
		i.closeCursors()
		b.hooks.End(0, i.misused(ctx, abi.ExportBatch+" returned without finishing a call (its done count is 0)"))
		return 1
	}
	// The plugin returned early (allowed): the rest is handed again.
	if b.discard {
		i.discard(ctx)
	}
	return k
}

// breakBatch records a broken batch protocol: the call in progress fails
// with msg, its later host calls are refused, no later call runs.
func (i *Instance) breakBatch(msg string) {
	b := &i.bat
	if b.broken == "" {
		b.broken = abi.ExportBatch + ": " + msg
	}
	b.discard = true
	i.phase = phaseNone
	i.cutBatch(b.seen + 1)
}

// callExport is the single-call export a call of a batch stands for: its
// failures are reported as that export's would be, so a call fails with
// the same message whichever way it reached the plugin.
func callExport(c *Call) string {
	switch {
	case c.Record != nil:
		return abi.ExportProcess
	case c.Trigger.Kind == abi.TriggerCommit:
		return abi.ExportOnCommit
	}
	return abi.ExportOnTimer
}

// sync brings the host's view of the running batch up to date: it ends
// every call the plugin finished since the last look (done), then begins
// the call in progress. Every host function calls it first (instanceOf),
// so a call's host calls are attributed to it.
func (i *Instance) sync() {
	if i.syncEnds() && i.bat.seen < i.bat.n {
		i.ensureBegun(i.bat.seen)
	}
}

// syncEnds ends every call the plugin finished since the last look and
// reports whether the batch is still well-formed. It begins nothing: after
// the batch call returned, the call at done never ran.
func (i *Instance) syncEnds() bool {
	b := &i.bat
	if !b.active || b.broken != "" {
		return false
	}
	buf, ok := i.cur.mem.Read(b.base, abi.BatchHeaderSize)
	if !ok {
		i.breakBatch("the batch is no longer inside plugin memory")
		return false
	}
	done := binary.LittleEndian.Uint32(buf[abi.BatchDone:])
	if uint64(done) > uint64(b.n) || int(done) < b.seen {
		i.breakBatch(fmt.Sprintf("its done count went from %d to %d (%d calls)", b.seen, done, b.n))
		return false
	}
	if int(done) == b.seen {
		return true
	}
	if w := i.watch.Load(); w != nil {
		w.last.Store(done)
	}
	i.refreshDeadline()
	b.unclocked += int(done) - b.seen
	for b.seen < int(done) {
		i.endSlot(b.seen)
		b.seen++
		b.began = false
	}
	// The yield deadline is looked at only when calls ended, not at every
	// host call (the plugin reads the stop word between calls; reading the
	// clock at every state get and emit was 5 % of a word count's CPU),
	// and then once a stride of calls.
	if !b.yieldAt.IsZero() && !b.yielded && b.unclocked >= i.clockStride {
		now := time.Now()
		i.clockStride = clockStride(now.Sub(b.clockAt), b.unclocked)
		b.clockAt, b.unclocked = now, 0
		if !now.Before(b.yieldAt) {
			b.yielded = true
			setStop(buf)
		}
	}
	return true
}

// ensureBegun begins call k (the one in progress) if it has not begun: the
// caller's Begin, then the engine's per-call state. A call past the cut
// runs without a phase: its host calls get EPHASE and leave nothing.
func (i *Instance) ensureBegun(k int) {
	b := &i.bat
	if b.began {
		return
	}
	b.began = true
	if k >= b.cut {
		i.beginCall(phaseNone)
		return
	}
	c := &b.calls[k]
	b.hooks.Begin(k)
	switch {
	case c.Record != nil:
		i.beginCall(phaseRecord)
		if i.m.info.ImportsTimeNow {
			i.streamNow, i.wallNow = i.b.Time.Now()
		}
		i.markTS = c.Record.Timestamp
	default:
		p := phaseTimer
		if c.Trigger.Kind == abi.TriggerCommit {
			p = phaseCommit
		}
		i.beginCall(p)
		i.streamNow, i.wallNow = c.Trigger.StreamTime, c.Trigger.WallTime
		i.markTS = c.Trigger.Timestamp
	}
}

// endSlot ends call k, which the plugin finished: its staged emits go to
// the Sink through the checks emit makes, and its outcome to End. A call
// that failed, or after which End asks to stop, cuts the batch there.
func (i *Instance) endSlot(k int) {
	b := &i.bat
	i.ensureBegun(k)
	if k >= b.cut {
		return // not run: its host calls were refused
	}
	status := abi.Status(-1)
	if slot, ok := i.cur.mem.Read(b.slots[k], abi.SlotHeaderSize); !ok {
		i.misuse("%s: the batch is no longer inside plugin memory", abi.ExportBatch)
	} else {
		le := binary.LittleEndian
		status = abi.Status(int32(le.Uint32(slot[abi.SlotStatus:])))
		if outLen := le.Uint32(slot[abi.SlotOutLen:]); outLen > 0 {
			i.stagedEmits(le.Uint32(slot[abi.SlotOutPtr:]), outLen)
		}
	}
	i.closeCursors()
	err := i.outcome(context.Background(), callExport(&b.calls[k]), status)
	if stop := b.hooks.End(k, err); stop || err != nil {
		i.cutBatch(k + 1)
	}
}

// cutBatch makes calls from k on not run and asks the plugin to return.
func (i *Instance) cutBatch(k int) {
	b := &i.bat
	if k < b.cut {
		b.cut = k
	}
	if buf, ok := i.cur.mem.Read(b.base, abi.BatchHeaderSize); ok {
		setStop(buf)
	}
}

// stagedEmits hands a call's emit entries (abi.NextEmitEntry) to the Sink
// through the checks of the emit import. A run that is outside memory or
// malformed, or an entry the host refuses, fails the call (the plugin got
// no errno for it).
func (i *Instance) stagedEmits(ptr, n uint32) {
	run, ok := i.cur.mem.Read(ptr, n)
	if !ok {
		i.misuse("%s: staged emits [%d, %d) are outside plugin memory of %d bytes",
			abi.ExportBatch, ptr, uint64(ptr)+uint64(n), i.cur.mem.Size())
		return
	}
	for len(run) > 0 && i.misuseMsg == "" && i.limitMsg == "" && i.hostErr == nil {
		rec, rest, err := abi.NextEmitEntry(run)
		if err != nil {
			i.misuse("%s: staged emits: an entry's length runs past the %d bytes given", abi.ExportBatch, n)
			return
		}
		run = rest
		if len(rec) > abi.MaxRecordSize {
			i.overLimit(abi.ErrnoTooLarge, "%s: %s: a staged emit of %d bytes, over %d", abi.ImportEmit, abi.ErrnoTooLarge.Name(), len(rec), abi.MaxRecordSize)
			return
		}
		if err := i.emitRec.Decode(rec); err != nil {
			i.misuse("%s: staged emits: an entry is not a record: %v", abi.ExportBatch, err)
			return
		}
		i.acceptEmit(len(rec))
	}
}

// refreshDeadline gives the call now in progress its own time budget
// (unless the watchdog has already interrupted).
func (i *Instance) refreshDeadline() {
	d := i.deadline.Load()
	if d > 0 {
		i.deadline.CompareAndSwap(d, i.rt.tick.Load()+i.rt.recordTicks)
	}
}

// outcome classifies the end of a call that returned status normally: nil
// or a *RecordError. An ABI misuse discards the instance: at once outside
// a batch, once the batch call returned inside one.
func (i *Instance) outcome(ctx context.Context, name string, st abi.Status) error {
	if i.hostErr != nil {
		return i.recordErr(HostFailed, i.hostErr.Error(), i.hostErr)
	}
	msg := i.misuseMsg
	if msg == "" && st != abi.StatusOK && st != abi.StatusFailed && i.limitMsg == "" {
		msg = fmt.Sprintf("%s returned unknown status %d", name, st)
	}
	if msg != "" {
		if i.bat.active {
			i.bat.discard = true
			return i.recordErr(ABIMisuse, msg, nil)
		}
		return i.misused(ctx, msg)
	}
	if i.limitMsg != "" {
		return &RecordError{Processor: i.b.Name, Kind: LimitExceeded, Msg: i.limitMsg, Errno: i.limitErrno}
	}
	if st == abi.StatusFailed {
		return i.recordErr(PluginFailed, i.reason(), nil)
	}
	return nil
}

// Info describes the instance's module.
func (i *Instance) Info() Info { return i.m.info }
