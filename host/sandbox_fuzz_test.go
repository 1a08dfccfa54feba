package host

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// The sandbox fuzzer: a plugin that runs whatever ABI calls a
// program of bytes asks for (host/testdata/fuzzop/fuzzop.c: emits, state
// writes, deletes and reads, scans left open, timers of every kind set and
// cancelled from records and from callbacks, commit marks, logs, memory
// growth, spinning, deep recursion, traps, failures), next to a healthy
// passthrough processor in one host. Whatever the programs, after each
// case:
//
//   - the host is still running, and stops within sandboxStopBound;
//   - every input record of the fuzzed processor was dealt with (processed
//     or failed through on_error), none looping;
//   - no record caused more than one aborted window;
//   - the healthy processor got all its records through, its latency
//     within sandboxLatencySlack of its baseline measured in the same case;
//   - the process's memory grew within sandboxMemoryBound.
//
// `go test` runs the seeds below and testdata/fuzz/FuzzSandbox; `make fuzz`
// runs the fuzzer (FUZZTIME).
func FuzzSandbox(f *testing.F) {
	plugin := polybuild.C(f, "host/testdata/fuzzop/fuzzop.c", "sdk/c/wasmstream_time.c")
	for _, c := range sandboxSeeds() {
		f.Add(c.encode())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := decodeSandboxCase(data)
		if !ok {
			return
		}
		runSandboxCase(t, plugin, c)
	})
}

const (
	// sandboxStopBound: a stop finishes the record in flight (its
	// record_timeout), commits (the commit point's own 30 s bound) and
	// leaves the group.
	sandboxStopBound = 45 * time.Second
	// sandboxLatencySlack is how much longer than its baseline the healthy
	// processor may take to get a batch through while the fuzzed one runs:
	// a commit point waits for at most one record_timeout of each task's
	// work and its share of the callbacks' budget, so a few commit
	// intervals, with room for a loaded machine.
	sandboxLatencySlack = 15 * time.Second
	// sandboxMemoryBound: one instance (its 64 MiB memory limit here, plus
	// wazero's overhead) and the task's account (64 MiB window), with room
	// for the Go heap's slack.
	sandboxMemoryBound = 768 << 20
	// sandboxRecordTimeout is the fuzzed processor's record_timeout.
	sandboxRecordTimeout = 500 * time.Millisecond
)

// sandboxCase is one fuzz case: the programs of the fuzzed processor's
// records and of its timer and commit callbacks.
type sandboxCase struct {
	records           [][]byte
	onTimer, onCommit []byte
}

// encode is the inverse of decodeSandboxCase.
func (c sandboxCase) encode() []byte {
	out := []byte{byte(len(c.records))}
	for _, p := range append([][]byte{c.onTimer, c.onCommit}, c.records...) {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
	}
	return out
}

// decodeSandboxCase reads a case: a record count (1 to 8), then the timer
// program, the commit program and each record's, each a u16 length and
// its bytes (at most 512), cut short where the data ends.
func decodeSandboxCase(data []byte) (sandboxCase, bool) {
	if len(data) < 1 {
		return sandboxCase{}, false
	}
	n := 1 + int(data[0])%8
	data = data[1:]
	next := func() []byte {
		if len(data) < 2 {
			data = nil
			return nil
		}
		l := min(int(binary.LittleEndian.Uint16(data)), 512, len(data)-2)
		p := data[2 : 2+l]
		data = data[2+l:]
		return p
	}
	c := sandboxCase{onTimer: next(), onCommit: next()}
	for range n {
		c.records = append(c.records, next())
	}
	return c, true
}

// op builds a program: an op byte and little-endian arguments (u8, u16,
// u32 or i32 by the Go type given).
func op(code byte, args ...any) []byte {
	out := []byte{code}
	for _, a := range args {
		switch v := a.(type) {
		case uint8:
			out = append(out, v)
		case uint16:
			out = binary.LittleEndian.AppendUint16(out, v)
		case uint32:
			out = binary.LittleEndian.AppendUint32(out, v)
		case int32:
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		default:
			panic(fmt.Sprintf("op: argument %T", a))
		}
	}
	return out
}

func prog(ops ...[]byte) []byte {
	var out []byte
	for _, o := range ops {
		out = append(out, o...)
	}
	return out
}

// sandboxSeeds are cases near every limit, one theme each.
func sandboxSeeds() []sandboxCase {
	return []sandboxCase{
		{ // emits: near the record limit, over it, to an undeclared index
			records: [][]byte{
				prog(op('e', uint8(0), uint32(1000)), op('e', uint8(1), uint32(900<<10))),
				prog(op('e', uint8(0), uint32(1<<20+1))),
				prog(op('e', uint8(7), uint32(10))),
			},
		},
		{ // state: large writes, deletes and reads; scans left open past the cursor limit
			records: [][]byte{
				prog(op('p', uint16(4096), uint32(1<<20)), op('x', uint8('a')), op('p', uint16(10), uint32(100)), op('g', uint16(10)), op('d', uint16(10))),
				prog(op('s', uint8(20), uint8(5))),
				prog(op('p', uint16(5000), uint32(10))),
			},
		},
		{ // timers: a flood from a record, a cascade from on_timer, cancels
			onTimer:  prog(op('t', uint8(0), int32(1)), op('t', uint8(1), int32(0)), op('m', uint16(3))),
			onCommit: prog(op('e', uint8(0), uint32(100))),
			records: [][]byte{
				prog(op('x', uint8('a')), op('t', uint8(0), int32(-10)), op('t', uint8(1), int32(-10)), op('m', uint16(1))),
				prog(op('x', uint8('b')), op('t', uint8(0), int32(60000)), op('c', uint8(0), int32(60000)), op('t', uint8(2), int32(0))),
			},
		},
		{ // slow and failing callbacks beside plain records
			onTimer:  prog(op('S', uint32(200000))),
			onCommit: prog(op('S', uint32(200000)), op('f')),
			records: [][]byte{
				prog(op('m', uint16(1)), op('t', uint8(1), int32(-1))),
				prog(op('x', uint8('z')), op('m', uint16(2))),
			},
		},
		{ // the instance: memory growth to its limit, deep recursion, spinning, a trap, a failure
			records: [][]byte{
				prog(op('G', uint16(2000))),
				prog(op('r', uint16(50000))),
				prog(op('S', uint32(900000))),
				prog(op('e', uint8(0), uint32(10)), op('T')),
				prog(op('p', uint16(1), uint32(1)), op('f')),
				prog(op('e', uint8(0), uint32(10))),
			},
		},
		{ // logs: long lines, many of them
			records: [][]byte{prog(op('l', uint16(16000), uint16(1999)))},
		},
	}
}

// runSandboxCase runs c on a host of its own and checks what FuzzSandbox
// promises.
func runSandboxCase(t *testing.T, plugin string, c sandboxCase) {
	b := testbroker.New(t)
	fin, fout, fside := b.Name(t, "fuzz-in"), b.Name(t, "fuzz-out"), b.Name(t, "fuzz-side")
	gin, gout := b.Name(t, "healthy-in"), b.Name(t, "healthy-out")
	b.CreateTopic(t, fin, 1, nil)
	b.CreateTopic(t, fout, 1, nil)
	b.CreateTopic(t, fside, 1, map[string]string{"max.message.bytes": "4096"})
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{
			{Name: "fuzz", Plugin: plugin, Inputs: []string{fin},
				Outputs: map[string]OutputConfig{"out": {Topic: fout}, "side": {Topic: fside}},
				Stores:  []string{"s"}, OnError: OnErrorDeadLetter,
				Config: map[string]any{"timer": hex.EncodeToString(c.onTimer), "commit": hex.EncodeToString(c.onCommit)},
				Limits: Limits{RecordTimeout: sandboxRecordTimeout, Memory: 64 << 20, Timers: 1000}},
			{Name: "healthy", Plugin: engineTestdata("passthrough"), Inputs: []string{gin},
				Outputs: map[string]OutputConfig{"out": {Topic: gout}}, OnError: OnErrorFail},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	healthy := &pipeline{b: b, in: gin, cfg: cfg}
	fuzzed := &pipeline{b: b, in: fin, cfg: cfg}
	rssBefore := vmRSS(t)
	h, stop := (&pipeline{b: b, cfg: cfg}).run(t)

	// The healthy processor's baseline, alone.
	healthyBatch := func(round int) time.Duration {
		start := time.Now()
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: gin, Key: []byte("g" + strconv.Itoa(round*20+i)), Value: []byte("ok")})
		}
		b.Produce(t, recs...)
		healthy.waitProcessed(t)
		return time.Since(start)
	}
	baseline := healthyBatch(0)

	now := time.Now()
	var recs []*kgo.Record
	for i, p := range c.records {
		recs = append(recs, &kgo.Record{Topic: fin, Key: []byte("f" + strconv.Itoa(i)), Value: p, Timestamp: now})
	}
	b.Produce(t, recs...)
	during := healthyBatch(1)
	waitDealtWith(t, fuzzed, h)
	rssAfter := vmRSS(t)

	if during > baseline+sandboxLatencySlack {
		t.Errorf("the healthy processor took %v for a batch beside the fuzzed one, against %v alone", during, baseline)
	}
	st, _ := h.Stats("fuzz")
	t.Logf("fuzzed: %d records in, %d dead-lettered, %d aborts, %d refusal aborts, failures %v; healthy batch %v alone, %v beside it; RSS +%d MiB",
		st.RecordsIn, st.DeadLettered, st.Aborts, st.RefusalAborts, st.Failures, baseline, during, (rssAfter-rssBefore)>>20)
	if st.Aborts > int64(len(c.records)) {
		t.Errorf("%d windows aborted for %d records: a record caused more than one", st.Aborts, len(c.records))
	}
	if grew := rssAfter - rssBefore; grew > sandboxMemoryBound {
		t.Errorf("the process grew by %d MiB", grew>>20)
	}
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}
	if took := time.Since(began); took > sandboxStopBound {
		t.Errorf("the host took %v to stop, over %v", took, sandboxStopBound)
	}
	if got := len(b.ReadCommitted(t, gout, 30*time.Second)); got != 40 {
		t.Errorf("the healthy processor's output holds %d records, want 40", got)
	}
	if hst, _ := h.Stats("healthy"); hst.FailedTasks != 0 {
		t.Errorf("%d healthy tasks failed", hst.FailedTasks)
	}
}

// waitDealtWith waits until the group committed the fuzzed input's end
// offsets: every record processed or failed through on_error. A record
// that loops never gets there.
func waitDealtWith(t *testing.T, p *pipeline, h *Host) {
	t.Helper()
	adm := p.b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, p.in)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if testbroker.AllCommitted(t, adm, p.cfg.AppID, ends) {
			return
		}
		select {
		case <-ctx.Done():
			st, _ := h.Stats("fuzz")
			t.Fatalf("the fuzzed input was not all committed within 90s (records in %d, dead-lettered %d, aborts %d, refusal aborts %d, failures %v)",
				st.RecordsIn, st.DeadLettered, st.Aborts, st.RefusalAborts, st.Failures)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
