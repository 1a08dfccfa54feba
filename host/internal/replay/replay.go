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

// Counts are what a replay did.
type Counts struct {
	Records, Emitted, Failed int
}

// Check refuses a version replay cannot run faithfully: timers and the
// commit hook need commit points and stream time across records, which a
// replay does not have.
func Check(info engine.Info) error {
	switch {
	case info.ImportsTimerSet || info.ImportsTimerCancel || info.HasOnTimer:
		return errors.New("replay: the plugin uses timers, which replay does not fire")
	case info.ImportsCommitMark || info.HasOnCommit:
		return errors.New("replay: the plugin uses the commit-point hook, which replay does not call")
	}
	return nil
}

// Task runs mod (a version of p, compiled by p.Compile) over records, one
// task's, from empty state, and writes a Line per emitted record or failure
// to w, in processing order. A record that fails keeps none of its emits
// or state writes (as the runner discards a failed record's).
func Task(ctx context.Context, p *plugin.Processor, mod *engine.Module, records []Input, w io.Writer) (Counts, error) {
	var c Counts
	if err := Check(mod.Info()); err != nil {
		return c, err
	}
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
	sink := &sink{names: p.Binding.Outputs, topics: p.Topics}
	st := newMemState(len(p.Spec.Stores))
	clock := &clock{stream: abi.NoTime}
	b := p.Binding
	b.Sink = sink
	if len(p.Spec.Stores) > 0 {
		b.State = st
	}
	if mod.Info().UsesTime() {
		b.Time = clock
	}
	if len(b.Tables) > 0 {
		return c, errors.New("replay: the processor reads tables, which replay does not load")
	}
	inst, err := mod.Instantiate(ctx, b)
	if err != nil {
		return c, fmt.Errorf("replay: instantiating: %w", err)
	}
	defer inst.Close(context.WithoutCancel(ctx))
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		c.Records++
		if r.Timestamp >= 0 { // "no timestamp" does not move stream time (abi/ABI.md section 8.1)
			clock.stream = max(clock.stream, r.Timestamp)
		}
		clock.wall = r.Timestamp
		src := Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		sink.src, sink.lines = src, sink.lines[:0]
		st.begin()
		rec := &abi.Record{Timestamp: r.Timestamp, Offset: r.Offset, Partition: r.Partition, Index: r.Index,
			Key: r.Key, Value: r.Value, Headers: r.Headers}
		if err := inst.Process(ctx, rec); err != nil {
			st.undo()
			c.Failed++
			if err := enc.Encode(Line{In: src, Error: err.Error()}); err != nil {
				return c, err
			}
			continue
		}
		for _, l := range sink.lines {
			c.Emitted++
			if err := enc.Encode(l); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// sink collects one record's emits as lines.
type sink struct {
	names, topics []string
	src           Source
	lines         []Line
}

func (s *sink) Emit(output int, rec *abi.Record) error {
	ts, part := rec.Timestamp, rec.Partition
	l := Line{In: s.src, Output: s.names[output], Topic: s.topics[output],
		Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value), Timestamp: &ts, Partition: &part}
	for _, h := range rec.Headers {
		l.Headers = append(l.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	s.lines = append(s.lines, l)
	return nil
}

// clock is a replay's time: the stream time is the largest record
// timestamp so far, the wall clock the current record's timestamp.
type clock struct{ stream, wall int64 }

func (c *clock) Now() (int64, int64) { return c.stream, c.wall }
func (c *clock) SetTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errors.New("replay: no timers")
}
func (c *clock) CancelTimer(abi.TimerKind, int64, []byte) (bool, error) {
	return false, errors.New("replay: no timers")
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
