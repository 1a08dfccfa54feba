package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// goPlugin is a processor written in Go, standing in for a Wasm instance so
// the runner is tested on its own: it upper-cases values into output 0 and
// fails records whose key is in fail.
type goPlugin struct {
	fail  map[string]bool
	delay time.Duration    // per record, to keep records buffered in the client
	seen  [16]atomic.Int64 // records processed per input partition
	// closed counts Close calls (the registry releasing the version).
	closed atomic.Int64
}

func (p *goPlugin) Close(context.Context) error {
	p.closed.Add(1)
	return nil
}

type goInstance struct {
	p    *goPlugin
	sink Sink
}

func (p *goPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &goInstance{p: p, sink: env.Sink}, nil
}

func (i *goInstance) Process(_ context.Context, rec *abi.Record) error {
	if i.p.delay > 0 {
		time.Sleep(i.p.delay)
	}
	i.p.seen[rec.Partition%16].Add(1)
	if err := i.sink.Emit(0, &abi.Record{Key: rec.Key, Value: bytes.ToUpper(rec.Value), Partition: abi.AnyPartition, Timestamp: rec.Timestamp}); err != nil {
		return err
	}
	if i.p.fail[string(rec.Key)] {
		// Emitted before failing: the emit must be discarded with the record.
		return &KindError{Kind: FailureTrap, Err: errors.New("plugin rejected the record")}
	}
	return nil
}

func (i *goInstance) Close(context.Context) error { return nil }

type fixture struct {
	eos          bool
	b            *testbroker.Broker
	in, out, dlq string
	group        string
}

func newFixture(t *testing.T, eos bool, partitions int) *fixture {
	b := testbroker.New(t)
	f := &fixture{b: b, eos: eos, in: b.Name(t, "in"), out: b.Name(t, "out"), dlq: b.Name(t, "dlq"), group: b.Name(t, "app")}
	b.CreateTopic(t, f.in, partitions, nil)
	b.CreateTopic(t, f.out, partitions, nil)
	b.CreateTopic(t, f.dlq, partitions, nil)
	return f
}

// produceInputs writes n records with keys k0..k(n-1), spread over partitions by key.
func (f *fixture) produceInputs(t *testing.T, from, n int) {
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))})
	}
	f.b.Produce(t, recs...)
}

// checkInputOrder fails t unless the outputs of each input partition come
// in their inputs' order: within each output partition (the only order a
// consumer sees), the inputs behind the outputs from one input partition
// have increasing offsets. An output is its input's value upper-cased.
func (f *fixture) checkInputOrder(t *testing.T, out []*kgo.Record) {
	t.Helper()
	type pos struct {
		partition int32
		offset    int64
	}
	at := map[string]pos{}
	for _, r := range f.b.ReadCommitted(t, f.in, 30*time.Second) {
		at[string(bytes.ToUpper(r.Value))] = pos{r.Partition, r.Offset}
	}
	last := map[[2]int32]int64{} // {output partition, input partition}: the last input offset seen
	for _, o := range out {
		in, ok := at[string(o.Value)]
		if !ok {
			t.Fatalf("output %q has no input", o.Value)
		}
		k := [2]int32{o.Partition, in.partition}
		if prev, ok := last[k]; ok && in.offset <= prev {
			t.Fatalf("output partition %d: %q (input %d/%d) came after the output of input %d/%d: out of input order",
				o.Partition, o.Value, in.partition, in.offset, in.partition, prev)
		}
		last[k] = in.offset
	}
}

func (f *fixture) runner(t *testing.T, p Plugin, onError ErrorPolicy, extra ...kgo.Opt) *Runner {
	return f.runnerWith(t, p, onError, nil, extra...)
}

// runnerWith is runner with mutate applied to the options before New.
func (f *fixture) runnerWith(t *testing.T, p Plugin, onError ErrorPolicy, mutate func(*Options), extra ...kgo.Opt) *Runner {
	opts := Options{
		AppID:              f.group,
		Kafka:              kclient.Config{Brokers: f.b.Addrs(), ClientID: "test"},
		CommitInterval:     50 * time.Millisecond,
		CommitRecords:      1000,
		StartOffset:        Earliest,
		SessionTimeout:     10 * time.Second,
		Guarantee:          guarantee(f.eos),
		TransactionalID:    f.b.Name(t, "txn"),
		TransactionTimeout: 10 * time.Second,
		Processors: []ProcessorSpec{{
			Name: "upper", Inputs: []string{f.in}, Outputs: []string{f.out},
			OnError: onError, DeadLetterTopic: f.dlq, Plugin: p,
		}},
		Logger:    testLogger(t),
		ExtraOpts: extra,
	}
	if mutate != nil {
		mutate(&opts)
	}
	r, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func guarantee(eos bool) Guarantee {
	if eos {
		return ExactlyOnce
	}
	return AtLeastOnce
}

func testLogger(t *testing.T) *slog.Logger { return testbroker.Logger(t, slog.LevelWarn) }

// start runs r until the test ends or stop is called; stop returns Run's error.
func start(t *testing.T, r *Runner) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				// Every goroutine's stack says where the stop is stuck.
				var stacks bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				err = fmt.Errorf("runner did not stop within 60s; goroutines:\n%s", stacks.String())
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// committed returns the group's committed offsets for topic.
func (f *fixture) committed(t *testing.T, topic string) map[int32]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := f.b.Admin(t).FetchOffsets(ctx, f.group)
	if errors.Is(err, kerr.GroupIDNotFound) || kerr.IsRetriable(err) {
		return map[int32]int64{} // nothing committed yet, or the coordinator is still starting
	}
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

func (f *fixture) endOffsets(t *testing.T, topic string) map[int32]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := f.b.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitCommitted waits until the committed offsets of the input equal want.
func (f *fixture) waitCommitted(t *testing.T, want map[int32]int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if got := f.committed(t, f.in); !equalOffsets(got, want, true) {
			return fmt.Errorf("committed offsets %v, want %v", got, want)
		}
		return nil
	})
}

// equalOffsets compares, treating a missing partition as offset 0 when zeroOK.
func equalOffsets(got, want map[int32]int64, zeroOK bool) bool {
	for p, w := range want {
		g, ok := got[p]
		if !ok && zeroOK && w == 0 {
			continue
		}
		if g != w {
			return false
		}
	}
	return true
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	sort.Strings(out)
	return out
}

func testProcessesEveryRecordAndCommits(t *testing.T, eos bool) {
	f := newFixture(t, eos, 3)
	f.produceInputs(t, 0, 300)
	r := f.runner(t, &goPlugin{}, Fail)
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	if len(out) != 300 {
		t.Fatalf("got %d outputs, want 300", len(out))
	}
	seen := map[string]bool{}
	for _, o := range out {
		if seen[string(o.Value)] {
			t.Fatalf("duplicate output %q", o.Value)
		}
		seen[string(o.Value)] = true
	}
	for i := 0; i < 300; i++ {
		if v := "VALUE-" + strconv.Itoa(i); !seen[v] {
			t.Fatalf("missing output %q", v)
		}
	}
	if s := r.Stats("upper"); s.RecordsIn.Load() != 300 || s.RecordsOut.Load() != 300 {
		t.Fatalf("stats in=%d out=%d", s.RecordsIn.Load(), s.RecordsOut.Load())
	}
}

// Under on_error: fail the task stops at the failed record: its offset is
// the committed one, so a restart retries it, and no later record of that
// partition is processed. Other partitions go on.
func testFailPolicyStopsTaskAtRecord(t *testing.T, eos bool) {
	f := newFixture(t, eos, 1)
	f.produceInputs(t, 0, 10) // single partition: offsets 0..9 = k0..k9
	p := &goPlugin{fail: map[string]bool{"k4": true}}
	r := f.runner(t, p, Fail)
	stop := start(t, r)
	f.waitCommitted(t, map[int32]int64{0: 4})
	// A wrong implementation would go on past k4 (in this batch or a fetch
	// after it) and commit beyond it.
	seen := p.seen[0].Load()
	testutil.Consistently(t, 200*time.Millisecond, func() error {
		if n := p.seen[0].Load(); n != seen {
			return fmt.Errorf("the stopped task ran %d more records", n-seen)
		}
		if got := f.committed(t, f.in)[0]; got != 4 {
			return fmt.Errorf("committed %d, want 4 (the failed record)", got)
		}
		return nil
	})
	if n := r.Stats("upper").StoppedTasks.Load(); n != 1 {
		t.Fatalf("%d stopped tasks held, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The stopped task is closed with the runner: not held any more (a
	// process whose failed partition moved elsewhere is healthy again).
	if n := r.Stats("upper").StoppedTasks.Load(); n != 0 {
		t.Fatalf("%d stopped tasks held after the stop, want 0", n)
	}
	if got := f.committed(t, f.in)[0]; got != 4 {
		t.Fatalf("committed %d, want 4 (the failed record)", got)
	}
	out := values(f.b.ReadCommitted(t, f.out, 30*time.Second))
	if len(out) != 4 {
		t.Fatalf("outputs %v, want the 4 records before the failure", out)
	}
	if s := r.Stats("upper"); s.FailedTasks.Load() != 1 || s.Failures()["trap"] != 1 {
		t.Fatalf("stats failed=%d failures=%v", s.FailedTasks.Load(), s.Failures())
	}
}

func testSkipPolicyMovesOn(t *testing.T, eos bool) {
	f := newFixture(t, eos, 2)
	f.produceInputs(t, 0, 20)
	r := f.runner(t, &goPlugin{fail: map[string]bool{"k3": true, "k7": true}}, Skip)
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := values(f.b.ReadCommitted(t, f.out, 30*time.Second))
	if len(out) != 18 {
		t.Fatalf("got %d outputs, want 18: %v", len(out), out)
	}
	for _, v := range out {
		if v == "VALUE-3" || v == "VALUE-7" {
			t.Fatalf("a failed record's emit leaked: %s", v)
		}
	}
	if got := r.Stats("upper").Skipped.Load(); got != 2 {
		t.Fatalf("skipped = %d", got)
	}
}

func testDeadLetterHoldsExactlyTheFailedRecords(t *testing.T, eos bool) {
	f := newFixture(t, eos, 2)
	f.produceInputs(t, 0, 20)
	r := f.runner(t, &goPlugin{fail: map[string]bool{"k3": true, "k7": true}}, DeadLetter)
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dlq := f.b.ReadCommitted(t, f.dlq, 30*time.Second)
	if got := values(dlq); fmt.Sprint(got) != "[value-3 value-7]" {
		t.Fatalf("dead letters %v, want the two original failed records", got)
	}
	for _, d := range dlq {
		h := map[string]string{}
		for _, kv := range d.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if h[HeaderErrorKind] != "trap" || h[HeaderSourceTopic] != f.in || h[HeaderProcessor] != "upper" || h[HeaderSourceOff] == "" {
			t.Fatalf("dead letter headers %v", h)
		}
	}
	if out := f.b.ReadCommitted(t, f.out, 30*time.Second); len(out) != 18 {
		t.Fatalf("got %d outputs, want 18", len(out))
	}
}

// I1: when outputs cannot be acknowledged, no input offset is committed
// past them. The output topic does not exist and topic auto-creation is off,
// so every produce fails after the delivery timeout.
func testNoCommitWhenOutputsFail(t *testing.T, eos bool) {
	f := newFixture(t, eos, 1)
	f.produceInputs(t, 0, 5)
	f.out = f.b.Name(t, "missing") // never created
	r := f.runner(t, &goPlugin{}, Fail, kgo.RecordDeliveryTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := r.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v; want a produce error before the timeout", err)
	}
	t.Logf("Run: %v", err)
	if got := f.committed(t, f.in); len(got) != 0 && got[0] != 0 {
		t.Fatalf("committed %v although no output was acknowledged", got)
	}
}

// Two members of one group split the partitions; together they process
// every record. The second joins while the first is running.
func testGroupMembersShareWork(t *testing.T, eos bool) {
	f := newFixture(t, eos, 4)
	f.produceInputs(t, 0, 200)
	r1 := f.runner(t, &goPlugin{}, Fail)
	stop1 := start(t, r1)
	r2 := f.runner(t, &goPlugin{}, Fail)
	stop2 := start(t, r2)
	f.produceInputs(t, 200, 200)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := errors.Join(stop1(), stop2()); err != nil {
		t.Fatal(err)
	}
	out := values(f.b.ReadCommitted(t, f.out, 30*time.Second))
	distinct := map[string]bool{}
	for _, v := range out {
		distinct[v] = true
	}
	if len(distinct) != 400 {
		t.Fatalf("%d distinct outputs, want 400", len(distinct))
	}
	in1, in2 := r1.Stats("upper").RecordsIn.Load(), r2.Stats("upper").RecordsIn.Load()
	t.Logf("member 1 processed %d, member 2 %d (%d outputs in all)", in1, in2, len(out))
	if in1+in2 < 400 {
		t.Fatalf("members processed %d records in all, want at least 400", in1+in2)
	}
}

// The zio-kafka failure (docs/design.md#seed-zio):
// records fetched for a partition that survives a rebalance must be
// processed exactly once after it. Member 1 is slow, so the client holds
// fetched, unprocessed records for all its partitions when member 2 joins;
// the cooperative rebalance keeps some of them on member 1. Every input
// must come out exactly once, and per partition in input order.
func testBufferedRecordsAcrossRebalance(t *testing.T, eos bool) {
	f := newFixture(t, eos, 4)
	const n = 6000
	f.produceInputs(t, 0, n)
	slow := &goPlugin{delay: 2 * time.Millisecond}
	fast := kgo.HeartbeatInterval(200 * time.Millisecond) // notice the join quickly
	r1 := f.runner(t, slow, Fail, kgo.FetchMaxPartitionBytes(64<<10), fast)
	r1.opts.MaxPoll = 50 // short polls: rebalances get in often
	// Commit points are rare, so when the rebalance comes there is work
	// since the last one (about half a second's), which the rebalance must
	// end correctly.
	r1.opts.CommitInterval = time.Second
	r1.opts.CommitRecords = 1 << 30
	stop1 := start(t, r1)
	// Let member 1 get going on every partition, so that whichever
	// partitions the rebalance takes from it have work since its last
	// commit point, and its client has buffered records for all of them.
	testutil.Eventually(t, 30*time.Second, func() error {
		for p := range 4 {
			if n := slow.seen[p].Load(); n < 20 {
				return fmt.Errorf("member 1 processed %d records of partition %d, want 20", n, p)
			}
		}
		return nil
	})
	r2 := f.runner(t, slow, Fail, fast)
	r2.opts.MaxPoll = 50
	stop2 := start(t, r2)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := errors.Join(stop1(), stop2()); err != nil {
		t.Fatal(err)
	}
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	seen := map[string]int{}
	for _, o := range out {
		seen[string(o.Value)]++
	}
	for i := 0; i < n; i++ {
		if c := seen["VALUE-"+strconv.Itoa(i)]; c != 1 {
			t.Fatalf("input %d came out %d times (in1=%d in2=%d outputs=%d)", i, c,
				r1.Stats("upper").RecordsIn.Load(), r2.Stats("upper").RecordsIn.Load(), len(out))
		}
	}
	f.checkInputOrder(t, out)
	if in2 := r2.Stats("upper").RecordsIn.Load(); in2 == 0 {
		t.Fatal("member 2 processed nothing: no rebalance happened, the test proved nothing")
	}
	t.Logf("member 1 processed %d, member 2 %d; aborts %d+%d", r1.Stats("upper").RecordsIn.Load(),
		r2.Stats("upper").RecordsIn.Load(), r1.Stats("upper").Aborts.Load(), r2.Stats("upper").Aborts.Load())
}

// A clean stop commits exactly what was processed: a restart neither loses
// nor repeats a record.
func testRestartContinuesFromCommit(t *testing.T, eos bool) {
	f := newFixture(t, eos, 2)
	f.produceInputs(t, 0, 100)
	r := f.runner(t, &goPlugin{}, Fail)
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.produceInputs(t, 100, 100)
	r2 := f.runner(t, &goPlugin{}, Fail)
	stop2 := start(t, r2)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if got := r2.Stats("upper").RecordsIn.Load(); got != 100 {
		t.Fatalf("second run processed %d records, want exactly the 100 new ones", got)
	}
	if out := f.b.ReadCommitted(t, f.out, 30*time.Second); len(out) != 200 {
		t.Fatalf("got %d outputs, want 200", len(out))
	}
}

// Every runner test runs under both guarantees: the outcomes checked hold
// for each (no crash is involved, so at_least_once repeats nothing either).
func TestRunner(t *testing.T) {
	cases := []struct {
		name string
		fn   func(*testing.T, bool)
	}{
		{"BufferedRecordsAcrossRebalance", testBufferedRecordsAcrossRebalance},
		{"ProcessesEveryRecordAndCommits", testProcessesEveryRecordAndCommits},
		{"FailPolicyStopsTaskAtRecord", testFailPolicyStopsTaskAtRecord},
		{"SkipPolicyMovesOn", testSkipPolicyMovesOn},
		{"DeadLetterHoldsExactlyTheFailedRecords", testDeadLetterHoldsExactlyTheFailedRecords},
		{"NoCommitWhenOutputsFail", testNoCommitWhenOutputsFail},
		{"GroupMembersShareWork", testGroupMembersShareWork},
		{"RestartContinuesFromCommit", testRestartContinuesFromCommit},
		{"CutsDoNotRefetch", testCutsDoNotRefetch},
		{"LatestPerKey", testLatestPerKey},
	}
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.fn(t, mode.eos) })
			}
		})
	}
}

// Lag is the records between each task's position and the end of its
// partition: zero where everything was processed, the rest of the
// partition behind a task stopped by on_error: fail.
func TestLag(t *testing.T) {
	f := newFixture(t, true, 2)
	f.produceInputs(t, 0, 200)
	r := f.runner(t, &goPlugin{fail: map[string]bool{"k7": true}}, Fail)
	stop := start(t, r)
	var lag map[TaskID]int64
	testutil.Eventually(t, 30*time.Second, func() error {
		lag = r.Lag("upper")
		zero, stuck := 0, 0
		for _, l := range lag {
			if l == 0 {
				zero++
			} else {
				stuck++
			}
		}
		if len(lag) != 2 || zero != 1 || stuck != 1 {
			return fmt.Errorf("lag %v: want one task at 0 and the failed one behind", lag)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ends := f.endOffsets(t, f.in)
	for id, l := range lag {
		if l > ends[id.Partition] {
			t.Fatalf("task %s lag %d beyond its partition's end %d", id, l, ends[id.Partition])
		}
	}
	t.Logf("lag %v, partition ends %v", lag, ends)
}

// testAccount is the account of a task a test builds by hand: the default
// window budget, no process budget.
func testAccount() *account.Account { return (*account.Pool)(nil).Open(DefaultWindowBytes, nil) }
