package engine

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// wasmFile reads testdata/<name>.wasm.
func wasmFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newRuntime returns a Runtime closed at the end of the test, logging into
// the returned capture.
func newRuntime(t testing.TB, o Options) (*Runtime, *logCapture) {
	t.Helper()
	logs := &logCapture{}
	if o.Logger == nil {
		o.Logger = slog.New(logs)
	}
	r, err := NewRuntime(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("Runtime.Close: %v", err)
		}
	})
	return r, logs
}

// compileFile compiles testdata/<name>.wasm or fails the test.
func compileFile(t testing.TB, r *Runtime, name string) *Module {
	t.Helper()
	m, err := r.Compile(context.Background(), name, wasmFile(t, name))
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return m
}

// instantiate instantiates m with b (Name defaults to "proc", Outputs to
// ["out"], Sink to a fresh sinkCapture) and closes it at the end of the test.
func instantiate(t testing.TB, m *Module, b Binding) (*Instance, *sinkCapture) {
	t.Helper()
	if b.Name == "" {
		b.Name = "proc"
	}
	if b.Outputs == nil {
		b.Outputs = []string{"out"}
	}
	var sink *sinkCapture
	if b.Sink == nil {
		sink = &sinkCapture{}
		b.Sink = sink
	}
	i, err := m.Instantiate(context.Background(), b)
	if err != nil {
		t.Fatalf("Instantiate: %v", err)
	}
	t.Cleanup(func() { _ = i.Close(context.Background()) })
	return i, sink
}

func rec(key, value string) *abi.Record {
	r := &abi.Record{Timestamp: 1700000000000, Offset: 42, Partition: 3, Index: 0}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// sinkCapture keeps deep copies of every emitted record.
type sinkCapture struct {
	mu   sync.Mutex
	recs []emitted
}

type emitted struct {
	output int
	rec    abi.Record
}

func (s *sinkCapture) Emit(output int, r *abi.Record) error {
	c := abi.Record{Timestamp: r.Timestamp, Offset: r.Offset, Partition: r.Partition, Index: r.Index}
	if r.Key != nil {
		c.Key = bytes.Clone(r.Key)
	}
	if r.Value != nil {
		c.Value = bytes.Clone(r.Value)
	}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, abi.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	s.mu.Lock()
	s.recs = append(s.recs, emitted{output, c})
	s.mu.Unlock()
	return nil
}

func (s *sinkCapture) take() []emitted {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs
	s.recs = nil
	return r
}

// countSink counts emits without copying (for benchmarks).
type countSink struct{ n, bytes int }

func (s *countSink) Emit(_ int, r *abi.Record) error {
	s.n++
	s.bytes += len(r.Value)
	return nil
}

// sinkFunc adapts a function to Sink.
type sinkFunc func(int, *abi.Record) error

func (f sinkFunc) Emit(o int, r *abi.Record) error { return f(o, r) }

// memState is an in-memory State: one map per store. Put updates a value of
// the same length in place, so a counter workload does not allocate.
type memState struct {
	stores    []map[string][]byte
	openIters int
	closed    int
}

func newMemState(stores int) *memState {
	s := &memState{}
	for range stores {
		s.stores = append(s.stores, map[string][]byte{})
	}
	return s
}

func (s *memState) Get(store int, key []byte) ([]byte, bool, error) {
	v, ok := s.stores[store][string(key)]
	return v, ok, nil
}

func (s *memState) Put(store int, key, value []byte) error {
	m := s.stores[store]
	if old, ok := m[string(key)]; ok && len(old) == len(value) {
		copy(old, value)
		return nil
	}
	m[string(key)] = bytes.Clone(value)
	return nil
}

func (s *memState) Delete(store int, key []byte) error {
	delete(s.stores[store], string(key))
	return nil
}

func (s *memState) Scan(store int, start, end []byte) (Iterator, error) {
	var keys []string
	for k := range s.stores[store] {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	s.openIters++
	return &memIter{s: s, m: s.stores[store], keys: keys}, nil
}

type memIter struct {
	s    *memState
	m    map[string][]byte
	keys []string
}

func (it *memIter) Next() ([]byte, []byte, bool, error) {
	if len(it.keys) == 0 {
		return nil, nil, false, nil
	}
	k := it.keys[0]
	it.keys = it.keys[1:]
	return []byte(k), it.m[k], true, nil
}

func (it *memIter) Close() error {
	it.s.openIters--
	it.s.closed++
	return nil
}

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu    sync.Mutex
	lines []logLine
	attrs []slog.Attr
	root  *logCapture
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	l := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		l.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	root := h.rootHandler()
	root.mu.Lock()
	root.lines = append(root.lines, l)
	root.mu.Unlock()
	return nil
}

func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	return &logCapture{attrs: append(slices.Clone(h.attrs), as...), root: h.rootHandler()}
}

func (h *logCapture) WithGroup(string) slog.Handler { return h }

func (h *logCapture) rootHandler() *logCapture {
	if h.root != nil {
		return h.root
	}
	return h
}

// find returns the lines whose message contains s.
func (h *logCapture) find(s string) []logLine {
	root := h.rootHandler()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []logLine
	for _, l := range root.lines {
		if strings.Contains(l.msg, s) {
			out = append(out, l)
		}
	}
	return out
}
