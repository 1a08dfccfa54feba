package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// The tests in this file attack the engine with hostile modules
// (testdata/hostile.wasm, bulkline.wasm and modules built here) and check
// that each attack is contained with a clear error. Each names the
// protection it guards; removing that protection makes it fail.

// hostile instantiates testdata/hostile.wasm with one store and a sink.
func hostile(t testing.TB, o Options, b Binding) (*Instance, *logCapture, *memState) {
	t.Helper()
	r, logs := newRuntime(t, o)
	st := newMemState(1)
	b.Stores = []string{"s"}
	b.State = st
	i, _ := instantiate(t, compileFile(t, r, "hostile"), b)
	return i, logs, st
}

// TestTableCap guards the table cap (capTables): a table.grow by 100M
// entries returns -1 at once instead of allocating 800 MB for seconds, and
// a grow to exactly MaxTableEntries works.
func TestTableCap(t *testing.T) {
	i, _, _ := hostile(t, Options{}, Binding{Sink: &sinkCapture{}})
	sink := i.b.Sink.(*sinkCapture)
	if err := i.Process(bg, rec("tgro", "")); err != nil {
		t.Fatal(err)
	}
	got := sink.take()
	if len(got) != 1 {
		t.Fatalf("%d emits", len(got))
	}
	// The offset field carries the two grow results: -1, then 1 (the old size).
	off := uint64(got[0].rec.Offset)
	if r1, r2 := int32(off), int32(off>>32); r1 != -1 || r2 != 1 {
		t.Fatalf("table.grow by 100M = %d (want -1), to the cap = %d (want 1)", r1, r2)
	}
}

// TestTableFillInterruptible: filling a capped table forever times out
// like any loop.
func TestTableFillInterruptible(t *testing.T) {
	i, _, _ := hostile(t, Options{RecordTimeout: 200 * time.Millisecond}, Binding{})
	start := time.Now()
	if err := i.Process(bg, rec("tfil", "")); !IsTimeout(err) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("interrupted after %v with a 200ms limit", took)
	}
}

// TestBulkInstructionsInterruptible guards the weighted check before bulk
// instructions: 3,000 memory.fill/memory.copy of 64 MiB each in
// straight-line code (tens of seconds, no loop, no call) are interrupted
// within the record limit.
func TestBulkInstructionsInterruptible(t *testing.T) {
	r, _ := newRuntime(t, Options{RecordTimeout: 200 * time.Millisecond})
	i, _ := instantiate(t, compileFile(t, r, "bulkline"), Binding{})
	start := time.Now()
	err := i.Process(bg, rec("bulk", ""))
	took := time.Since(start)
	if !IsTimeout(err) {
		t.Fatalf("got %v after %v, want a timeout", err, took)
	}
	t.Logf("interrupted after %v", took)
	if took > 3*time.Second {
		t.Errorf("interrupted after %v with a 200ms limit", took)
	}
	ins, err := instrument(wasmFile(t, "bulkline"))
	if err != nil || ins.bulk != 3000 {
		t.Fatalf("instrumented %d bulk instructions (%v), want 3000", ins.bulk, err)
	}
}

// TestStackLimit guards the stack accounting: a runaway recursion fails
// with StackLimit (not wazero's stack overflow at 400 MB), a fat-frame one
// too, and a 10,000-deep recursion of a small function still works.
func TestStackLimit(t *testing.T) {
	i, _, _ := hostile(t, Options{}, Binding{Sink: countSinkPtr()})
	if err := i.Process(bg, rec("dep1", "")); err != nil {
		t.Fatalf("10,000-deep recursion: %v", err)
	}
	for _, key := range []string{"deep", "fat!"} {
		err := i.Process(bg, rec(key, ""))
		if !IsStackLimit(err) || !StackLimit.Discards() {
			t.Fatalf("%s: got %v, want a stack limit", key, err)
		}
		if !strings.Contains(err.Error(), "call stack over the limit of 8388608 bytes") {
			t.Errorf("%s: %v", key, err)
		}
		if err := i.Process(bg, rec("dep1", "")); err != nil {
			t.Fatalf("after %s: %v", key, err)
		}
	}
	// A smaller budget stops the same recursion earlier.
	small, _, _ := hostile(t, Options{StackLimit: 64 << 10}, Binding{Sink: countSinkPtr()})
	if err := small.Process(bg, rec("dep1", "")); !IsStackLimit(err) {
		t.Fatalf("dep1 with a 64 KiB stack: %v", err)
	}
}

func countSinkPtr() *countSink { return &countSink{} }

// TestRecordLimits guards the per-record staging limits and the per-output
// size: each attack loops until the host refuses, ignores the errno and
// returns OK; the record fails with LimitExceeded and the errno.
func TestRecordLimits(t *testing.T) {
	big := strings.Repeat("v", 512<<10)
	for _, c := range []struct {
		key, value string
		errno      abi.Errno
		msg        string
	}{
		{"emit", big, abi.ErrnoLimit, "more than 16777216 bytes emitted in one record"},
		{"ecnt", "v", abi.ErrnoLimit, "more than 10000 emits in one record"},
		{"stat", big, abi.ErrnoLimit, "more than 16777216 state bytes written in one record"},
		{"big1", strings.Repeat("v", 2000), abi.ErrnoTooLarge, `emit: ETOOLARGE: output "out": over the 1000 bytes the topic accepts`},
	} {
		sink := &stagingSink{}
		if c.key == "big1" {
			sink.max = 1000
		}
		i, _, st := hostile(t, Options{}, Binding{Sink: sink})
		err := i.Process(bg, rec(c.key, c.value))
		var re *RecordError
		if !errors.As(err, &re) || re.Kind != LimitExceeded || re.Errno != c.errno || !IsLimitExceeded(err) || LimitExceeded.Discards() {
			t.Fatalf("%s: got %v, want LimitExceeded with %s", c.key, err, c.errno.Name())
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v does not say %q", c.key, err, c.msg)
		}
		staged := sink.bytes
		for _, v := range st.stores[0] {
			staged += len(v)
		}
		t.Logf("%s: %v; staged %d bytes", c.key, err, staged)
		if staged > 16<<20 {
			t.Errorf("%s: %d bytes staged, over the 16 MiB limit", c.key, staged)
		}
		// The instance is kept and serves the next record.
		if err := i.Process(bg, rec("ok!!", "v")); err != nil {
			t.Fatalf("%s: next record: %v", c.key, err)
		}
	}
}

// stagingSink keeps every emitted byte, as the host's pending transaction
// does; with max, it refuses a record whose key and value are over it, as
// the runner refuses one its topic would.
type stagingSink struct {
	kept  [][]byte
	bytes int
	max   int
}

func (s *stagingSink) Emit(_ int, r *abi.Record) error {
	if s.max > 0 && len(r.Key)+len(r.Value) > s.max {
		return fmt.Errorf("over the %d bytes the topic accepts: %w", s.max, abi.ErrnoTooLarge)
	}
	s.kept = append(s.kept, bytes.Clone(r.Value))
	s.bytes += len(r.Value) + len(r.Key)
	return nil
}

// TestLogFlood guards the log rate limit: 100,000 log lines and 100,000
// stdout lines in one record each log about one burst, count the rest as
// dropped and say so in a summary line.
func TestLogFlood(t *testing.T) {
	for _, key := range []string{"logs", "outs"} {
		// 100,000 host calls take over the default second under -race
		// on a loaded machine; the limiter, not the time, is tested.
		i, logs, _ := hostile(t, Options{Log: LogLimits{SummaryInterval: time.Hour}, RecordTimeout: 20 * time.Second}, Binding{Sink: countSinkPtr()})
		if err := i.Process(bg, rec(key, "")); err != nil {
			t.Fatal(err)
		}
		lines := len(logs.find(strings.Repeat("x", 100)))
		dropped := i.DroppedLogLines()
		t.Logf("%s: %d lines logged, %d dropped", key, lines, dropped)
		// The burst passes, then 100 lines/s: a few more on a slow machine.
		if lines < DefaultLogBurstLines || lines > DefaultLogBurstLines+500 || dropped != uint64(100000-lines) {
			t.Errorf("%s: %d lines logged, %d dropped; want about the burst of %d logged, the rest dropped", key, lines, dropped, DefaultLogBurstLines)
		}
		if n := len(logs.find("plugin log lines dropped by the rate limit")); n != 0 {
			t.Errorf("%s: %d summary lines before the interval", key, n)
		}
		_ = i.Close(bg)
		s := logs.find("plugin log lines dropped by the rate limit")
		if len(s) != 1 || s[0].attrs["dropped"] != strconv.FormatUint(dropped, 10) {
			t.Errorf("%s: summary lines at close: %+v", key, s)
		}
	}
}

// TestLogLimiterRefill: the buckets refill with time and the summary comes
// at most once per interval.
func TestLogLimiterRefill(t *testing.T) {
	logs := &logCapture{}
	now := time.Unix(0, 0)
	l := newLogLimiter(LogLimits{LinesPerSecond: 10, BytesPerSecond: 1000, BurstLines: 2, BurstBytes: 100, SummaryInterval: time.Second}.withDefaults(),
		slog.New(logs), func() time.Time { return now })
	//lint:ignore SA4000 allow takes a token: each call is a different question
	if !l.allow(10) || !l.allow(10) || l.allow(10) {
		t.Fatal("burst of 2 lines")
	}
	now = now.Add(100 * time.Millisecond) // one line back
	if !l.allow(10) || l.allow(10) {
		t.Fatal("refill of one line")
	}
	now = now.Add(time.Second) // 10 lines but only 100 bytes
	if !l.allow(60) || l.allow(60) {
		t.Fatal("byte bucket")
	}
	if got := l.dropped.Load(); got != 3 {
		t.Fatalf("dropped %d, want 3", got)
	}
	if n := len(logs.find("plugin log lines dropped by the rate limit")); n != 1 {
		t.Fatalf("%d summaries, want 1 (the interval passed once)", n)
	}
}

// TestModuleShapeLimits guards the pre-parse: modules built to make
// compilation slow or huge are refused with OverLimits before wazero sees
// them, in well under a second.
func TestModuleShapeLimits(t *testing.T) {
	r, _ := newRuntime(t, Options{Module: ModuleLimits{MaxModuleSize: 1 << 20}})
	for _, c := range []struct {
		name string
		wasm []byte
		msg  string
	}{
		{"50M locals", moduleWithBody([]byte{1, 0x80, 0xE1, 0xEB, 0x17, 0x7F}, []byte{0x0B}), "50000000 parameters and locals or more, over the limit of 50000"},
		{"deep nesting", moduleWithBody([]byte{0}, nested(100000)), "nests blocks 4097 deep, over the limit of 4096"},
		{"100M table", tableModule(100_000_000), "tables of 100000000 entries at least, over the limit of 1048576 (MaxTableEntries)"},
		{"big", append(moduleWithBody([]byte{0}, []byte{0x0B}), make([]byte, 2<<20)...), "over the limit of 1048576 (MaxModuleSize)"},
		{"big body", moduleWithBody([]byte{0}, append(bytes.Repeat([]byte{0x01}, 5<<20), 0x0B)), "over the limit of 1048576 (MaxModuleSize)"},
	} {
		start := time.Now()
		_, err := r.Compile(bg, c.name, c.wasm)
		if ModuleErrorKindOf(err) != OverLimits || !errors.Is(err, OverLimits) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want OverLimits saying %q", c.name, err, c.msg)
		}
		// Refused before compiling: compiling any of these takes minutes
		// or gigabytes. Not a speed check: under the race detector on a
		// busy machine reading a 5 MiB module took over a second.
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: refused after %v", c.name, took)
		}
	}
	// Each default limit is checked on its own too.
	lim := ModuleLimits{MaxFunctionSize: 100, MaxFunctions: 2, MaxGlobals: 1, MaxTables: 1}.withDefaults()
	for _, c := range []struct {
		wasm []byte
		msg  string
	}{
		{moduleWithBody([]byte{0}, append(bytes.Repeat([]byte{0x01}, 200), 0x0B)), "function body 0 is 202 bytes, over the limit of 100 (MaxFunctionSize)"},
		{wasmFile(t, "passthrough"), "4 functions, over the limit of 2 (MaxFunctions)"},
	} {
		if _, err := instrumentWith(c.wasm, lim); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("got %v, want %q", err, c.msg)
		}
	}
}

// moduleWithBody is a module of one () -> () function with the given locals
// declaration and instructions (which must end with end).
func moduleWithBody(locals, code []byte) []byte {
	body := append(append([]byte{}, locals...), code...)
	entry := appendU32(nil, uint32(len(body)))
	entry = append(entry, body...)
	codeSec := append(appendU32(nil, 1), entry...)
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, secType, 4, 1, 0x60, 0, 0)
	m = append(m, secFunction, 2, 1, 0)
	m = append(m, secCode)
	m = appendU32(m, uint32(len(codeSec)))
	return append(m, codeSec...)
}

// nested is n nested empty blocks and the final end.
func nested(n int) []byte {
	b := bytes.Repeat([]byte{0x02, 0x40}, n)
	b = append(b, bytes.Repeat([]byte{0x0B}, n)...)
	return append(b, 0x0B)
}

// tableModule declares one funcref table of min entries.
func tableModule(min uint32) []byte {
	p := append([]byte{1, 0x70, 0}, appendU32(nil, min)...)
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, secTable)
	m = appendU32(m, uint32(len(p)))
	return append(m, p...)
}

// TestCompileBudget: a compilation over CompileTimeout is refused with
// OverLimits, and a canceled context stops Compile and Inspect at once.
func TestCompileBudget(t *testing.T) {
	if testutil.Race {
		t.Skip("a compilation past its timeout runs on in the background until Close; under the race detector the Go SDK plugin's takes longer than Close waits (make test runs it without -race too)")
	}
	wasm := goSDKWasm(t)
	r, _ := newRuntime(t, Options{CompileTimeout: time.Millisecond})
	if _, err := r.Compile(bg, "slow", wasm); ModuleErrorKindOf(err) != OverLimits || !strings.Contains(err.Error(), "compilation took longer than 1ms") {
		t.Fatalf("got %v, want OverLimits (compile timeout)", err)
	}
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(5*time.Millisecond, cancel)
	start := time.Now()
	_, err := Inspect(ctx, wasm)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect: %v, want canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Inspect returned %v after its context ended", took)
	}
}

// goSDKWasm builds the Go SDK passthrough plugin (cached in the test cache).
func goSDKWasm(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(wasmbuild.Build(t, "./plugins/passthrough"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
