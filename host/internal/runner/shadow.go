package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// A shadow run (`wasmstream deploy --shadow`) runs a candidate version of a
// processor beside its active one, in every task, on the same records: after
// each batch of the active version's calls, the same records go to the
// candidate's instance. Nothing the candidate does leaves the task: its
// emits are compared with the active version's and dropped, its state
// writes go to the task's overlay (shadowState), which reads through to
// the active stores and is dropped when the shadow ends, and its timers
// and marks are accepted and never fire. Its failures are counted, never
// put through on_error.
//
// The active path pays only the candidate's time, and that is bounded per
// task and commit interval (ShadowLimits.budget): a candidate that runs
// over it, fails past its ratio, fills its overlay or does not start is
// stopped, in every task of the process, and the active path goes on as if
// it had never been.

// ShadowLimits bound a shadow run. Zero fields take the defaults below.
type ShadowLimits struct {
	// TimeRatio and TimeSlack give a task's candidate its share of time:
	// in each commit interval, TimeRatio times the plugin time the active
	// version took in the task, plus TimeSlack; a candidate over it in
	// shadowStrikes intervals in a row is stopped. TimeCap is its time
	// budget in any one interval (default half the commit interval): its
	// calls are asked to yield there, and a candidate that reaches it
	// (falls behind) is stopped at once. What a shadow adds to a commit
	// point's delay is bounded by TimeCap plus one call, whose record
	// timeout is TimeCap on the shadow's runtime (follower).
	TimeRatio float64
	TimeSlack time.Duration
	TimeCap   time.Duration
	// StateBytes bounds one task's overlay: the keys and values of the
	// candidate's state writes. Past it the shadow is stopped.
	StateBytes int
	// MaxFailureRatio stops the shadow once its failed records are more
	// than this share of its records, after MinRecords records; 1 never.
	// Default 0.5: a shadow is there to count a candidate's failures (a
	// shadow-first deploy judges them against swap.max_failure_ratio when
	// it ends), so it stops only one that fails most of what it runs.
	MaxFailureRatio float64
	MinRecords      int64
	// Samples is how many differing records the run keeps (the first
	// ones); SampleBytes how many bytes of each key and value a sample
	// keeps (their full length is recorded).
	Samples     int
	SampleBytes int
}

// Shadow defaults.
const (
	DefaultShadowTimeRatio       = 2
	DefaultShadowTimeSlack       = 20 * time.Millisecond
	DefaultShadowStateBytes      = 16 << 20
	DefaultShadowSamples         = 100
	DefaultShadowSampleBytes     = 1024
	DefaultShadowMinRecords      = 100
	DefaultShadowMaxFailureRatio = 0.5
	// maxSampleEmits bounds the emits a sample keeps of each side.
	maxSampleEmits = 8
)

func (l ShadowLimits) withDefaults(commitInterval time.Duration) ShadowLimits {
	if l.TimeRatio <= 0 {
		l.TimeRatio = DefaultShadowTimeRatio
	}
	if l.TimeSlack <= 0 {
		l.TimeSlack = DefaultShadowTimeSlack
	}
	if l.TimeCap <= 0 {
		l.TimeCap = commitInterval / 2
	}
	if l.StateBytes <= 0 {
		l.StateBytes = DefaultShadowStateBytes
	}
	if l.MaxFailureRatio <= 0 {
		l.MaxFailureRatio = DefaultShadowMaxFailureRatio
	}
	if l.MinRecords <= 0 {
		l.MinRecords = DefaultShadowMinRecords
	}
	if l.Samples <= 0 {
		l.Samples = DefaultShadowSamples
	}
	if l.SampleBytes <= 0 {
		l.SampleBytes = DefaultShadowSampleBytes
	}
	return l
}

// The reports of a shadow run (package shadow): its counts, samples and
// status, shared with the deployer that judges them.
type (
	ShadowCounts = shadow.Counts
	ShadowEmit   = shadow.Emit
	ShadowSample = shadow.Sample
	ShadowSide   = shadow.Side
	ShadowStatus = shadow.Status
)

// ShadowVerdict is shadow.Verdict.
var ShadowVerdict = shadow.Verdict

// ErrShadowRunning: StartShadow found a shadow of the processor running.
var ErrShadowRunning = errors.New("a shadow of the processor is already running")

// shadowRun is one shadow of a processor in this runner, shared by its
// tasks (each task keeps its own instance and overlay, taskShadow). Safe
// for concurrent use.
type shadowRun struct {
	version string
	plugin  Plugin
	limits  ShadowLimits
	started time.Time
	seed    maphash.Seed

	stopped atomic.Bool
	mu      sync.Mutex
	reason  string
	tasks   map[string]*ShadowCounts
	samples []ShadowSample
	taken   int64 // samples taken, the next one's Seq
	// onStop, if set, is told the run stopped (on its own goroutine).
	onStop func(ShadowStatus)
	ps     *procState
}

// StartShadow runs plugin, the version named version, as a shadow of
// processor in every task of this runner, from each task's next batch. A
// processor has at most one shadow (ErrShadowRunning); a stopped one is
// replaced. onStop, if set, is called once when the shadow stops on its
// own (not on StopShadow).
func (r *Runner) StartShadow(processor, version string, plugin Plugin, lim ShadowLimits, onStop func(ShadowStatus)) error {
	ps := r.proc(processor)
	if ps == nil {
		return fmt.Errorf("shadow: no processor %q in this runner", processor)
	}
	run := &shadowRun{version: version, plugin: plugin, limits: lim.withDefaults(r.opts.CommitInterval),
		started: time.Now(), seed: maphash.MakeSeed(), tasks: map[string]*ShadowCounts{}, onStop: onStop, ps: ps}
	for {
		cur := ps.shadow.Load()
		if cur != nil && !cur.stopped.Load() {
			return fmt.Errorf("shadow of %q (version %s): %w; stop it first", processor, cur.version, ErrShadowRunning)
		}
		if ps.shadow.CompareAndSwap(cur, run) {
			break
		}
	}
	r.log.Info("shadow run started", "processor", processor, "version", version)
	return nil
}

// StopShadow ends processor's shadow, if one runs, with reason; its tasks
// drop their instances and overlays at their next batch or commit point.
// It reports whether one was running.
func (r *Runner) StopShadow(processor, reason string) bool {
	ps := r.proc(processor)
	if ps == nil {
		return false
	}
	run := ps.shadow.Load()
	if run == nil || !run.stop(reason, false) {
		return false
	}
	r.log.Info("shadow run stopped", "processor", processor, "version", run.version, "reason", reason)
	return true
}

// ShadowStatus returns processor's latest shadow in this runner (running
// or stopped); ok is false if it never had one.
func (r *Runner) ShadowStatus(processor string) (ShadowStatus, bool) {
	ps := r.proc(processor)
	if ps == nil {
		return ShadowStatus{}, false
	}
	run := ps.shadow.Load()
	if run == nil {
		return ShadowStatus{}, false
	}
	return run.status(processor), true
}

// ShadowSamples returns the samples of processor's latest shadow whose Seq
// is at least from, oldest first.
func (r *Runner) ShadowSamples(processor string, from int64) []ShadowSample {
	ps := r.proc(processor)
	if ps == nil {
		return nil
	}
	run := ps.shadow.Load()
	if run == nil {
		return nil
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	var out []ShadowSample
	for _, s := range run.samples {
		if s.Seq >= from {
			out = append(out, s)
		}
	}
	return out
}

func (r *Runner) proc(name string) *procState {
	for _, ps := range r.procs {
		if ps.spec.Name == name {
			return ps
		}
	}
	return nil
}

// stop ends the run with reason; own says the run stopped itself. It
// reports whether this call stopped it.
func (s *shadowRun) stop(reason string, own bool) bool {
	s.mu.Lock()
	if s.stopped.Load() {
		s.mu.Unlock()
		return false
	}
	s.reason = reason
	s.stopped.Store(true)
	s.mu.Unlock()
	if own {
		s.ps.Stats.ShadowStops.Add(1)
		if s.onStop != nil {
			go s.onStop(s.status(s.ps.spec.Name))
		}
	}
	return true
}

func (s *shadowRun) status(processor string) ShadowStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ShadowStatus{Processor: processor, Version: s.version, Started: s.started, Running: !s.stopped.Load(),
		Stopped: s.reason, Tasks: make(map[string]ShadowCounts, len(s.tasks)), Samples: int(s.taken)}
	for id, c := range s.tasks {
		st.Tasks[id] = *c
		st.Total = st.Total.Add(*c)
	}
	return st
}

// count adds a task's counts of one batch, and stops the run if its
// failure ratio is past the limit.
func (s *shadowRun) count(task string, c ShadowCounts, stats *Stats) {
	stats.ShadowMatches.Add(c.Matches)
	stats.ShadowDifferences.Add(c.Differences)
	stats.ShadowFailures.Add(c.Failures)
	s.mu.Lock()
	tc := s.tasks[task]
	if tc == nil {
		tc = &ShadowCounts{}
		s.tasks[task] = tc
	}
	*tc = tc.Add(c)
	var total ShadowCounts
	for _, x := range s.tasks {
		total = total.Add(*x)
	}
	s.mu.Unlock()
	if total.Records >= s.limits.MinRecords && total.FailureRatio() > s.limits.MaxFailureRatio {
		s.stop(fmt.Sprintf("failed %d of %d records (limit %.2f%%)", total.Failures, total.Records, 100*s.limits.MaxFailureRatio), true)
	}
}

// sample keeps a differing record while the run has room for it.
func (s *shadowRun) sample(smp ShadowSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	smp.Seq = s.taken
	s.taken++
	if len(s.samples) < s.limits.Samples {
		s.samples = append(s.samples, smp)
	}
}

// taskShadow is a task's part of a shadow run: the candidate's instance,
// its state overlay and time, and the comparison of each record. Used by
// the task's goroutine, or the loop between polls.
type taskShadow struct {
	run  *shadowRun
	inst Processor
	// migrated is set once the candidate's state migration, if any, ran
	// into the overlay (migrate.go, shadowMigrate).
	migrated bool
	ready    chan struct{} // closed once inst (or err) is set
	err      error
	state    *shadowState
	time     shadowTime
	sink     shadowSink
	// seen[i] is the offset after the last record of input i the
	// candidate ran: records fetched again after an abort or a rewind are
	// not run twice.
	seen []int64
	// window is when the task's current time window began; active and
	// used are the plugin time of the active version and of the
	// candidate within it.
	window       time.Time
	active, used time.Duration
	// windows counts the windows begun after the first; strikes the
	// windows in a row in which the candidate took more than its share.
	windows, strikes int
	// warm is set once the instance ran its first call.
	warm bool
	// results are the candidate's outcomes of records the active version
	// has not run yet (shadowBefore, shadowAfter).
	results map[shadowKey]shadowResult
}

// shadowStrikes is how many commit intervals in a row a candidate may take
// more than its share of time (ShadowLimits.TimeRatio, TimeSlack) before it
// is stopped: a pause of the machine is not a slow candidate. Its time
// budget (TimeCap) is never passed by more than one call.
const shadowStrikes = 3

// activeEmit is the digest of one record's emits by the active version,
// taken at the end of its call (taskCalls.End), and the records (the
// window's, valid until its commit point) for a sample.
type activeEmits struct {
	digest uint64
	n      int
	failed error
	recs   []*kgo.Record
	outs   []int
}

// shadowFor returns the task's shadow for this batch, starting or ending
// it as the processor's run says; nil when none runs (or its instance is
// not ready yet).
func (t *task) shadowFor(ctx context.Context) *taskShadow {
	run := t.proc.shadow.Load()
	if t.sh != nil && (run != t.sh.run || run.stopped.Load()) {
		t.closeShadow(ctx)
	}
	if run == nil || run.stopped.Load() {
		return nil
	}
	if t.sh == nil {
		// Its instance is made on another goroutine, and waited for up to
		// the shadow's time cap (charged to its time): a start that takes
		// longer leaves the records until then uncompared (Records counts the compared ones).
		t.sh = t.newShadow(run)
		start := time.Now()
		select {
		case <-t.sh.ready:
		case <-time.After(run.limits.TimeCap):
		case <-ctx.Done():
		}
		t.sh.window = start // its start is bounded above, not charged
	}
	select {
	case <-t.sh.ready:
	default:
		return nil
	}
	if t.sh.err != nil {
		run.stop(fmt.Sprintf("its instance does not start in task %s: %v", t.id, t.sh.err), true)
		t.closeShadow(ctx)
		return nil
	}
	if !t.sh.migrated {
		t.sh.migrated = true
		if err := t.shadowMigrate(ctx); err != nil {
			run.stop(fmt.Sprintf("its state migration failed in task %s: %v", t.id, err), true)
			t.closeShadow(ctx)
			return nil
		}
	}
	return t.sh
}

func (t *task) newShadow(run *shadowRun) *taskShadow {
	sh := &taskShadow{run: run, ready: make(chan struct{}), seen: make([]int64, len(t.topics))}
	for i := range sh.seen {
		sh.seen[i] = -1
	}
	sh.state = &shadowState{st: t.st, limit: run.limits.StateBytes}
	stream, _ := t.tk.Now()
	sh.time = shadowTime{stream: stream, timers: t.tk.st != nil}
	sh.sink = shadowSink{t: t, sh: sh}
	env := Env{Sink: &sh.sink, State: t.st, Time: &sh.time}
	if t.st != nil {
		env.Overlay = sh.state
	}
	id := t.id
	go func() {
		sh.inst, sh.err = run.plugin.Instantiate(context.Background(), id, env)
		close(sh.ready)
		t.r.wakeLoop()
	}()
	return sh
}

// closeShadow drops the task's shadow: its instance and overlay.
func (t *task) closeShadow(ctx context.Context) {
	sh := t.sh
	if sh == nil {
		return
	}
	t.sh = nil
	go func() {
		<-sh.ready
		if sh.inst != nil {
			_ = sh.inst.Close(ctx)
		}
	}()
}

// captureActive records, at the end of the active version's call k of a
// batch, what it emitted (t.staged) or its failure, for the shadow.
func (c *taskCalls) captureActive(k int, err error) {
	t := c.t
	for len(c.active) <= k {
		c.active = append(c.active, activeEmits{})
	}
	a := &c.active[k]
	a.recs, a.outs = append(a.recs[:0], t.staged...), append(a.outs[:0], t.stagedOut...)
	a.failed, a.n = err, len(t.staged)
	h := maphash.Hash{}
	h.SetSeed(c.shadow.run.seed)
	if err == nil {
		for i, rec := range t.staged {
			hashEmit(&h, t.stagedOut[i], rec.Key, rec.Value, len(rec.Headers), func(j int) (string, []byte) {
				return rec.Headers[j].Key, rec.Headers[j].Value
			})
		}
	}
	a.digest = h.Sum64()
}

// hashEmit adds one emit to h: its output, key, value and headers (but the
// version header), each length-prefixed.
func hashEmit(h *maphash.Hash, output int, key, value []byte, nh int, header func(int) (string, []byte)) {
	var b [8]byte
	put := func(n int) {
		for i := range 8 {
			b[i] = byte(uint64(n) >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
	put(output)
	put(len(key))
	_, _ = h.Write(key)
	put(len(value))
	_, _ = h.Write(value)
	for j := range nh {
		k, v := header(j)
		if k == HeaderVersion {
			continue
		}
		put(len(k))
		_, _ = h.WriteString(k)
		put(len(v))
		_, _ = h.Write(v)
	}
}

// shadowBefore runs the records of the batch c is about to run on the
// task's shadow, before the active version: so the candidate reads the
// state as it was before each record (its own writes in its overlay, the
// active version's of earlier records), the state it would have had. Each
// record's outcome waits in sh.results until the active version ran it
// (shadowAfter). It runs within the shadow's time budget.
func (t *task) shadowBefore(ctx context.Context, c *taskCalls) {
	sh := t.sh
	if sh == nil || sh.run.stopped.Load() {
		return
	}
	run := sh.run
	lim := run.limits
	now := time.Now()
	if now.Sub(sh.window) >= t.r.opts.CommitInterval {
		// A window ends: over its share (not the first window, whose
		// first calls warm a new instance up) is a strike.
		share := time.Duration(lim.TimeRatio*float64(sh.active)) + lim.TimeSlack
		if sh.windows > 0 && sh.used > share {
			sh.strikes++
		} else {
			sh.strikes = 0
		}
		if sh.strikes >= shadowStrikes {
			run.stop(fmt.Sprintf("took more than its share of time in task %s in %d commit intervals in a row (the last: %s, its share %s, its time budget %s)",
				t.id, shadowStrikes, sh.used.Round(time.Millisecond), share.Round(time.Millisecond), lim.TimeCap), true)
			return
		}
		sh.window, sh.active, sh.used = now, 0, 0
		sh.windows++
	}
	if sh.used >= lim.TimeCap {
		run.stop(fmt.Sprintf("fell behind in task %s: used %s of its %s time budget in a commit interval", t.id, sh.used.Round(time.Millisecond), lim.TimeCap), true)
		return
	}
	// The records not run yet (a record fetched again after an abort, or
	// one the active version did not reach last time, is not run twice).
	sc := &sh.sink.calls
	sc.reset(sh, c)
	for k, kr := range c.krs {
		in := c.ins[k]
		if kr.Offset <= sh.seen[in] {
			continue
		}
		sh.seen[in] = kr.Offset
		sc.add(k, kr, t.index[in])
	}
	if len(sc.calls) == 0 {
		return
	}
	if len(sh.results) > 4*maxCalls {
		clear(sh.results) // outcomes of records the active version never ran (a rewind)
	}
	done := 0
	if !sh.warm {
		// A new instance's first call (a Go module's runtime warming up:
		// tens of ms on a loaded machine) runs alone and is not charged;
		// its record timeout on the shadow runtime bounds it.
		sh.warm = true
		done = sc.run(ctx, 0, 1, time.Now())
	}
	// An instance may end a batch early (after a failed call): the rest
	// goes again, until the budget's end.
	start := time.Now()
	yieldAt := start.Add(lim.TimeCap - sh.used)
	for done < len(sc.calls) && sc.stopWhy == "" && ctx.Err() == nil && time.Now().Before(yieldAt) {
		k := sc.run(ctx, done, len(sc.calls), yieldAt)
		if k == 0 {
			break
		}
		done += k
	}
	took := time.Since(start)
	sh.used += took
	t.shadowTime += took // the task's cost too (recordCost, heavyTask)
	switch {
	case sc.stopWhy != "":
		run.stop(sc.stopWhy, true)
	case done < len(sc.calls) && ctx.Err() == nil:
		run.stop(fmt.Sprintf("fell behind in task %s: %d of %d records not run within its %s time budget in a commit interval", t.id, len(sc.calls)-done, len(sc.calls), lim.TimeCap), true)
	case sh.used > lim.TimeCap:
		run.stop(fmt.Sprintf("ran over its time budget in task %s: %s of %s in a commit interval", t.id, sh.used.Round(time.Millisecond), lim.TimeCap), true)
	}
}

// shadowAfter compares the outcome of the first n records of the batch c
// just ran, the active version's (c.active), with the candidate's
// (sh.results), and counts them; activeTime is the batch's plugin time.
func (t *task) shadowAfter(c *taskCalls, n int, activeTime time.Duration) {
	sh := t.sh
	if sh == nil {
		return
	}
	defer func() {
		for i := range c.active {
			clear(c.active[i].recs) // the window's records are not kept past the batch
		}
	}()
	sh.active += activeTime
	run := sh.run
	if run.stopped.Load() || len(c.active) < n {
		return
	}
	var counts ShadowCounts
	for k := range n {
		kr := c.krs[k]
		key := shadowKey{c.ins[k], kr.Offset}
		res, ok := sh.results[key]
		if !ok {
			continue // not run by the candidate (it started after this record)
		}
		delete(sh.results, key)
		a := &c.active[k]
		counts.Records++
		switch {
		case res.err != nil:
			counts.Failures++
			sh.sample(t, kr, a, res)
		case a.failed == nil && a.digest == res.digest:
			counts.Matches++
		default:
			counts.Differences++
			sh.sample(t, kr, a, res)
		}
	}
	run.count(t.id.String(), counts, t.proc.Stats)
}

// shadowKey names a record of a task: its input and offset.
type shadowKey struct {
	in     int
	offset int64
}

// shadowResult is the candidate's outcome of a record: the digest of its
// emits, its failure, and for a sample, how many it emitted and the first
// ones (kept only while the run takes samples).
type shadowResult struct {
	digest uint64
	err    error
	n      int
	kept   []ShadowEmit
}

// sample keeps kr as a sample of the run, with both sides, unless it has
// enough.
func (sh *taskShadow) sample(t *task, kr *kgo.Record, a *activeEmits, res shadowResult) {
	run := sh.run
	if run.full() {
		run.mu.Lock()
		run.taken++
		run.mu.Unlock()
		return
	}
	cut := run.limits.SampleBytes
	smp := ShadowSample{Task: t.id.String(), Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
		Key: clip(kr.Key, cut)}
	smp.Active.Count = a.n
	if a.failed != nil {
		smp.Active.Error = a.failed.Error()
	} else {
		for j, rec := range a.recs {
			if j == maxSampleEmits {
				break
			}
			smp.Active.Emits = append(smp.Active.Emits, sampleEmit(t.proc.spec.Outputs[a.outs[j]], rec.Key, rec.Value, cut,
				len(rec.Headers), func(i int) (string, []byte) { return rec.Headers[i].Key, rec.Headers[i].Value }))
		}
	}
	if res.err != nil {
		smp.Candidate.Error = res.err.Error()
	}
	smp.Candidate.Emits, smp.Candidate.Count = res.kept, res.n
	run.sample(smp)
}

// full reports whether the run has all the samples it keeps.
func (s *shadowRun) full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.samples) >= s.limits.Samples
}

// run runs calls [from, to) on the candidate's instance, asked to yield at
// yieldAt (after its first call), and returns how many ended.
func (s *shadowCalls) run(ctx context.Context, from, to int, yieldAt time.Time) int {
	s.base = from
	inst := s.sh.inst
	if b, ok := inst.(BatchProcessor); ok {
		return b.ProcessBatch(ctx, s.calls[from:to], s, yieldAt)
	}
	for k := range to - from {
		if k > 0 && !time.Now().Before(yieldAt) {
			return k
		}
		s.Begin(k)
		if s.End(k, inst.Process(ctx, s.calls[from+k].Record)) {
			return k + 1
		}
	}
	return to - from
}

// shadowCalls is a batch of the candidate's calls and its hooks: each
// record's emits (shadowSink) are compared with the active version's at
// its end, and its overlay writes kept or dropped with it.
type shadowCalls struct {
	sh    *taskShadow
	c     *taskCalls
	calls []Call
	recs  []abi.Record
	at    []int // the active batch's call of each
	base  int   // the index in calls of the hooks' k (run)
	// stopWhy is set when the candidate must stop (its overlay is full).
	stopWhy string
}

func (s *shadowCalls) reset(sh *taskShadow, c *taskCalls) {
	s.sh, s.c = sh, c
	s.calls, s.at, s.stopWhy = s.calls[:0], s.at[:0], ""
}

func (s *shadowCalls) add(k int, kr *kgo.Record, index uint32) {
	i := len(s.calls)
	if i == len(s.recs) {
		s.recs = append(s.recs, abi.Record{})
	}
	fillRecord(&s.recs[i], kr, index)
	s.calls = append(s.calls, Call{Record: &s.recs[i]})
	s.at = append(s.at, k)
}

// Begin implements CallHooks.
func (s *shadowCalls) Begin(i int) {
	i += s.base
	s.sh.sink.begin(s.sh.run.seed)
	s.sh.time.observe(s.recs[i].Timestamp, s.c.wall)
}

// End implements CallHooks: the record's outcome waits for the active
// version's (shadowAfter). The batch stops when the shadow must.
func (s *shadowCalls) End(i int, err error) bool {
	i += s.base
	sh := s.sh
	if serr := sh.state.endCall(err == nil); serr != "" && s.stopWhy == "" {
		s.stopWhy = fmt.Sprintf("in task %s: %s", s.c.t.id, serr)
	}
	if err == nil && sh.sink.err != nil {
		err = sh.sink.err
	}
	k := s.at[i]
	res := shadowResult{digest: sh.sink.h.Sum64(), err: err, n: sh.sink.n}
	if !sh.run.full() {
		res.kept = sh.sink.kept
		sh.sink.kept = nil // the result owns them now
	}
	if sh.results == nil {
		sh.results = map[shadowKey]shadowResult{}
	}
	sh.results[shadowKey{s.c.ins[k], s.c.krs[k].Offset}] = res
	return s.stopWhy != ""
}

// sampleEmit is an emit as a sample keeps it: its key, value and headers
// (but the version header) cut to cut bytes, and their full lengths.
func sampleEmit(output string, key, value []byte, cut, nh int, header func(int) (string, []byte)) ShadowEmit {
	e := ShadowEmit{Output: output, Key: clip(key, cut), Value: clip(value, cut), KeyLen: len(key), ValueLen: len(value)}
	for j := range nh {
		k, v := header(j)
		if k == HeaderVersion {
			continue
		}
		if e.Headers == nil {
			e.Headers = map[string][]byte{}
		}
		e.Headers[k] = clip(v, cut)
	}
	return e
}

// clip returns a copy of b's first n bytes at most.
func clip(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	return append([]byte(nil), b...)
}

// shadowSink takes the candidate's emits: each is hashed into the record's
// digest and its first bytes kept for a sample; nothing is staged or
// produced. What it keeps is bounded by maxSampleEmits and SampleBytes.
type shadowSink struct {
	t     *task
	sh    *taskShadow
	calls shadowCalls
	h     maphash.Hash
	n     int
	kept  []ShadowEmit
	err   error
}

func (s *shadowSink) begin(seed maphash.Seed) {
	s.h.SetSeed(seed) // resets it
	s.n, s.kept, s.err = 0, s.kept[:0], nil
}

// Emit implements Sink.
func (s *shadowSink) Emit(output int, rec *abi.Record) error {
	outs := s.t.proc.spec.Outputs
	if output < 0 || output >= len(outs) {
		return abi.ErrnoNoOutput
	}
	hashEmit(&s.h, output, rec.Key, rec.Value, len(rec.Headers), func(j int) (string, []byte) {
		return rec.Headers[j].Key, rec.Headers[j].Value
	})
	s.n++
	if len(s.kept) < maxSampleEmits {
		s.kept = append(s.kept, sampleEmit(outs[output], rec.Key, rec.Value, s.sh.run.limits.SampleBytes,
			len(rec.Headers), func(i int) (string, []byte) { return rec.Headers[i].Key, rec.Headers[i].Value }))
	}
	return nil
}

// shadowTime is the candidate's time: its own stream time (the records it
// ran), the active call's wall time; timers and marks are accepted and
// dropped (a shadow's timers never fire: only its records are compared).
type shadowTime struct {
	stream, wall int64
	timers       bool // the processor keeps timers
}

func (s *shadowTime) observe(ts, wall int64) {
	if s.stream == abi.NoTime || ts > s.stream {
		s.stream = ts
	}
	s.wall = wall
}

func (s *shadowTime) Now() (int64, int64) { return s.stream, s.wall }

func (s *shadowTime) SetTimer(abi.TimerKind, int64, []byte) (bool, error) {
	if !s.timers {
		return false, ErrNoTimers
	}
	return true, nil
}

func (s *shadowTime) CancelTimer(abi.TimerKind, int64, []byte) (bool, error) {
	if !s.timers {
		return false, ErrNoTimers
	}
	return false, nil
}

func (s *shadowTime) Mark([]byte, int64) (bool, error) { return true, nil }
