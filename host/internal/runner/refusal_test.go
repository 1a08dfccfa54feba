package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// A record the broker refuses fails only that record (refusal.go).

func TestRefusalError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kerr.MessageTooLarge, true},
		{fmt.Errorf("%w (uncompressed_bytes=9)", kerr.MessageTooLarge), true},
		{kerr.InvalidTimestamp, true},
		{kerr.InvalidRecord, true},
		{kerr.CorruptMessage, true},
		{kerr.RecordListTooLarge, true},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.TopicAuthorizationFailed, false},
		{kerr.InvalidProducerEpoch, false},
		{kgo.ErrRecordTimeout, false},
		{errors.New("broker gone"), false},
	} {
		if got := refusalError(c.err); got != c.want {
			t.Errorf("refusalError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestTopicLimitTimestamps(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	ms := now.UnixMilli()
	lim := TopicLimit{TimestampAfter: time.Hour, TimestampBefore: 24 * time.Hour}
	for _, c := range []struct {
		ts   time.Time
		want error
	}{
		{time.Time{}, nil}, // stamped when produced
		{now, nil},
		{now.Add(59 * time.Minute), nil},
		{now.Add(2 * time.Hour), abi.ErrnoTimestamp},
		{now.Add(-23 * time.Hour), nil},
		{now.Add(-25 * time.Hour), abi.ErrnoTimestamp},
	} {
		err := lim.check(&kgo.Record{Timestamp: c.ts}, ms)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("timestamp %v: %v, want %v", c.ts.Sub(now), err, c.want)
		}
	}
	if err := (TopicLimit{}).check(&kgo.Record{Timestamp: now.Add(1000 * time.Hour)}, ms); err != nil {
		t.Errorf("no limits: %v", err)
	}
	err := lim.check(&kgo.Record{Timestamp: now.Add(2 * time.Hour)}, ms)
	if !strings.Contains(err.Error(), "message.timestamp.after.max.ms") || !strings.Contains(err.Error(), "2h0m0s ahead") {
		t.Errorf("the error does not say what and by how much: %v", err)
	}
}

// A refused output fails its call on every pass until a window that used
// the entry commits; a dead letter refused for its timestamp is stamped
// anew first and refused for good only when the new stamp is refused too;
// an entry no committed window used stays.
func TestRefusedSet(t *testing.T) {
	r := &Runner{refused: NewRefused()}
	tk := &task{r: r}
	out := originKey{processor: "p", topic: "in", partition: 1, offset: 5}
	dl := originKey{processor: "p", topic: "in", partition: 1, offset: 6}
	idle := originKey{processor: "p", topic: "in", partition: 1, offset: 7}
	r.refused.convict(out, "out", kerr.InvalidTimestamp, false, false)
	r.refused.convict(dl, "dlq", kerr.InvalidTimestamp, true, false)
	r.refused.convict(idle, "out", kerr.MessageTooLarge, false, false)
	for pass := range 2 { // a window aborted again fails the call again
		if err := tk.failRefusedCall(out, false); failureKind(err) != FailureRefused || !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("pass %d: refused output: %v", pass, err)
		}
	}
	if err := tk.failRefusedCall(out, true); err != nil {
		t.Fatalf("a call that failed by itself produced nothing to refuse: %v", err)
	}
	if err := tk.failRefusedCall(dl, false); err != nil {
		t.Fatalf("a call whose dead letter was refused succeeded: %v", err)
	}
	c, _ := r.refused.get(dl)
	if !c.restamp || c.deadLetter != nil {
		t.Fatalf("a dead letter refused for its timestamp is stamped anew first: %+v", c)
	}
	r.refused.convict(dl, "dlq", kerr.InvalidTimestamp, true, true)
	if c, _ := r.refused.get(dl); !errors.Is(c.deadLetter, kerr.InvalidTimestamp) {
		t.Fatalf("a restamped dead letter refused again cannot be written: %+v", c)
	}
	r.refused.committed()
	if r.refused.Len() != 1 {
		t.Fatalf("%d entries after the commit, want the one no window used", r.refused.Len())
	}
	if err := tk.failRefusedCall(idle, false); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("the unused entry: %v", err)
	}
	if err := tk.failRefusedCall(out, false); err != nil {
		t.Fatalf("a committed entry is forgotten: %v", err)
	}
}

// A refused changelog write fails exactly the writes of its value under
// its key until a window that matched it commits; a key refused again
// before any pass wrote the value refused first (the plugin's values
// change between passes) fails every write of the key.
func TestRefusedWrites(t *testing.T) {
	s := NewRefused()
	k := entryKey{topic: "clog", partition: 1, key: "a"}
	v1, v2, v3 := sumOf([]byte("one"), false), sumOf([]byte("two"), false), sumOf([]byte("three"), false)
	s.convictEntry(k, "s", v1, kerr.InvalidRecord)
	if !s.hasEntries() {
		t.Fatal("a convicted write is not in the set")
	}
	if err := s.write(k, v2); err != nil {
		t.Fatalf("another value of the key: %v", err)
	}
	if err := s.write(entryKey{topic: "clog", partition: 0, key: "a"}, v1); err != nil {
		t.Fatalf("the value under the key of another partition: %v", err)
	}
	if err := s.write(k, sumOf(nil, true)); err != nil {
		t.Fatalf("a delete of the key: %v", err)
	}
	err := s.write(k, v1)
	var re *RefusedError
	if failureKind(err) != FailureRefused || !errors.Is(err, kerr.InvalidRecord) || !errors.As(err, &re) || re.Store != "s" {
		t.Fatalf("the refused write: %v", err)
	}
	s.committed()
	if s.hasEntries() || s.Len() != 0 {
		t.Fatalf("a write matched by a committed window is forgotten: %d left", s.Len())
	}

	// Values that change between passes.
	s.convictEntry(k, "s", v1, kerr.InvalidRecord)
	s.committed() // a window that did not write it: kept
	if s.Len() != 1 {
		t.Fatalf("an unmatched write was forgotten")
	}
	s.convictEntry(k, "s", v2, kerr.InvalidRecord)
	if err := s.write(k, v3); failureKind(err) != FailureRefused {
		t.Fatalf("a key refused twice without a match fails every write: %v", err)
	}
	s.committed()
	if s.Len() != 0 {
		t.Fatalf("%d left after the commit", s.Len())
	}

	// A key whose value refused was written again, refused for another
	// value: only the values fail.
	s.convictEntry(k, "s", v1, kerr.InvalidRecord)
	_ = s.write(k, v1)
	s.convictEntry(k, "s", v2, kerr.InvalidRecord)
	if err := s.write(k, v3); err != nil {
		t.Fatalf("a third value after a match: %v", err)
	}
	if s.write(k, v1) == nil || s.write(k, v2) == nil {
		t.Fatal("the two values refused are not both refused")
	}
}

// fakeProber refuses any probe holding a record whose key is in refuse,
// and, if batch is set, any probe of more than batch records (as a topic
// refuses a batch over its limit of records it takes one by one).
type fakeProber struct {
	refuse map[string]bool
	batch  int
	probes atomic.Int32
}

func (p *fakeProber) probe(_ context.Context, recs []*kgo.Record) (error, error) {
	p.probes.Add(1)
	if p.batch > 0 && len(recs) > p.batch {
		return kerr.MessageTooLarge, nil
	}
	for _, r := range recs {
		if p.refuse[string(r.Key)] {
			return kerr.InvalidRecord, nil
		}
	}
	return nil, nil
}
func (p *fakeProber) close() {}

// outputSuspects is n refused outputs (keys k0...) of as many input records
// of processor p (offsets 0...), refused with err.
func outputSuspects(n int, err error) []suspect {
	var list []suspect
	var o origins
	for i := range n {
		key := originKey{processor: "p", topic: "in", offset: int64(i)}
		rec := &kgo.Record{Topic: "out", Key: []byte("k" + strconv.Itoa(i))}
		list = append(list, suspect{refusal: refusal{rec: rec, o: o.new(key, false), err: err}, call: key})
	}
	return list
}

// Probing halves the suspects until it holds the culprits: the refused
// records' neighbours, refused with them, are cleared.
func TestProbeFindsTheCulprits(t *testing.T) {
	p := &fakeProber{refuse: map[string]bool{"k17": true, "k90": true}}
	r := &Runner{refused: NewRefused(), prober: p, log: testLogger(t)}
	cp := &commitPoint{r: r}
	if n := cp.probeSuspects(context.Background(), outputSuspects(100, kerr.InvalidRecord), nil); n != 2 {
		t.Fatalf("convicted %d, want 2", n)
	}
	if r.refused.Len() != 2 {
		t.Fatalf("%d refused", r.refused.Len())
	}
	for _, off := range []int64{17, 90} {
		if c, _ := r.refused.get(originKey{processor: "p", topic: "in", offset: off}); !errors.Is(c.output, kerr.InvalidRecord) {
			t.Errorf("offset %d: %v", off, c.output)
		}
	}
	if n := p.probes.Load(); n > 2*7*2 {
		t.Errorf("%d probes for 2 culprits among 100", n)
	}
	t.Logf("%d probes", p.probes.Load())
}

// A probe refused for what its records are together (a batch over the
// topic's limit: the limits could not be read again, so the probe's
// batches are the producer's) convicts nobody: every conviction is of a
// culprit whose probe alone was refused. Before, a half probed clean
// convicted the other half's last culprit without probing it, and an
// innocent record was dead-lettered as refused.
func TestProbeConvictsOnlyWhatIsRefusedAlone(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse map[string]bool
		batch  int
		want   []int64
	}{
		{"none refused alone", nil, 3, nil},
		{"one refused alone", map[string]bool{"k29": true}, 10, []int64{29}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &fakeProber{refuse: c.refuse, batch: c.batch}
			r := &Runner{refused: NewRefused(), prober: p, log: testLogger(t)}
			n := (&commitPoint{r: r}).probeSuspects(context.Background(), outputSuspects(40, kerr.MessageTooLarge), nil)
			if n != len(c.want) || r.refused.Len() != len(c.want) {
				t.Fatalf("convicted %d (set %d), want %v", n, r.refused.Len(), c.want)
			}
			for _, off := range c.want {
				if got, _ := r.refused.get(originKey{processor: "p", topic: "in", offset: off}); got.output == nil {
					t.Errorf("offset %d not convicted", off)
				}
			}
			t.Logf("%d probes", p.probes.Load())
		})
	}
}

// runUntilDone runs runners built by mk until ctx ends, replacing one that
// stops with an error as the host does (a LimitsChangedError among them);
// it returns how many were replaced.
func runUntilDone(t *testing.T, ctx context.Context, mk func() *Runner) (restarts int) {
	t.Helper()
	for {
		r := mk()
		err := r.Run(ctx)
		if ctx.Err() != nil {
			return restarts
		}
		var lce *LimitsChangedError
		if !errors.As(err, &lce) {
			t.Errorf("runner stopped: %v", err)
		}
		t.Logf("runner replaced: %v", err)
		restarts++
	}
}

// refusalCase runs the upper-casing plugin over inputs some of which make
// outputs the output topic refuses, with on_error: dead_letter, and checks
// that exactly those are dead-lettered (with kind) and every other comes
// out (once under exactly_once), at most one abort per refused record.
type refusalCase struct {
	eos      bool
	limits   bool // the runner reads the topics' limits (BrokerLimits)
	outConf  map[string]string
	inConf   map[string]string
	lower    map[string]string // set on the output topic after the first records
	bad      func(i int) bool  // inputs whose output is refused
	input    func(i int) *kgo.Record
	n        int
	wantKind func(kind string) bool
	// realOnly, if set, says why the case needs a real broker.
	realOnly string
}

func (c refusalCase) run(t *testing.T) {
	f := newFixture(t, c.eos, 2)
	if c.realOnly != "" {
		f.b.RequireReal(t, c.realOnly)
	}
	f.in, f.out = f.b.Name(t, "rin"), f.b.Name(t, "rout")
	f.b.CreateTopic(t, f.in, 2, c.inConf)
	f.b.CreateTopic(t, f.out, 2, c.outConf)
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			rec := c.input(i)
			rec.Topic = f.in
			recs = append(recs, rec)
		}
		f.b.Produce(t, recs...)
	}
	stats := map[string]*Stats{"upper": newStats()}
	refused := NewRefused()
	mk := func() *Runner {
		return f.runnerWith(t, &goPlugin{}, DeadLetter, func(o *Options) {
			o.Stats = stats
			o.Refused = refused
			if c.limits {
				o.Limits = BrokerLimits(o.Kafka)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runUntilDone(t, ctx, mk) }()
	first := c.n / 4
	produce(0, first)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if c.lower != nil {
		alterTopic(t, f, f.out, "lowering the output topic's limits", c.lower)
	}
	produce(first, c.n)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	cancel()
	restarts := <-done

	bad := 0
	for i := range c.n {
		if c.bad(i) {
			bad++
		}
	}
	// The runner has stopped; its last transaction's markers may still be
	// on their way to the topics (Kafka writes them after EndTxn returns).
	out := f.b.ReadCommittedAfterStop(t, f.out, 30*time.Second)
	seen := map[string]int{}
	for _, o := range out {
		seen[string(o.Key)]++
	}
	for i := range c.n {
		k := string(c.input(i).Key)
		switch n := seen[k]; {
		case c.bad(i) && n != 0:
			t.Errorf("input %s, whose output is refused, came out %d times", k, n)
		case !c.bad(i) && n == 0:
			t.Errorf("input %s is lost", k)
		case !c.bad(i) && c.eos && n != 1:
			t.Errorf("input %s came out %d times under exactly_once", k, n)
		}
	}
	dlq := f.b.ReadCommittedAfterStop(t, f.dlq, 30*time.Second)
	dead := map[string]int{}
	for _, d := range dlq {
		dead[string(d.Key)]++
		h := map[string]string{}
		for _, kv := range d.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if !c.wantKind(h[HeaderErrorKind]) {
			t.Errorf("dead letter %s: kind %q (error %q)", d.Key, h[HeaderErrorKind], h[HeaderError])
		}
		if len(dead) == 1 {
			t.Logf("dead letter %s: %s: %s", d.Key, h[HeaderErrorKind], h[HeaderError])
		}
	}
	for i := range c.n {
		k := string(c.input(i).Key)
		if c.bad(i) && (dead[k] == 0 || c.eos && dead[k] != 1) {
			t.Errorf("input %s: %d dead letters", k, dead[k])
		}
		if !c.bad(i) && dead[k] != 0 {
			t.Errorf("input %s, accepted, was dead-lettered", k)
		}
	}
	s := stats["upper"]
	if a := s.RefusalAborts.Load(); a > int64(bad) {
		t.Errorf("%d aborts for %d refused records: a record caused more than one", a, bad)
	}
	if restarts > 1 {
		t.Errorf("%d runner restarts, want at most 1", restarts)
	}
	t.Logf("%d refused records: %d refusal aborts, %d aborts, %d restarts, %d dead letters, %d outputs",
		bad, s.RefusalAborts.Load(), s.Aborts.Load(), restarts, len(dlq), len(out))
}

// letters is n pseudo-random lower-case letters, seeded by i: a value
// franz-go's compression (snappy by default) cannot shrink much, which the
// broker's size limit applies to.
func letters(n, i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	b := make([]byte, n)
	for k := range b {
		b[k] = 'a' + byte(rng.IntN(26))
	}
	return b
}

func small(i int) *kgo.Record {
	return &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}
}

// An operator lowers the output topic's max.message.bytes while the runner
// runs: the first refusal reads the limits again (and restarts the runner,
// whose batches were larger than the topic now takes); from then on Emit
// refuses the large outputs as their records' failures.
func testLoweredMaxMessageBytes(t *testing.T, eos bool) {
	// The first quarter is produced before the limit is lowered.
	bad := func(i int) bool { return i%100 == 70 && i >= 100 }
	refusalCase{
		eos: eos, limits: true, n: 400,
		lower: map[string]string{"max.message.bytes": "4096"},
		bad:   bad,
		input: func(i int) *kgo.Record {
			rec := small(i)
			if bad(i) {
				rec.Value = letters(6000, i)
			}
			return rec
		},
		// The Go stand-in plugin returns Emit's error as it is: the
		// engine would make it limit_exceeded.
		wantKind: func(k string) bool { return k == "error" || k == "refused" },
	}.run(t)
}

// A refusal no limit the runner knows explains (it reads none here: a
// broker's own reasons look the same): probing finds the record, which
// fails on the next pass as kind "refused" with the broker's error, and
// its neighbours, refused with it, are produced.
func testUnexplainedRefusal(t *testing.T, eos bool) {
	bad := func(i int) bool { return i%100 == 70 }
	refusalCase{
		eos: eos, n: 400,
		outConf: map[string]string{"max.message.bytes": "262144"},
		bad:     bad,
		input: func(i int) *kgo.Record {
			rec := small(i)
			if bad(i) {
				rec.Value = letters(300_000, i)
			}
			return rec
		},
		wantKind: func(k string) bool { return k == "refused" },
	}.run(t)
}

func TestRefusedRecords(t *testing.T) {
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Run("LoweredMaxMessageBytes", func(t *testing.T) { testLoweredMaxMessageBytes(t, mode.eos) })
			t.Run("UnexplainedRefusal", func(t *testing.T) { testUnexplainedRefusal(t, mode.eos) })
		})
	}
}

// Kafka refuses records whose timestamp is too far ahead of its clock
// (message.timestamp.after.max.ms, an hour by default since Kafka 4.0).
// With the limits read, Emit refuses them (ETIMESTAMP, no abort); without,
// the broker does and probing finds them.
func TestFutureTimestamps(t *testing.T) {
	for _, limits := range []bool{true, false} {
		for _, eos := range []bool{true, false} {
			t.Run(fmt.Sprintf("limits=%v/eos=%v", limits, eos), func(t *testing.T) {
				future := time.Now().Add(2 * time.Hour)
				bad := func(i int) bool { return i%100 == 70 }
				c := refusalCase{
					eos: eos, limits: limits, n: 400,
					// The input takes them; the output refuses them.
					inConf:  map[string]string{"message.timestamp.after.max.ms": strconv.Itoa(int((24 * time.Hour).Milliseconds()))},
					outConf: map[string]string{"message.timestamp.after.max.ms": strconv.Itoa(int(time.Hour.Milliseconds()))},
					bad:     bad,
					input: func(i int) *kgo.Record {
						rec := small(i)
						if bad(i) {
							rec.Timestamp = future
						}
						return rec
					},
					wantKind: func(k string) bool {
						if limits {
							return k == "error" // limit_exceeded through the engine
						}
						return k == "refused"
					},
					realOnly: "kfake checks no timestamps",
				}
				c.run(t)
			})
		}
	}
}

// alterTopic sets the configs of topic on the broker, failing the test
// with what of the topic it was changing (what).
func alterTopic(t *testing.T, f *fixture, topic, what string, configs map[string]string) {
	t.Helper()
	alter := make([]kadm.AlterConfig, 0, len(configs))
	for k, v := range configs {
		alter = append(alter, kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := f.b.Admin(t).AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
