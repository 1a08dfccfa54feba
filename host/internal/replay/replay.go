// Package replay runs a plugin version over records read from a range of
// its processor's input, offline: no group, no outputs, no stores on
// disk, no changelogs, no commits. It is deterministic: the same records,
// module and config give byte-identical output. A task (one partition
// number) starts from empty state, kept in memory; its records run in
// timestamp order across the inputs (input index, then offset, on a
// tie), as the runner orders a co-partitioned task; the plugin's clock
// (time_now) is the record's timestamp, and WASI's clocks and random
// source are the engine's deterministic ones (abi/ABI.md section 7).
//
// Timers (abi/ABI.md section 8.1): after each record a check fires, in
// abi.TimerLess order, the event-time timers the stream time reached and
// the processing-time timers the replay's wall clock reached, the wall
// clock being the largest record timestamp so far (so both kinds fire by
// the records' time, deterministically). A replay has no commit points: a
// module that marks keys for the commit hook is refused.
//
// It knows the records it is given, not where they came from: the host
// reads them from Kafka.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
)

// Input is one input record of a task.
type Input struct {
	Topic     string
	Index     uint32 // the input's index among the processor's inputs
	Partition int32
	Offset    int64
	Timestamp int64 // ms
	Key       []byte
	Value     []byte
	Headers   []abi.Header
}

// Line is one line of a replay's output (JSON): an emitted record of an
// input record (Output set), or the input record's failure (Error set).
type Line struct {
	In        Source   `json:"in"`
	Output    string   `json:"output,omitempty"`
	Topic     string   `json:"topic,omitempty"`
	Key       []byte   `json:"key,omitempty"`   // base64; absent: a null key
	Value     []byte   `json:"value,omitempty"` // base64; absent: a null value
	Headers   []Header `json:"headers,omitempty"`
	Timestamp *int64   `json:"timestamp,omitempty"` // as emitted
	Partition *int32   `json:"partition,omitempty"` // as emitted; -1: by key
	Error     string   `json:"error,omitempty"`
	// Timer is set on the lines of a timer's firing, which follow the
	// lines of the record after which it fired (In).
	Timer *TimerSource `json:"timer,omitempty"`
}

// TimerSource names the timer a firing's line is about.
type TimerSource struct {
	Kind string `json:"kind"` // "event" or "processing"
	Time int64  `json:"time"`
	Key  []byte `json:"key"`
}

// Source names the input record a line is about.
type Source struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Header is an emitted record's header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Counts are what a replay did. Failed counts failed records and failed
// timer firings; Fired the firings.
type Counts struct {
	Records, Emitted, Failed, Fired int
}

// Check refuses a version replay cannot run faithfully: the commit hook
// needs commit points, which a replay does not have. (A module that
// exports wasmstream_on_commit without importing commit_mark, as the Go
// SDK's sdk/timer does, is never called there and runs.)
func Check(info engine.Info) error {
	if info.ImportsCommitMark {
		return errors.New("replay: the plugin marks keys for the commit-point hook (commit_mark), which replay does not call: it has no commit points")
	}
	return nil
}

// Task runs mod (a version of p, compiled by p.Compile) over records, one
// task's, from the starting state start (nil: empty), and writes a Line per
// emitted record or failure to w, in processing order. A record that fails
// keeps none of its emits or state writes (as the runner discards a failed
// record's).
func Task(ctx context.Context, p *plugin.Processor, mod *engine.Module, records []Input, start *State, w io.Writer) (Counts, error) {
	var c Counts
	run, err := newRun(ctx, p, mod, start)
	if err != nil {
		return c, err
	}
	defer run.close(ctx)
	enc := json.NewEncoder(w)
	for _, r := range order(records) {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		c.Records++
		lines, perr := run.step(ctx, r)
		if perr != nil {
			c.Failed++
			if err := enc.Encode(Line{In: r.source(), Error: perr.Error()}); err != nil {
				return c, err
			}
		}
		for _, l := range lines {
			if l.Timer != nil && l.Output == "" && l.Error == "" {
				continue // a firing that emitted nothing: no line
			}
			if l.Error != "" {
				c.Failed++
			} else {
				c.Emitted++
			}
			if err := enc.Encode(l); err != nil {
				return c, err
			}
		}
	}
	c.Fired = run.fired
	return c, nil
}

// order returns records in the order a task runs them: by timestamp
// across the inputs, input index then offset on a tie.
func order(records []Input) []Input {
	recs := slices.Clone(records)
	sort.SliceStable(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.Timestamp != b.Timestamp {
			return a.Timestamp < b.Timestamp
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Offset < b.Offset
	})
	return recs
}

func (r Input) source() Source {
	return Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// run is one version's instance over one task, with its stores and clock.
type run struct {
	inst  *engine.Instance
	sink  *sink
	st    *memState
	clock *clock
	fired int // timer firings so far
}

func newRun(ctx context.Context, p *plugin.Processor, mod *engine.Module, start *State) (*run, error) {
	if err := Check(mod.Info()); err != nil {
		return nil, err
	}
	r := &run{sink: &sink{names: p.Binding.Outputs, topics: p.Topics}, st: newMemState(len(p.Spec.Stores)),
		clock: newClock()}
	if start != nil {
		if len(start.Stores) != len(p.Spec.Stores) {
			return nil, fmt.Errorf("replay: a starting state of %d stores for a processor with %d", len(start.Stores), len(p.Spec.Stores))
		}
		for i, m := range start.Stores {
			maps.Copy(r.st.stores[i], m) // values are never written in place: a Put stores a copy
		}
	}
	b := p.Binding
	b.Sink = r.sink
	if len(p.Spec.Stores) > 0 {
		b.State = r.st
	}
	if mod.Info().UsesTime() {
		b.Time = r.clock
	}
	if len(b.Tables) > 0 {
		return nil, errors.New("replay: the processor reads tables, which replay does not load")
	}
	inst, err := mod.Instantiate(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("replay: instantiating: %w", err)
	}
	r.inst = inst
	return r, nil
}

func (r *run) close(ctx context.Context) { _ = r.inst.Close(context.WithoutCancel(ctx)) }

// step runs one record, then the check after it (the timers it made
// due), and returns the record's emits and then the firings' (valid until
// the next step): each firing's lines carry its timer, a failed firing is
// one line with its error, and a firing that emitted nothing is one line
// with neither output nor error (Task counts it and writes nothing). A
// failed record's state writes and timer changes are taken back and its
// failure returned; the check runs after it all the same, as the host's
// does.
func (r *run) step(ctx context.Context, in Input) ([]Line, error) {
	if in.Timestamp >= 0 { // "no timestamp" does not move stream time (abi/ABI.md section 8.1)
		r.clock.stream = max(r.clock.stream, in.Timestamp)
		r.clock.latest = max(r.clock.latest, in.Timestamp)
	}
	r.clock.wall = in.Timestamp
	r.sink.src, r.sink.lines, r.sink.timer = in.source(), r.sink.lines[:0], nil
	r.st.begin()
	r.clock.begin()
	rec := &abi.Record{Timestamp: in.Timestamp, Offset: in.Offset, Partition: in.Partition, Index: in.Index,
		Key: in.Key, Value: in.Value, Headers: in.Headers}
	err := r.inst.Process(ctx, rec)
	if err != nil {
		r.st.undo()
		r.sink.lines = r.sink.lines[:0]
	}
	r.clock.end(err == nil)
	r.check(ctx)
	return r.sink.lines, err
}

// check fires the timers due at its start, one call each in
// abi.TimerLess order; timers the calls set fire at the next check. A
// fired timer is removed whatever its call does (as under on_error: skip);
// a failed call's other writes and timer changes are taken back.
func (r *run) check(ctx context.Context) {
	c := r.clock
	c.wall = c.latest
	for _, id := range c.due() {
		if ctx.Err() != nil {
			return
		}
		if _, ok := c.pending[id]; !ok {
			continue // canceled by an earlier firing of this check
		}
		r.fired++
		src := &TimerSource{Kind: id.kind.String(), Time: id.ts, Key: []byte(id.key)}
		n := len(r.sink.lines)
		r.sink.timer = src
		r.st.begin()
		c.begin()
		c.stage(id, false)
		err := r.inst.OnTimer(ctx, &abi.Trigger{Timestamp: id.ts, Kind: id.kind, Key: []byte(id.key)})
		if err != nil {
			r.st.undo()
			r.sink.lines = r.sink.lines[:n]
		}
		c.end(err == nil)
		delete(c.pending, id)
		switch {
		case err != nil:
			r.sink.lines = append(r.sink.lines, Line{In: r.sink.src, Timer: src, Error: err.Error()})
		case len(r.sink.lines) == n:
			r.sink.lines = append(r.sink.lines, Line{In: r.sink.src, Timer: src})
		}
	}
	r.sink.timer = nil
}

// sink collects one record's emits as lines.
type sink struct {
	names, topics []string
	src           Source
	timer         *TimerSource // the firing in progress; nil for a record
	lines         []Line
}

func (s *sink) Emit(output int, rec *abi.Record) error {
	ts, part := rec.Timestamp, rec.Partition
	l := Line{In: s.src, Output: s.names[output], Topic: s.topics[output],
		Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value), Timestamp: &ts, Partition: &part, Timer: s.timer}
	for _, h := range rec.Headers {
		l.Headers = append(l.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	s.lines = append(s.lines, l)
	return nil
}

// clock is a replay's time: the stream time is the largest record
// timestamp so far; the wall clock a record's call sees is its timestamp,
// a check's the largest record timestamp so far (latest). It keeps the
// task's pending timers, in memory, with the current call's changes
// staged.
type clock struct {
	stream, wall, latest int64
	pending              map[timerID]struct{}
	// staged are the current call's changes (true: set, false: canceled
	// or fired); count is the pending timers as the call sees them.
	staged map[timerID]bool
	count  int
}

// timerID is a timer: its kind, time and key.
type timerID struct {
	kind abi.TimerKind
	ts   int64
	key  string
}

func newClock() *clock {
	return &clock{stream: abi.NoTime, latest: abi.NoTime, pending: map[timerID]struct{}{}, staged: map[timerID]bool{}}
}

func (c *clock) begin() {
	clear(c.staged)
	c.count = len(c.pending)
}

// end keeps (ok) or drops the call's timer changes.
func (c *clock) end(ok bool) {
	if ok {
		for id, set := range c.staged {
			if set {
				c.pending[id] = struct{}{}
			} else {
				delete(c.pending, id)
			}
		}
	}
	clear(c.staged)
	c.count = len(c.pending)
}

// has reports whether id is pending as the current call sees it.
func (c *clock) has(id timerID) bool {
	if set, ok := c.staged[id]; ok {
		return set
	}
	_, ok := c.pending[id]
	return ok
}

func (c *clock) stage(id timerID, set bool) {
	if c.has(id) != set {
		if set {
			c.count++
		} else {
			c.count--
		}
	}
	c.staged[id] = set
}

// due is the pending timers a check fires, in firing order: event-time
// ones the stream time reached, processing-time ones the wall clock did.
func (c *clock) due() []timerID {
	var ids []timerID
	for id := range c.pending {
		if (id.kind == abi.TimerEventTime && id.ts <= c.stream) || (id.kind == abi.TimerProcessingTime && id.ts <= c.wall) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b timerID) int {
		switch {
		case abi.TimerLess(a.kind, a.ts, []byte(a.key), b.kind, b.ts, []byte(b.key)):
			return -1
		case abi.TimerLess(b.kind, b.ts, []byte(b.key), a.kind, a.ts, []byte(a.key)):
			return 1
		}
		return 0
	})
	return ids
}

func (c *clock) Now() (int64, int64) { return c.stream, c.wall }

// SetTimer stages a timer; past abi.DefaultMaxTimers pending the plugin
// gets ELIMIT, as from a host with the default limit.
func (c *clock) SetTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerID{kind, ts, string(key)}
	if c.has(id) {
		return false, nil
	}
	if c.count >= abi.DefaultMaxTimers {
		return false, engine.ErrTimerLimit
	}
	c.stage(id, true)
	return true, nil
}

func (c *clock) CancelTimer(kind abi.TimerKind, ts int64, key []byte) (bool, error) {
	id := timerID{kind, ts, string(key)}
	if !c.has(id) {
		return false, nil
	}
	c.stage(id, false)
	return true, nil
}

func (c *clock) Mark([]byte, int64) (bool, error) {
	return false, errors.New("replay: no commit points")
}

// memState is a task's stores in memory, with an undo log of the current
// record's writes.
type memState struct {
	stores []map[string][]byte
	undos  []undo
}

type undo struct {
	store int
	key   string
	old   []byte
	had   bool
}

func newMemState(n int) *memState {
	s := &memState{stores: make([]map[string][]byte, n)}
	for i := range s.stores {
		s.stores[i] = map[string][]byte{}
	}
	return s
}

func (s *memState) begin() { s.undos = s.undos[:0] }

// undo takes back the current record's writes, newest first.
func (s *memState) undo() {
	for i := len(s.undos) - 1; i >= 0; i-- {
		u := s.undos[i]
		if u.had {
			s.stores[u.store][u.key] = u.old
		} else {
			delete(s.stores[u.store], u.key)
		}
	}
	s.undos = s.undos[:0]
}

func (s *memState) remember(store int, key string) {
	old, had := s.stores[store][key]
	s.undos = append(s.undos, undo{store: store, key: key, old: old, had: had})
}

func (s *memState) Get(store int, key []byte) ([]byte, bool, error) {
	v, ok := s.stores[store][string(key)]
	return v, ok, nil
}

func (s *memState) Put(store int, key, value []byte) error {
	s.remember(store, string(key))
	s.stores[store][string(key)] = bytes.Clone(value)
	return nil
}

func (s *memState) Delete(store int, key []byte) error {
	s.remember(store, string(key))
	delete(s.stores[store], string(key))
	return nil
}

func (s *memState) Scan(store int, start, end []byte) (engine.Iterator, error) {
	var keys []string
	for k := range s.stores[store] {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	it := &memIter{}
	for _, k := range keys {
		it.kv = append(it.kv, [2][]byte{[]byte(k), s.stores[store][k]})
	}
	return it, nil
}

// memIter walks a snapshot of a scan's entries.
type memIter struct {
	kv [][2][]byte
	i  int
}

func (it *memIter) Next() ([]byte, []byte, bool, error) {
	if it.i >= len(it.kv) {
		return nil, nil, false, nil
	}
	e := it.kv[it.i]
	it.i++
	return e[0], e[1], true, nil
}

func (it *memIter) Close() error { return nil }
