package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// The sandbox through the whole host: one hostile module
// (host/internal/engine/testdata/hostile.wasm, an attack per record key:
// tables, deep and fat recursion, emit and state floods, an emit its
// output cannot take, log and stdout floods, a loop over table.fill) runs
// next to a healthy processor in one process, on the test broker. Every
// attack fails only its own record, through on_error with its kind named;
// the healthy processor processes everything; no transaction aborts; the
// host does not stop; and the process's memory grows within the documented
// bound (abi/ABI.md section 7: about 130 MiB per instance with default
// limits, plus what the task's account holds), far from what the attacks
// took before (0.9 to 3.6 GB).
func TestHostileNeighbour(t *testing.T) {
	b := testbroker.New(t)
	hin, hout, gin, gout := b.Name(t, "hostile-in"), b.Name(t, "hostile-out"), b.Name(t, "healthy-in"), b.Name(t, "healthy-out")
	b.CreateTopic(t, hin, 1, nil)
	b.CreateTopic(t, hout, 1, map[string]string{"max.message.bytes": "2048"})
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second,
			TransactionTimeout: 30 * time.Second}, // above twice the hostile record_timeout
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{
			{Name: "hostile", Plugin: engineTestdata("hostile"), Inputs: []string{hin}, Outputs: map[string]OutputConfig{"out": {Topic: hout}},
				// 5 s: the log and stdout floods (100,000 host calls) take
				// over a second under -race on a loaded machine.
				Stores: []string{"s"}, OnError: OnErrorDeadLetter, Limits: Limits{RecordTimeout: 5 * time.Second}},
			{Name: "healthy", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail, Limits: Limits{RecordTimeout: time.Second}},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: hin, out: hout, cfg: cfg}
	rssBefore := vmRSS(t)
	h, stop := p.run(t)

	big := strings.Repeat("v", 512<<10)
	attacks := []struct{ key, value, kind string }{
		{"tgro", "", ""}, // table.grow over the cap is refused (-1); the record succeeds
		{"tfil", "", runner.FailureTimeout.String()},
		{"deep", "", runner.FailureStackLimit.String()},
		{"dep1", "", ""}, // recursion within the stack limit
		{"fat!", "", runner.FailureStackLimit.String()},
		{"emit", big, runner.FailureLimitExceeded.String()},
		{"ecnt", "v", runner.FailureLimitExceeded.String()},
		{"stat", big, runner.FailureLimitExceeded.String()},
		{"logs", "", ""}, // rate-limited, the rest counted as dropped
		{"outs", "", ""},
		{"big1", strings.Repeat("v", 4000), runner.FailureLimitExceeded.String()}, // over hostile-out's 2048 bytes
	}
	var recs []*kgo.Record
	for _, a := range attacks {
		recs = append(recs, &kgo.Record{Topic: hin, Key: []byte(a.key), Value: []byte(a.value)})
	}
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: gin, Key: []byte("g" + strconv.Itoa(i)), Value: []byte("ok")})
	}
	b.Produce(t, recs...)
	p.waitProcessed(t)
	(&pipeline{b: b, in: gin, cfg: cfg}).waitProcessed(t)
	rssAfter := vmRSS(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}

	if got := len(b.ReadCommitted(t, gout, 30*time.Second)); got != 100 {
		t.Errorf("the healthy processor's output holds %d records, want 100", got)
	}
	dlq := b.ReadCommitted(t, cfg.DeadLetterTopic(&cfg.Processors[0]), 30*time.Second)
	kinds := map[string]string{}
	for _, r := range dlq {
		for _, hd := range r.Headers {
			if hd.Key == runner.HeaderErrorKind {
				kinds[string(r.Key)] = string(hd.Value)
			}
		}
	}
	for _, a := range attacks {
		if kinds[a.key] != a.kind {
			t.Errorf("attack %s: dead-lettered with kind %q, want %q", a.key, kinds[a.key], a.kind)
		}
	}
	if len(dlq) != len(kinds) {
		t.Errorf("%d dead letters for %d keys", len(dlq), len(kinds))
	}
	for _, proc := range []string{"hostile", "healthy"} {
		if st, _ := h.Stats(proc); st.Aborts != 0 {
			t.Errorf("%s: %d transactions aborted", proc, st.Aborts)
		}
	}
	// Loose: one hostile instance at a time plus the healthy ones, against
	// a documented bound of ~130 MiB per instance with default limits,
	// plus the account's window (64 MiB).
	if grew := rssAfter - rssBefore; grew > 768<<20 {
		t.Errorf("the process grew by %d MiB during the attacks", grew>>20)
	}
	t.Logf("RSS %d MiB -> %d MiB during the attacks", rssBefore>>20, rssAfter>>20)
}

// vmRSS is this process's resident set, in bytes (Linux).
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// A processor whose records keep timing out delays only itself (I9:
// the healthy processor never stalls past a commit interval). The spinning
// processor's four records take its record timeout (3s) each, one after
// another; meanwhile the healthy processor's input gets a record every
// 50ms, and a read_committed consumer notes when each of its outputs
// becomes visible. With one group member per processor (the default) the
// healthy outputs keep arriving at about the commit interval; with one
// shared member each spinning record holds the shared commit point for its
// full timeout (measured on kfake: largest gap 158ms with a member per
// processor, 3.38s with one shared member).
func TestSlowProcessorDoesNotStallItsNeighbour(t *testing.T) {
	b := testbroker.New(t)
	sin, sout, gin, gout := b.Name(t, "spin-in"), b.Name(t, "spin-out"), b.Name(t, "steady-in"), b.Name(t, "steady-out")
	for _, topic := range []string{sin, sout, gin, gout} {
		b.CreateTopic(t, topic, 1, nil)
	}
	const timeout = 3 * time.Second
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		Processors: []ProcessorConfig{
			{Name: "spin", Plugin: engineTestdata("loop"), Inputs: []string{sin}, Outputs: map[string]OutputConfig{"out": {Topic: sout}},
				OnError: OnErrorSkip, Limits: Limits{RecordTimeout: timeout}},
			{Name: "steady", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: gin, out: gout, cfg: cfg}
	h, stop := p.run(t)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// The steady processor is running before the spinning starts.
	b.Produce(t, &kgo.Record{Topic: gin, Key: []byte("warm"), Value: []byte("v")})
	p.waitProcessed(t)

	gapOf := watchGaps(t, b, gout)

	var spins []*kgo.Record
	for i := 0; i < 4; i++ {
		spins = append(spins, &kgo.Record{Topic: sin, Key: []byte("spin"), Value: []byte(strconv.Itoa(i))})
	}
	b.Produce(t, spins...)
	gap := gapOf(produceSteadily(t, b, gin, 160)) // 8s: spans the spinning
	t.Logf("largest gap between the steady processor's visible outputs: %s (commit interval %s, spinning record timeout %s)",
		gap, cfg.Kafka.CommitInterval, timeout)
	// Loose for a loaded machine, but below one spinning record's timeout:
	// a gap that long means the slow processor held the healthy one's
	// commit point.
	if gap >= timeout/2 {
		t.Errorf("the steady processor's output stalled for %s while another processor's records timed out (one group member per processor)", gap)
	}
	if st, _ := h.Stats("spin"); st.Skipped == 0 {
		t.Errorf("the spinning processor skipped no record; the test did not spin")
	}
}

// A plugin that floods time (I9 for the time imports of ABI.md section 8;
// engine/testdata/timebomb.wat): every record sets 1,000
// processing-time timers that are all due at once and marks 1,000 keys for
// commit calls, and both callbacks spin until their timeout. Its member keeps committing, one slow callback per commit
// point (checks and commit calls stop at the commit deadline; the rest wait
// for the next), each failure skipped with its kind; the healthy processor
// beside it never stalls; nothing aborts and the host does not stop.
func TestHostileTimers(t *testing.T) {
	b := testbroker.New(t)
	hin, hout, gin, gout := b.Name(t, "timebomb-in"), b.Name(t, "timebomb-out"), b.Name(t, "steady-in"), b.Name(t, "steady-out")
	for _, topic := range []string{hin, hout, gin, gout} {
		b.CreateTopic(t, topic, 1, nil)
	}
	const timeout = 2 * time.Second // a stall as long as one spinning call fails the test
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{
			{Name: "timebomb", Plugin: engineTestdata("timebomb"), Inputs: []string{hin}, Outputs: map[string]OutputConfig{"out": {Topic: hout}},
				Stores: []string{"s"}, OnError: OnErrorSkip, Limits: Limits{RecordTimeout: timeout}},
			{Name: "steady", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: gin, out: gout, cfg: cfg}
	rssBefore := vmRSS(t)
	h, stop := p.run(t)

	// Two records: 2,000 spinning timers due at once, 2,000 marked keys.
	b.Produce(t, &kgo.Record{Topic: hin, Value: []byte("a")}, &kgo.Record{Topic: hin, Value: []byte("b")})

	gapOf := watchGaps(t, b, gout)
	gap := gapOf(produceSteadily(t, b, gin, 200)) // 10s: several spinning calls
	rssAfter := vmRSS(t)
	bomb, _ := h.Stats("timebomb")
	steadyStats, _ := h.Stats("steady")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}
	t.Logf("steady processor's largest gap %s; timebomb: %d skipped, failures %v, %d commits, %d aborts; RSS %d -> %d MiB",
		gap, bomb.Skipped, bomb.Failures, bomb.Commits, bomb.Aborts, rssBefore>>20, rssAfter>>20)
	if gap >= timeout {
		t.Errorf("the steady processor stalled %s beside a processor whose timers spin", gap)
	}
	if bomb.Failures[runner.FailureTimeout.String()] < 2 {
		t.Errorf("timebomb: %d timeouts, want the spinning callbacks cut one after another", bomb.Failures[runner.FailureTimeout.String()])
	}
	if bomb.Aborts != 0 || steadyStats.Aborts != 0 {
		t.Errorf("aborted transactions: timebomb %d, steady %d; a slow callback must not hold a transaction to its timeout", bomb.Aborts, steadyStats.Aborts)
	}
	if bomb.Commits == 0 {
		t.Error("the timebomb processor never committed: its checks do not stop at the commit deadline")
	}
	if grew := rssAfter - rssBefore; grew > 512<<20 {
		t.Errorf("the process grew by %d MiB", grew>>20)
	}
}

// watchGaps starts reading topic read_committed from its start and returns
// a function that waits until n records became visible and returns the
// largest gap between two of them becoming visible.
func watchGaps(t *testing.T, b *testbroker.Broker, topic string) func(n int) time.Duration {
	seen := make(chan time.Time, 1024)
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(*kgo.Record) { seen <- now })
		}
	}()
	return func(n int) time.Duration {
		var gap time.Duration
		last := time.Time{}
		deadline := time.After(60 * time.Second)
		for i := 0; i < n; i++ {
			select {
			case at := <-seen:
				if !last.IsZero() && at.Sub(last) > gap {
					gap = at.Sub(last)
				}
				last = at
			case <-deadline:
				t.Fatalf("only %d of %d records became visible in %s", i, n, topic)
			}
		}
		return gap
	}
}

// produceSteadily writes n records to topic, one every 50ms, and returns n.
func produceSteadily(t *testing.T, b *testbroker.Broker, topic string, n int) int {
	for i := 0; i < n; i++ {
		b.Produce(t, &kgo.Record{Topic: topic, Key: []byte("s" + strconv.Itoa(i)), Value: []byte("v")})
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// A plugin writing state values near and over what its changelog takes in
// one record (1,048,000-byte values, under the ABI's 1 MiB, were once
// a poison pill: the changelog produce failed at every commit point, 30
// aborts and 6 restarts in 40 s, on_error never applied). With Kafka's
// defaults the changelog takes an entry (key and value) of 999,915 bytes:
// the writes over it fail their records at the state_put, through
// on_error, though the plugin ignores the errno; the others commit; no
// window aborts, under either guarantee.
func TestStateWritesTheChangelogRefuses(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			p := newPipeline(t, engineTestdata("bigput"), OnErrorDeadLetter)
			p.cfg.Guarantee = g
			p.cfg.State = StateConfig{Dir: t.TempDir()}
			p.cfg.Processors[0].Stores = []string{"s"}
			const entry = 1000012 - 97 // the producer's batch limit less the framing
			sizes := map[string]int{
				"at":   entry - 2,  // key "at": exactly the limit
				"half": 500000,     // well under
				"over": entry - 3,  // key "over": one byte over
				"big":  entry + 50, // over
				"1mb":  1048000,    // under MaxValueSize, over the changelog's limit
			}
			bad := map[string]bool{"over": true, "big": true, "1mb": true}
			var recs []*kgo.Record
			for k, n := range sizes {
				recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte(k), Value: binary.LittleEndian.AppendUint32(nil, uint32(n))})
			}
			h, stop := p.run(t)
			p.b.Produce(t, recs...)
			p.waitProcessed(t)
			st, _ := h.Stats("proc")
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			dead := map[string]string{}
			for _, r := range p.b.ReadCommitted(t, p.cfg.DeadLetterTopic(&p.cfg.Processors[0]), 30*time.Second) {
				for _, hd := range r.Headers {
					if hd.Key == runner.HeaderErrorKind {
						dead[string(r.Key)] = string(hd.Value)
					}
				}
			}
			logged := map[string]int{}
			for _, r := range p.b.ReadCommitted(t, p.cfg.ChangelogTopic("s"), 30*time.Second) {
				logged[string(r.Key)] = len(r.Value)
			}
			for k, n := range sizes {
				switch {
				case bad[k] && dead[k] != runner.FailureLimitExceeded.String():
					t.Errorf("%s (%d bytes): dead letter kind %q, want %s", k, n, dead[k], runner.FailureLimitExceeded)
				case bad[k] && logged[k] != 0:
					t.Errorf("%s (%d bytes) is in the changelog", k, n)
				case !bad[k] && (dead[k] != "" || logged[k] != n):
					t.Errorf("%s (%d bytes): dead-lettered %q, %d bytes in the changelog", k, n, dead[k], logged[k])
				}
			}
			if st.Aborts != 0 || st.RefusalAborts != 0 {
				t.Errorf("%d aborts, %d of them for refused records; want none", st.Aborts, st.RefusalAborts)
			}
		})
	}
}

// A processor that takes all the CPU it can (I9): on
// 8 partitions every record spins until its record timeout, so the
// spinning tasks occupy as many threads as the runner runs at once,
// beside a healthy passthrough processor in the same process. While the
// spinning goes on, the healthy processor must keep committing: round
// after round, the records produced to it are all committed before the
// spinning processor has worked through its records (48 records of 1 s,
// at most two at once on two cores: at least 24 s), where a processor
// starved of CPU or of its commit point would wait for the spinning to
// end. The condition is the order of the two, not a time. With one group
// member for both processors the healthy one waits up to one spinning
// record per commit point, no more: before tasks that had to wait for a
// processing slot past the commit deadline were left for the next poll,
// each poll ran all 8 spinning tasks (four record timeouts on two slots)
// and the healthy processor committed nothing until the spinning ended.
func TestSpinningNeighbourDoesNotStarveTheHealthy(t *testing.T) {
	for _, members := range []Members{MembersPerProcessor, MembersShared} {
		t.Run(string(members), func(t *testing.T) { testSpinningNeighbour(t, members) })
	}
}

func testSpinningNeighbour(t *testing.T, members Members) {
	b := testbroker.New(t)
	sin, sout, gin, gout := b.Name(t, "spin-in"), b.Name(t, "spin-out"), b.Name(t, "steady-in"), b.Name(t, "steady-out")
	const spinParts, spinsPerPart = 8, 6
	b.CreateTopic(t, sin, spinParts, nil)
	b.CreateTopic(t, sout, 1, nil)
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second, Members: members},
		Processors: []ProcessorConfig{
			{Name: "spin", Plugin: engineTestdata("loop"), Inputs: []string{sin}, Outputs: map[string]OutputConfig{"out": {Topic: sout}},
				OnError: OnErrorSkip, Limits: Limits{RecordTimeout: time.Second}},
			{Name: "steady", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail},
		},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: gin, out: gout, cfg: cfg}
	h, stop := p.run(t)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// Both healthy tasks run (and are measured cheap) before the
	// spinning starts.
	for part := range int32(2) {
		b.ProduceTo(t, part, &kgo.Record{Topic: gin, Key: []byte("warm"), Value: []byte("v")})
	}
	p.waitProcessed(t)

	var spins []*kgo.Record
	for part := range int32(spinParts) {
		for i := range spinsPerPart {
			spins = append(spins, &kgo.Record{Topic: sin, Partition: part, Key: []byte("spin"), Value: []byte(strconv.Itoa(i))})
		}
	}
	for part := range int32(spinParts) {
		b.ProduceTo(t, part, spins[int(part)*spinsPerPart:int(part+1)*spinsPerPart]...)
	}
	skipped := func() int64 {
		st, _ := h.Stats("spin")
		return st.Skipped
	}
	// The spinning is under way: its first records timed out.
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := skipped(); n < 2 {
			return fmt.Errorf("the spinning processor skipped %d records", n)
		}
		return nil
	})
	const rounds = 4
	for round := range rounds {
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: gin, Key: []byte(fmt.Sprintf("r%d-%d", round, i)), Value: []byte("v")})
		}
		b.Produce(t, recs...)
		p.waitProcessed(t)
		t.Logf("round %d committed; the spinning processor has skipped %d of %d records", round, skipped(), spinParts*spinsPerPart)
	}
	if n := skipped(); n >= spinParts*spinsPerPart {
		t.Errorf("the healthy processor committed its %d rounds only after the spinning processor had spun through all %d records: it was starved", rounds, n)
	}
	steady, _ := h.Stats("steady")
	if steady.Aborts != 0 {
		t.Errorf("the healthy processor aborted %d transactions", steady.Aborts)
	}
}

// Every hostile module of the engine's suite at once, each as a processor
// of its own with small limits (16 MiB of memory, 4 MiB of state and 1 MiB
// of emits per record, a 5 MiB window, a 500 ms record timeout), beside a
// healthy passthrough processor (the task's account): each attack is stopped
// with its kind (limit_exceeded where the host refused a call with
// ELIMIT or ETOOLARGE, timeout, memory_limit, stack_limit), no record of
// the healthy processor fails (the process's budget is shared: a charge it
// could not cover would fail one) and all of them commit, nothing aborts,
// the host does not stop, and the process grows by less than the account's
// peak (instances' memory included) plus a fixed overhead per instance and
// per process.
func TestEveryHostileModuleBesideAHealthyOne(t *testing.T) {
	b := testbroker.New(t)
	big := func(n int) []byte { return []byte(strings.Repeat("v", n)) }
	le32 := func(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }
	cases := []struct {
		name, module string
		key          string
		value        []byte
		kind         runner.FailureKind
		store        bool
	}{
		{"stager", "stager", "k", []byte("v"), runner.FailureLimitExceeded, true}, // 15 puts of 990,000 bytes: past 4 MiB
		{"stateflood", "hostile", "stat", big(512 << 10), runner.FailureLimitExceeded, true},
		{"emitflood", "hostile", "ecnt", []byte("v"), runner.FailureLimitExceeded, true},
		{"bigemit", "hostile", "emit", big(512 << 10), runner.FailureLimitExceeded, true},
		{"bigput", "bigput", "kk", le32(1_000_000), runner.FailureLimitExceeded, true}, // over the changelog's entry
		{"spin", "loop", "spin", []byte("v"), runner.FailureTimeout, false},
		{"slowinput", "slowinput", "k", big(10_000), runner.FailureTimeout, false},
		// Grows a page at a time to its limit: to 16 MiB under -race
		// that took 3.3 s, longer than the others' record timeout, so it
		// gets 2 MiB and 4 s (below).
		{"membomb", "membomb", "bomb", []byte("v"), runner.FailureMemoryLimit, false},
		{"deep", "hostile", "deep", []byte("v"), runner.FailureStackLimit, true},
		{"tablefill", "hostile", "tfil", []byte("v"), runner.FailureTimeout, true},
		{"timebomb", "timebomb", "k", []byte("v"), runner.FailureTimeout, true},
	}
	limits := Limits{Memory: 16 << 20, StateBytesPerRecord: 4 << 20, EmitBytesPerRecord: 1 << 20, WindowBytes: 5 << 20,
		RecordTimeout: 500 * time.Millisecond}
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		State: StateConfig{Dir: t.TempDir()},
		// Small, but what one task may hold twice over (validation).
		Runtime: RuntimeConfig{CacheDir: testCache(), MemoryBudget: 64 << 20},
	}
	ins := map[string]string{}
	for _, c := range cases {
		in, out := b.Name(t, c.name+"-in"), b.Name(t, c.name+"-out")
		b.CreateTopic(t, in, 1, nil)
		b.CreateTopic(t, out, 1, nil)
		ins[c.name] = in
		l := limits
		if c.kind == runner.FailureMemoryLimit {
			// The bomb must reach its memory limit, not its time: a
			// smaller limit and a longer timeout (under half the
			// transaction timeout).
			l.Memory, l.RecordTimeout = 2<<20, 4*time.Second
		}
		p := ProcessorConfig{Name: c.name, Plugin: engineTestdata(c.module), Inputs: []string{in},
			Outputs: map[string]OutputConfig{"out": {Topic: out}}, OnError: OnErrorSkip, Limits: l}
		if c.store {
			p.Stores = []string{"s-" + c.name}
		}
		cfg.Processors = append(cfg.Processors, p)
	}
	gin, gout := b.Name(t, "healthy-in"), b.Name(t, "healthy-out")
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg.Processors = append(cfg.Processors, ProcessorConfig{Name: "healthy", Plugin: engineTestdata("passthrough"), Inputs: []string{gin},
		Outputs: map[string]OutputConfig{"out": {Topic: gout}}, OnError: OnErrorSkip, Limits: limits})

	rssBefore := vmRSS(t)
	h, stop := (&pipeline{b: b, in: gin, cfg: cfg}).run(t)
	const healthyN = 50 // per round
	// round produces one attack to every hostile processor and healthyN
	// records to the healthy one, waits until all are committed, and
	// returns every processor's stats.
	round := func(r int) map[string]ProcessorStats {
		for _, c := range cases {
			b.Produce(t, &kgo.Record{Topic: ins[c.name], Key: []byte(c.key), Value: c.value})
		}
		for i := range healthyN {
			b.Produce(t, &kgo.Record{Topic: gin, Key: []byte(fmt.Sprintf("g%d-%d", r, i)), Value: []byte("ok")})
		}
		for _, c := range cases {
			(&pipeline{b: b, in: ins[c.name], cfg: cfg}).waitProcessed(t)
		}
		(&pipeline{b: b, in: gin, cfg: cfg}).waitProcessed(t)
		stats := map[string]ProcessorStats{}
		for _, p := range cfg.Processors {
			stats[p.Name], _ = h.Stats(p.Name)
		}
		return stats
	}
	// The first round also waits out the group's rebalances as the
	// processors' members join (which abort open transactions); the
	// second runs in a settled group.
	first := round(0)
	stats := round(1)
	rssAfter := vmRSS(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}
	for _, c := range cases {
		st := stats[c.name]
		if n := st.Failures[c.kind.String()] - first[c.name].Failures[c.kind.String()]; n < 1 {
			t.Errorf("%s: the second round's attack did not fail with %s; failures %v", c.name, c.kind, st.Failures)
		}
		if a := st.Aborts - first[c.name].Aborts; a != 0 {
			t.Errorf("%s: %d transactions aborted in the second round", c.name, a)
		}
		t.Logf("%s: failures %v, aborts %d (%d in the first round)", c.name, st.Failures, st.Aborts, first[c.name].Aborts)
	}
	if g := stats["healthy"]; len(g.Failures) != 0 || g.Aborts != first["healthy"].Aborts {
		t.Errorf("the healthy processor: failures %v, %d aborts (%d in the first round)", g.Failures, g.Aborts, first["healthy"].Aborts)
	}
	if got := len(b.ReadCommitted(t, gout, 30*time.Second)); got < 2*healthyN {
		t.Errorf("the healthy processor's output holds %d records, want %d", got, 2*healthyN)
	}
	// The documented bound (abi/ABI.md section 7), loosely: what the
	// account held at its peak (the instances' linear memory included),
	// 16 MiB per instance for what is not in it (stack, tables, cursors'
	// bounds, log buffers) and a fixed overhead for the rest (the store's
	// batches, clients, compiled code).
	pool := h.memory
	if pool.Peak() > pool.Budget() {
		t.Errorf("the account held %d bytes at its peak, past the budget of %d", pool.Peak(), pool.Budget())
	}
	bound := pool.Peak() + int64(len(cfg.Processors)+1)*16<<20 + 256<<20
	t.Logf("RSS %d MiB -> %d MiB (+%d MiB; account peak %d MiB, bound %d MiB)", rssBefore>>20, rssAfter>>20, (rssAfter-rssBefore)>>20, pool.Peak()>>20, bound>>20)
	if grew := rssAfter - rssBefore; grew > bound {
		t.Errorf("the process grew by %d MiB, over %d MiB", grew>>20, bound>>20)
	}
}
