package testbroker_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// readTimeout bounds each ReadCommitted in these tests; reads take
// milliseconds on both brokers.
const readTimeout = 30 * time.Second

var validName = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

func TestName(t *testing.T) {
	b := testbroker.New(t)
	a, c := b.Name(t, "in"), b.Name(t, "in")
	if a == c {
		t.Fatalf("two names are equal: %q", a)
	}
	if !strings.HasPrefix(a, "in-TestName-") || !validName.MatchString(a) {
		t.Fatalf("name %q: want prefix in-TestName- and only [A-Za-z0-9-]", a)
	}

	t.Run(strings.Repeat("long sub_test.name/", 20), func(t *testing.T) {
		n := b.Name(t, strings.Repeat("p.", 100))
		if len(n) >= 200 || !validName.MatchString(n) {
			t.Fatalf("name %q (%d chars): want < 200 chars of [A-Za-z0-9-]", n, len(n))
		}
		// The broker agrees it is a valid topic name.
		b.CreateTopic(t, n, 1, nil)
	})
}

// values returns the record values as strings.
func values(recs []*kgo.Record) []string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// checkOrdered fails t unless recs are ordered by partition, then offset.
func checkOrdered(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		p, q := recs[i-1], recs[i]
		if p.Partition > q.Partition || p.Partition == q.Partition && p.Offset >= q.Offset {
			t.Fatalf("records %d and %d out of order: %d/%d then %d/%d", i-1, i, p.Partition, p.Offset, q.Partition, q.Offset)
		}
	}
}

func TestCreateProduceRead(t *testing.T) {
	b := testbroker.New(t)
	if len(b.Addrs()) == 0 {
		t.Fatal("no addresses")
	}
	topic := b.Name(t, "in")
	b.CreateTopic(t, topic, 3, map[string]string{"retention.ms": "86400000"})

	// The topic config reached the broker.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := b.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = c.MaybeValue() == "86400000"
		}
	}
	if !found {
		t.Fatalf("retention.ms=86400000 not in topic configs %+v", rc.Configs)
	}

	if got := b.ReadCommitted(t, topic, readTimeout); len(got) != 0 {
		t.Fatalf("new topic: read %d records, want 0", len(got))
	}

	var want []string
	var keyed []*kgo.Record
	for i := range 30 {
		v := fmt.Sprintf("k%d", i)
		keyed = append(keyed, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)})
		want = append(want, v)
	}
	b.Produce(t, keyed...)
	var p2 []*kgo.Record
	var wantP2 []string
	for i := range 5 {
		v := fmt.Sprintf("p2-%d", i)
		p2 = append(p2, &kgo.Record{Topic: topic, Value: []byte(v)})
		wantP2 = append(wantP2, v)
	}
	b.ProduceTo(t, 2, p2...)
	want = append(want, wantP2...)

	got := b.ReadCommitted(t, topic, readTimeout)
	checkOrdered(t, got)
	gotVals := values(got)
	slices.Sort(gotVals)
	slices.Sort(want)
	if !slices.Equal(gotVals, want) {
		t.Fatalf("read %v\nwant %v", gotVals, want)
	}
	var last2 []string
	for _, r := range got {
		if r.Partition == 2 && strings.HasPrefix(string(r.Value), "p2-") {
			last2 = append(last2, string(r.Value))
		}
	}
	if !slices.Equal(last2, wantP2) {
		t.Fatalf("partition 2 has %v, want %v in that order", last2, wantP2)
	}
	// Keys are spread like the Java producer's murmur2: 30 keys over 3
	// partitions never all land in one.
	parts := map[int32]bool{}
	for _, r := range got {
		parts[r.Partition] = true
	}
	if len(parts) < 2 {
		t.Fatalf("30 keyed records all in partitions %v", parts)
	}
}

func TestReadCommittedSkipsAborted(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "out")
	b.CreateTopic(t, topic, 2, nil)

	txn := b.Client(t,
		kgo.TransactionalID(b.Name(t, "txn")),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	transact := func(commit kgo.TransactionEndTry, vals ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			r := &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction (commit=%v): %v", commit, err)
		}
	}
	transact(kgo.TryCommit, "c0", "c1")
	transact(kgo.TryAbort, "a0", "a1")
	b.ProduceTo(t, 0, &kgo.Record{Topic: topic, Value: []byte("after")})
	// Partition 1 now ends with an abort marker; partition 0 with a plain record.

	got := b.ReadCommitted(t, topic, readTimeout)
	checkOrdered(t, got)
	if want := []string{"c0", "after", "c1"}; !slices.Equal(values(got), want) {
		t.Fatalf("read committed %v, want %v", values(got), want)
	}
}

func listStart(t *testing.T, b *testbroker.Broker, topic string) kadm.ListedOffsets {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	starts, err := b.Admin(t).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return starts
}

func produceN(t *testing.T, b *testbroker.Broker, topic string, partition int32, n int, prefix string) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)})
	}
	b.ProduceTo(t, partition, recs...)
}

func TestDeleteRecords(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "in")
	b.CreateTopic(t, topic, 1, nil)
	produceN(t, b, topic, 0, 10, "r")

	b.DeleteRecords(t, topic, 0, 4)

	if s := listStart(t, b, topic)[topic][0].Offset; s != 4 {
		t.Fatalf("log start %d after DeleteRecords(4), want 4", s)
	}
	got := b.ReadCommitted(t, topic, readTimeout)
	if len(got) != 6 || got[0].Offset != 4 || string(got[0].Value) != "r4" {
		t.Fatalf("read %v, want r4..r9 from offset 4", values(got))
	}
}

func TestExpireOldSegments(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	const keep = "86400000"
	b.CreateTopic(t, topic, 2, map[string]string{"retention.ms": keep})
	produceN(t, b, topic, 0, 5, "old")
	produceN(t, b, topic, 1, 3, "old")

	start := time.Now()
	b.ExpireOldSegments(t, topic)
	t.Logf("expired in %v", time.Since(start).Round(time.Millisecond))

	starts := listStart(t, b, topic)
	if s0, s1 := starts[topic][0].Offset, starts[topic][1].Offset; s0 < 5 || s1 < 3 {
		t.Fatalf("log starts %d, %d after expiry, want >= 5, 3", s0, s1)
	}

	// Retention is back to the topic's override, so new data stays.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := b.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() != keep {
			t.Fatalf("retention.ms is %q after expiry, want %s restored", c.MaybeValue(), keep)
		}
	}
	produceN(t, b, topic, 0, 1, "new")
	if got := values(b.ReadCommitted(t, topic, readTimeout)); !slices.Equal(got, []string{"new0"}) {
		t.Fatalf("read %v after expiry, want [new0]", got)
	}
}

func TestRequireReal(t *testing.T) {
	b := testbroker.New(t)
	ran := false
	t.Run("sub", func(t *testing.T) {
		b.RequireReal(t, "checking RequireReal")
		ran = true
	})
	if ran != b.Real() {
		t.Fatalf("RequireReal let the test run = %v on Real() = %v", ran, b.Real())
	}
	if (b.Fake() == nil) != b.Real() {
		t.Fatalf("Fake() = %v on Real() = %v", b.Fake(), b.Real())
	}
}

// TestFakeFault shows fault injection through Fake: the first produce to the
// topic is answered NOT_LEADER_FOR_PARTITION, and Produce still succeeds
// because the client retries.
func TestFakeFault(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "injects a fault with kfake.Cluster.Fault")
	topic := b.Name(t, "in")
	b.CreateTopic(t, topic, 1, nil)

	h := b.Fake().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotLeaderForPartition})
	produceN(t, b, topic, 0, 1, "r")
	if h.Hits() != 1 {
		t.Fatalf("fault answered %d requests, want 1", h.Hits())
	}
	if got := values(b.ReadCommitted(t, topic, readTimeout)); !slices.Equal(got, []string{"r0"}) {
		t.Fatalf("read %v, want [r0]", got)
	}
}

// TestRestart restarts the broker and checks data and clients survive. On the
// real broker it restarts the shared broker (about 3 s): run it on its own.
func TestRestart(t *testing.T) {
	b := testbroker.New(t, testbroker.Restartable())
	topic := b.Name(t, "in")
	b.CreateTopic(t, topic, 2, nil)
	produceN(t, b, topic, 0, 3, "before")

	b.Restart(t)

	produceN(t, b, topic, 1, 1, "after")
	got := values(b.ReadCommitted(t, topic, readTimeout))
	if want := []string{"before0", "before1", "before2", "after0"}; !slices.Equal(got, want) {
		t.Fatalf("read %v after restart, want %v", got, want)
	}
}

func TestRestartNeedsRestartable(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "on the real broker Restart always works")
	// Restart must fail the test, not hang or silently lose data. Run it on
	// a stand-in TB that records the failure.
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Restart(ft)
	}()
	<-done
	if !strings.Contains(ft.msg, "Restartable") {
		t.Fatalf("Restart without Restartable: got %q, want a Fatalf naming Restartable", ft.msg)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// only the calling goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestGroupConsume checks that both group protocols work against the broker
// (and so that scripts/kafka.sh configures the real one for them): a group
// member consumes everything from the start and commits.
func TestGroupConsume(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "in")
	b.CreateTopic(t, topic, 3, nil)
	for p := range int32(3) {
		produceN(t, b, topic, p, 4, fmt.Sprintf("p%d-", p))
	}
	for _, proto := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(proto.name, func(t *testing.T) {
			group := b.Name(t, "group")
			opts := append([]kgo.Opt{
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxWait(500 * time.Millisecond),
			}, proto.opts...)
			cl := b.Client(t, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n := 0
			for n < 12 {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of 12 records before timeout", n)
				}
				fs.EachError(func(_ string, p int32, err error) { t.Fatalf("partition %d: %v", p, err) })
				n += fs.NumRecords()
			}
			if n != 12 {
				t.Fatalf("consumed %d records, want 12", n)
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			offs, err := b.Admin(t).FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for p := range int32(3) {
				if o, ok := offs.Lookup(topic, p); !ok || o.At != 4 {
					t.Fatalf("committed offset of partition %d: %+v (found %v), want 4", p, o, ok)
				}
			}
		})
	}
}

// An out-of-process kfake serves like the in-process one, from another
// process, and stops when its test ends.
func TestOutOfProcess(t *testing.T) {
	var addrs []string
	real := false
	t.Run("serve", func(t *testing.T) {
		b := testbroker.New(t, testbroker.OutOfProcess())
		addrs, real = b.Addrs(), b.Real()
		if !b.Real() && b.Fake() != nil {
			t.Fatal("an out-of-process kfake has no in-process cluster")
		}
		topic := b.Name(t, "oop")
		b.CreateTopic(t, topic, 2, nil)
		b.Produce(t, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")})
		if recs := b.ReadCommitted(t, topic, readTimeout); len(recs) != 1 || string(recs[0].Value) != "v" {
			t.Fatalf("read back %d records", len(recs))
		}
	})
	if real {
		return
	}
	// Gone once its test ended.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatalf("the kfake server at %v still answers after its test ended", addrs)
	}
}
