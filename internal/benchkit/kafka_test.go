package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// The input lands on the broker line for line, each on the partition the
// generator chose, and the end offsets returned are the topic's; paced at
// a rate (a live run's input) as well as at full speed.
func TestProduceInput(t *testing.T) {
	for _, rate := range []float64{0, 20000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) { testProduceInput(t, rate) })
	}
}

func testProduceInput(t *testing.T, rate float64) {
	b := testbroker.New(t)
	adm := b.Admin(t)
	ctx := context.Background()
	topic := b.Name(t, "in")
	spec := InputSpec{Lines: 2000, Words: 4, Partitions: 3, Vocab: 500, ZipfS: 1, Seed: 9, Layout: LayoutKeyed}
	if err := createTopic(ctx, adm, topic, spec.Partitions); err != nil {
		t.Fatal(err)
	}
	g, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ends, last, err := produceInput(ctx, b.Addrs(), topic, g, rate, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if last.Before(start) {
		t.Fatalf("last line acknowledged at %s, before the start %s", last, start)
	}
	// Round robin over 3 partitions: 667, 667, 666.
	want := map[int32]int64{0: 667, 1: 667, 2: 666}
	for p, n := range want {
		if ends[p] != n {
			t.Fatalf("end offsets %v, want %v", ends, want)
		}
	}
	again, _ := NewGenerator(spec)
	byPart := map[int32][]string{}
	for {
		l, ok := again.Next()
		if !ok {
			break
		}
		byPart[l.Partition] = append(byPart[l.Partition], l.Text)
	}
	next := map[int32]int{}
	for _, r := range b.ReadCommitted(t, topic, 30*time.Second) {
		i := next[r.Partition]
		next[r.Partition]++
		if i >= len(byPart[r.Partition]) || string(r.Value) != byPart[r.Partition][i] {
			t.Fatalf("partition %d record %d: %q, want line %q", r.Partition, i, r.Value, byPart[r.Partition][i])
		}
	}
	if err := createTopic(ctx, adm, topic, 1); err == nil {
		t.Fatal("createTopic succeeded on an existing topic")
	}
}

// readOutput sees what read_committed sees (not the aborted update), and
// finishes although every partition ends with a transaction marker, which
// is never a data record, or is empty.
func TestReadOutputReadCommitted(t *testing.T) {
	b := testbroker.New(t)
	ctx := context.Background()
	topic := b.Name(t, "out")
	if err := createTopic(ctx, b.Admin(t), topic, 3); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.TransactionalID(b.Name(t, "txn")), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second))
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(p int32, word string, n uint64) *kgo.Record {
		return &kgo.Record{Partition: p, Key: []byte(word), Value: count(n)}
	}
	txn(true, rec(0, "cat", 1), rec(1, "dog", 1))
	txn(false, rec(0, "cat", 99), rec(1, "dog", 99))
	txn(true, rec(0, "cat", 2))
	// Partition 1 ends in the aborted transaction's marker, partition 2
	// holds nothing.
	out, err := readOutput(ctx, b.Addrs(), topic, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out.Records != 3 {
		t.Fatalf("Records = %d, want 3 (the aborted two are not output)", out.Records)
	}
	if err := out.Check(map[string]uint64{"cat": 2, "dog": 1}); err != nil {
		t.Fatal(err)
	}
}

// Sample reads the input lag, the backlog of internal topics and the
// progress figure from the broker as summarize defines them.
func TestWatchSample(t *testing.T) {
	b := testbroker.New(t)
	adm := b.Admin(t)
	ctx := context.Background()
	app := b.Name(t, "app")
	in, out, rep := b.Name(t, "in"), b.Name(t, "out"), app+"-x-repartition"
	for _, tp := range []struct {
		name string
		n    int
	}{{in, 2}, {out, 1}, {rep, 1}} {
		if err := createTopic(ctx, adm, tp.name, tp.n); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		b.ProduceTo(t, int32(i%2), &kgo.Record{Topic: in, Value: []byte("a b")})
	}
	b.ProduceTo(t, 0, &kgo.Record{Topic: rep, Value: []byte("a")}, &kgo.Record{Topic: rep, Value: []byte("b")},
		&kgo.Record{Topic: rep, Value: []byte("c")})
	b.ProduceTo(t, 0, &kgo.Record{Topic: out, Value: count(1)})

	w := &Watch{Adm: adm, Group: app, Input: in, InputEnds: map[int32]int64{0: 2, 1: 2}, Output: out, Prefix: app + "-"}
	// A real broker that has just started answers COORDINATOR_NOT_AVAILABLE
	// until its offsets topic is loaded; the harness's sampling loop rides
	// that out the same way (errors tolerated for 10 s).
	sample := func() Sample {
		t.Helper()
		var s Sample
		testutil.Eventually(t, 30*time.Second, func() (err error) {
			s, err = w.Sample(ctx)
			return err
		})
		return s
	}
	s := sample()
	// No group yet: all input is lag; the output and repartition topic
	// hold 1 + 3 records.
	if s.InputLag != 4 || s.Backlog != 0 || s.Progress != 4 {
		t.Fatalf("before any commit: %s, want input lag 4, backlog 0, progress 4", s)
	}
	var offs kadm.Offsets
	offs.AddOffset(in, 0, 2, -1)
	offs.AddOffset(rep, 0, 1, -1)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CommitOffsets(cctx, app, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	s = sample()
	// Input partition 1 uncommitted (2 left); repartition committed at 1 of
	// 3 (one record beyond the marker allowance); progress 4 + 2 + 1.
	if s.InputLag != 2 || s.Backlog != 1 || s.Progress != 7 {
		t.Fatalf("after commits: %s, want input lag 2, backlog 1, progress 7", s)
	}

	if err := deleteTopics(ctx, adm, "", out); err == nil {
		t.Fatal("deleteTopics took an empty prefix, which names every topic")
	}
	if err := deleteTopics(ctx, adm, app+"-", out); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		md, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if md.Has(out) || md.Has(rep) {
			return fmt.Errorf("%s or %s still listed after deleteTopics", out, rep)
		}
		if !md.Has(in) {
			t.Fatal("deleteTopics deleted the input too")
		}
		return nil
	})
}

// A topic the app creates during the run (a changelog, a repartition topic)
// counts in the harness's samples within a few poll intervals, as the
// records it holds are written, not seconds later all at once: a late
// appearance moved Progress after the app had finished and added that
// much to the run's wall time.
func TestWatchSeesATopicCreatedDuringTheRun(t *testing.T) {
	b := testbroker.New(t)
	ctx := context.Background()
	const poll = 100 * time.Millisecond
	bench, err := NewBench(Options{Brokers: b.Addrs(), Poll: poll}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Close()
	app := b.Name(t, "app")
	in, out := b.Name(t, "in"), b.Name(t, "out")
	for _, tp := range []string{in, out} {
		if err := createTopic(ctx, bench.adm, tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	w := &Watch{Adm: bench.adm, Group: app, Input: in, InputEnds: map[int32]int64{0: 0}, Output: out, Prefix: app + "-"}
	sample := func() (Sample, error) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return w.Sample(sctx)
	}
	// The first sample reads the metadata of every topic there is.
	if _, err := sample(); err != nil {
		t.Fatal(err)
	}
	changelog := app + "-counts-changelog"
	if err := createTopic(ctx, b.Admin(t), changelog, 1); err != nil {
		t.Fatal(err)
	}
	b.ProduceTo(t, 0, &kgo.Record{Topic: changelog, Value: []byte("a")}, &kgo.Record{Topic: changelog, Value: []byte("b")})
	start := time.Now()
	var s Sample
	for time.Since(start) < 20*poll {
		if s, err = sample(); err == nil && s.Progress == 2 {
			return
		}
		time.Sleep(poll)
	}
	t.Fatalf("%s still not counted %s after its records were written: %s (err %v); want progress 2",
		changelog, time.Since(start).Round(time.Millisecond), s, err)
}
