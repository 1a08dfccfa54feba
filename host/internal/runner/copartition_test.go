package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// joinPlugin joins its two inputs by key, the way a stream-stream join
// plugin does through the state imports: each record is kept in the store
// under its side, and the second side of a key to arrive emits
// "<left>|<right>". Each key has one record on each side, so a task that
// does not see both sides of a key (its inputs split across tasks or
// members) never emits it, and a record processed twice on a state that
// kept it emits it twice.
type joinPlugin struct{ processed atomic.Int64 }

func (*joinPlugin) Close(context.Context) error { return nil }

type joinInstance struct {
	p   *joinPlugin
	env Env
}

func (p *joinPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &joinInstance{p: p, env: env}, nil
}

func (i *joinInstance) Process(_ context.Context, rec *abi.Record) error {
	i.p.processed.Add(1)
	if rec.Index > 1 {
		return &KindError{Kind: FailureTrap, Err: fmt.Errorf("input index %d", rec.Index)}
	}
	mine := append([]byte{byte('0' + rec.Index)}, rec.Key...)
	other := append([]byte{byte('1' - rec.Index)}, rec.Key...)
	if err := i.env.State.Put(0, mine, rec.Value); err != nil {
		return err
	}
	v, found, err := i.env.State.Get(0, other)
	if err != nil || !found {
		return err
	}
	left, right := rec.Value, v
	if rec.Index == 1 {
		left, right = v, rec.Value
	}
	out := string(left) + "|" + string(right)
	return i.env.Sink.Emit(0, &abi.Record{Key: rec.Key, Value: []byte(out), Partition: abi.AnyPartition})
}

func (i *joinInstance) Close(context.Context) error { return nil }

// joinFixture is a co-partitioned processor: two inputs of equal
// partition counts, one store.
type joinFixture struct {
	eos                    bool
	protocol               GroupProtocol
	b                      *testbroker.Broker
	left, right, out, clog string
	group                  string
	members                int // transactional ids and state dirs handed out
}

func newJoinFixture(t *testing.T, eos bool, protocol GroupProtocol, partitions int) *joinFixture {
	b := testbroker.New(t)
	f := &joinFixture{eos: eos, protocol: protocol, b: b, left: b.Name(t, "left"), right: b.Name(t, "right"),
		out: b.Name(t, "out"), group: b.Name(t, "app")}
	f.clog = f.group + "-j-changelog"
	b.CreateTopic(t, f.left, partitions, nil)
	b.CreateTopic(t, f.right, partitions, nil)
	b.CreateTopic(t, f.out, partitions, nil)
	b.CreateTopic(t, f.clog, partitions, map[string]string{"cleanup.policy": "compact"})
	return f
}

// runner makes a member with its own state directory and transactional id.
func (f *joinFixture) runner(t *testing.T, p Plugin, extra ...kgo.Opt) *Runner {
	f.members++
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(context.Background(), Options{
		AppID:              f.group,
		Kafka:              kclient.Config{Brokers: f.b.Addrs(), ClientID: "test"},
		CommitInterval:     50 * time.Millisecond,
		CommitRecords:      1000,
		StartOffset:        Earliest,
		SessionTimeout:     10 * time.Second,
		GroupProtocol:      f.protocol,
		Guarantee:          guarantee(f.eos),
		TransactionalID:    f.b.Name(t, "txn"+strconv.Itoa(f.members)),
		TransactionTimeout: 10 * time.Second,
		Processors: []ProcessorSpec{{
			Name: "join", Inputs: []string{f.left, f.right}, Outputs: []string{f.out},
			OnError: Fail, Plugin: p, Stores: []string{"j"}, Changelogs: []string{f.clog},
		}},
		State:     db,
		Logger:    testLogger(t),
		ExtraOpts: extra,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return r
}

// produce writes keys k<from>..k<to-1> to both sides, the right side of
// each key first when rightFirst.
func (f *joinFixture) produce(t *testing.T, from, to int, rightFirst bool) {
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		k := "k" + strconv.Itoa(i)
		l := &kgo.Record{Topic: f.left, Key: []byte(k), Value: []byte("L" + strconv.Itoa(i))}
		r := &kgo.Record{Topic: f.right, Key: []byte(k), Value: []byte("R" + strconv.Itoa(i))}
		if rightFirst {
			recs = append(recs, r, l)
		} else {
			recs = append(recs, l, r)
		}
	}
	f.b.Produce(t, recs...)
}

// joined counts the committed join outputs by value.
func (f *joinFixture) joined(t *testing.T) map[string]int {
	got := map[string]int{}
	for _, r := range f.b.ReadCommitted(t, f.out, 30*time.Second) {
		got[string(r.Value)]++
	}
	return got
}

// checkJoined checks that every key in [0, n) was joined, exactly once
// under exactly_once, and nothing else came out.
func (f *joinFixture) checkJoined(t *testing.T, got map[string]int, n int) error {
	var missing, dup, wrong []string
	for i := range n {
		v := fmt.Sprintf("L%d|R%d", i, i)
		switch c := got[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1 && f.eos:
			dup = append(dup, v+"×"+strconv.Itoa(c))
		}
	}
	for v := range got {
		l, r, ok := strings.Cut(v, "|")
		if !ok || strings.TrimPrefix(l, "L") != strings.TrimPrefix(r, "R") {
			wrong = append(wrong, v)
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	if len(missing)+len(dup)+len(wrong) > 0 {
		return fmt.Errorf("%d keys not joined (first %v), %d joined more than once (%v), wrong %v",
			len(missing), first(missing, 5), len(dup), first(dup, 5), wrong)
	}
	return nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// Co-partitioned tasks under a rebalance storm (#14): members join, leave
// and are replaced (a new one on an empty state directory, restored from
// the changelog) while both inputs are written; task p must see partition p
// of both inputs on one member with one store, through every rebalance and
// under both group protocols. Every key is joined; under exactly_once
// exactly once.
func TestCopartitionedTasksSurviveARebalanceStorm(t *testing.T) {
	for _, protocol := range []GroupProtocol{ProtocolConsumer, ProtocolClassic} {
		for _, eos := range []bool{true, false} {
			t.Run(protocol.String()+"/"+guarantee(eos).String(), func(t *testing.T) {
				f := newJoinFixture(t, eos, protocol, 6)
				p := &joinPlugin{}
				// A writer adds 20 keys every 20ms, alternating which side
				// comes first, until the storm is over.
				var n atomic.Int64
				done := make(chan struct{})
				writing := make(chan struct{})
				go func() {
					defer close(writing)
					for i := 0; ; i++ {
						select {
						case <-done:
							return
						case <-time.After(20 * time.Millisecond):
						}
						from := int(n.Load())
						f.produce(t, from, from+20, i%2 == 1)
						n.Store(int64(from + 20))
					}
				}()
				// The writer stops before the test returns, however it
				// returns: it must not report to a finished test.
				stopWriting := sync.OnceFunc(func() { close(done); <-writing })
				defer stopWriting()
				stops := []func() error{start(t, f.runner(t, p))}
				// Joins, leaves and replacements (a member on an empty state
				// directory restores from the changelog) about every 700ms.
				for step := range 12 {
					switch {
					case len(stops) < 2 || (step%3 != 2 && len(stops) < 4):
						stops = append(stops, start(t, f.runner(t, p)))
					default:
						if err := stops[0](); err != nil {
							t.Fatalf("stopping a member: %v", err)
						}
						stops = stops[1:]
					}
					time.Sleep(700 * time.Millisecond)
				}
				stopWriting()
				keys := int(n.Load())
				testutil.Eventually(t, 90*time.Second, func() error {
					return f.checkJoined(t, f.joined(t), keys)
				})
				var errs []error
				for _, stop := range stops {
					errs = append(errs, stop())
				}
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				if err := f.checkJoined(t, f.joined(t), keys); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d keys joined through %d members; %d records processed in all", keys, f.members, p.processed.Load())
			})
		}
	}
}

// The runner keeps a co-partitioned task whole on its own: a group whose
// assignor splits the inputs' partitions among members (round robin over
// three partitions each, two members: no member gets both sides of any
// partition) runs no task at all, rather than two halves of one on two
// stores. Nothing is processed or committed; once one member holds
// everything, every key is joined.
func TestCopartitionedTaskNeedsEveryPartition(t *testing.T) {
	f := newJoinFixture(t, true, ProtocolClassic, 3)
	p := &joinPlugin{}
	rr := kgo.Balancers(kgo.RoundRobinBalancer())
	stop1 := start(t, f.runner(t, p, rr))
	stop2 := start(t, f.runner(t, p, rr))
	// Both members in the group, each holding partitions: the assignor
	// split every task.
	testutil.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := f.b.Admin(t).DescribeGroups(ctx, f.group)
		if err != nil {
			return err
		}
		g := gs[f.group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return fmt.Errorf("group %s: state %q, %d members (err %v); want 2 members, stable", f.group, g.State, len(g.Members), g.Err)
		}
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); !ok || len(c.Topics) == 0 {
				return fmt.Errorf("member %s holds no partitions yet", m.MemberID)
			}
		}
		return nil
	})
	f.produce(t, 0, 60, false)
	// As long as a member of the split group would need to fetch and run
	// them (it runs a task within a poll, about 100 ms here), nothing runs.
	testutil.Consistently(t, 3*time.Second, func() error {
		if got := p.processed.Load(); got != 0 {
			return fmt.Errorf("%d records processed by split tasks", got)
		}
		return nil
	})
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error { return f.checkJoined(t, f.joined(t), 60) })
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
}

// lookupPlugin looks each record's key up in the task table (store 0) and
// emits "<key>=<value>", or "<key>=?" when the table has no such key.
type lookupPlugin struct{}

type lookupInstance struct{ env Env }

func (lookupPlugin) Close(context.Context) error { return nil }

func (lookupPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &lookupInstance{env: env}, nil
}

func (i *lookupInstance) Process(_ context.Context, rec *abi.Record) error {
	if rec.Index != 0 {
		return &KindError{Kind: FailureTrap, Err: fmt.Errorf("a table record reached the plugin (input %d)", rec.Index)}
	}
	v, found, err := i.env.State.Get(0, rec.Key)
	if err != nil {
		return err
	}
	if !found {
		v = []byte("?")
	}
	return i.env.Sink.Emit(0, &abi.Record{Key: rec.Key, Value: []byte(string(rec.Key) + "=" + string(v)), Partition: abi.AnyPartition})
}

func (i *lookupInstance) Close(context.Context) error { return nil }

// A task table under a rebalance storm: the table is written first, then
// records are looked up in it while members join, leave and are replaced
// by members on empty state directories, which restore their partitions
// of the table from its own topic. Every lookup finds its value; under
// exactly_once every record is looked up once.
func TestTaskTableSurvivesARebalanceStorm(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) {
			f := newJoinFixture(t, eos, ProtocolAuto, 4)
			table := f.right // read as the table; f.left is the stream
			const keys = 400
			var recs []*kgo.Record
			for i := range keys {
				recs = append(recs, &kgo.Record{Topic: table, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
			}
			f.b.Produce(t, recs...)
			newRunner := func() *Runner {
				db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				f.members++
				r, err := New(context.Background(), Options{
					AppID: f.group, Kafka: kclient.Config{Brokers: f.b.Addrs(), ClientID: "test"},
					CommitInterval: 50 * time.Millisecond, CommitRecords: 1000, StartOffset: Latest,
					SessionTimeout: 10 * time.Second, Guarantee: guarantee(eos),
					TransactionalID: f.b.Name(t, "txn"+strconv.Itoa(f.members)), TransactionTimeout: 10 * time.Second,
					Processors: []ProcessorSpec{{
						Name: "lookup", Inputs: []string{f.left, table}, Outputs: []string{f.out}, OnError: Fail,
						Plugin: lookupPlugin{}, Stores: []string{"customers"}, Changelogs: []string{table},
						TaskTables: []TaskTable{{Topic: table, Store: 0}}, EarliestInputs: []string{table},
					}},
					State: db, Logger: testLogger(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			stops := []func() error{start(t, newRunner())}
			// start_offset latest, but a table starts at its earliest
			// record: the first member reads the whole table.
			testutil.Eventually(t, 60*time.Second, func() error {
				got, want := f.committedOf(t, table), f.endOffsetsOf(t, table)
				if !equalOffsets(got, want, true) {
					return fmt.Errorf("table committed %v, want %v", got, want)
				}
				return nil
			})
			n := 0
			produce := func() {
				var batch []*kgo.Record
				for range 100 {
					batch = append(batch, &kgo.Record{Topic: f.left, Key: []byte("k" + strconv.Itoa(n%keys)), Value: []byte(strconv.Itoa(n))})
					n++
				}
				f.b.Produce(t, batch...)
			}
			// A first batch, committed, so that every stream partition has
			// a committed offset before it moves (start_offset: latest
			// would start a partition without one at its end).
			produce()
			testutil.Eventually(t, 60*time.Second, func() error {
				got, want := f.committedOf(t, f.left), f.endOffsetsOf(t, f.left)
				if !equalOffsets(got, want, false) {
					return fmt.Errorf("stream committed %v, want %v", got, want)
				}
				return nil
			})
			for step := range 9 {
				produce()
				if step%3 == 2 {
					if err := stops[0](); err != nil {
						t.Fatal(err)
					}
					stops = stops[1:]
				} else {
					stops = append(stops, start(t, newRunner()))
				}
				time.Sleep(500 * time.Millisecond)
			}
			check := func() error {
				outs := f.b.ReadCommitted(t, f.out, 30*time.Second)
				for _, r := range outs {
					k, v, _ := strings.Cut(string(r.Value), "=")
					if v != "v"+strings.TrimPrefix(k, "k") {
						return fmt.Errorf("lookup %s found %q", k, v)
					}
				}
				if len(outs) < n || (eos && len(outs) != n) {
					return fmt.Errorf("%d lookups for %d records", len(outs), n)
				}
				return nil
			}
			testutil.Eventually(t, 90*time.Second, check)
			for _, stop := range stops {
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			}
			if err := check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// committedOf and endOffsetsOf are the group's committed offsets and the
// end offsets of topic.
func (f *joinFixture) committedOf(t *testing.T, topic string) map[int32]int64 {
	return (&fixture{b: f.b, group: f.group}).committed(t, topic)
}

func (f *joinFixture) endOffsetsOf(t *testing.T, topic string) map[int32]int64 {
	return (&fixture{b: f.b}).endOffsets(t, topic)
}

// A task of several inputs runs a record only while every input's next
// record is in view: an input with nothing left in the batch must be
// caught up (its latest fetch was empty, or reached its end), or the task
// stops and waits for it, at most maxInputWait; then it goes on until a
// fetch shows that input again.
func TestTaskWaitsForALaggingInput(t *testing.T) {
	tk := &task{win: newWindow(2, 0), proc: &procState{Stats: newStats()}, r: &Runner{log: testLogger(t)}, id: TaskID{Processor: "join"}}
	rec := []*kgo.Record{{Offset: 0}}
	if tk.lagging([][]*kgo.Record{rec, rec}) {
		t.Fatal("waits with a record of every input in view")
	}
	if !tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("does not wait for an input it knows nothing of")
	}
	c := tk.win.in(1)
	c.sawEmpty()
	if tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("waits for an input whose latest fetch was empty")
	}
	c.sawRecords()
	c.sawEnd(20)
	c.hold([]*kgo.Record{{Offset: 19}})
	if tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("waits for an input fetched to its end")
	}
	c.sawEnd(30) // more records on the broker
	if !tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("does not wait for an input with records on the broker")
	}
	tk.waitingSince = time.Now().Add(-maxInputWait - time.Millisecond)
	if tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("still waits past maxInputWait")
	}
	if n := tk.proc.Stats.InputWaits.Load(); n != 1 {
		t.Fatalf("InputWaits = %d, want 1", n)
	}
	if tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("waits again for an input it waited out, before a fetch showed it")
	}
	c.sawRecords() // a fetch shows it again: waiting resumes
	if !tk.lagging([][]*kgo.Record{rec, nil}) {
		t.Fatal("a waited-out input seen in a fetch again is not waited for")
	}
	// Records fetched and then rewound (a stop or a cut) are not in view.
	c0 := tk.win.in(0)
	c0.sawRecords()
	c0.sawEnd(10)
	c0.hold([]*kgo.Record{{Offset: 9}})
	if !c0.caughtUp() {
		t.Fatal("an input fetched to its end is not caught up")
	}
	c0.stopAt(5)
	if at, ok := c0.takeStop(); !ok || at != 5 || c0.caughtUp() || len(c0.held) != 0 {
		t.Fatalf("after a rewind to %d (%v) the input still counts as caught up, or holds %d records", at, ok, len(c0.held))
	}
	c0.hold([]*kgo.Record{{Offset: 9}})
	c0.aborted()
	if c0.caughtUp() || len(c0.held) != 0 {
		t.Fatal("after an abort the input still counts as caught up, or holds records")
	}
	single := &task{win: newWindow(1, 0), proc: &procState{Stats: newStats()}}
	if single.lagging([][]*kgo.Record{nil}) {
		t.Fatal("a task of one input waits")
	}
}

// Inputs written in transactions end in a transaction marker, which a
// task of several inputs must count as read: after a record of one side,
// the other side (its last record followed by a marker) is caught up, and
// the task never waits for it (before the runner kept the markers, each
// record after the other side's waited maxInputWait, counted in
// InputWaits). No plugin sees a marker.
func TestTransactionalInputsAreCaughtUp(t *testing.T) {
	f := newJoinFixture(t, true, ProtocolAuto, 1)
	p := &joinPlugin{}
	r := f.runner(t, p)
	stop := start(t, r)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	w, err := kgo.NewClient(kgo.SeedBrokers(f.b.Addrs()...), kgo.TransactionalID(f.b.Name(t, "writer")))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	inTxn := func(rec *kgo.Record) {
		t.Helper()
		if err := w.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := w.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := w.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	const keys = 6
	for i := range keys {
		k := []byte("k" + strconv.Itoa(i))
		// One side, then the other, each seen processed before the next:
		// a poll then holds records of one input only, the other's
		// last fetch having ended at its marker.
		for side, topic := range []string{f.left, f.right} {
			inTxn(&kgo.Record{Topic: topic, Key: k, Value: []byte(fmt.Sprintf("%c%d", "LR"[side], i))})
			want := int64(2*i + side + 1)
			testutil.Eventually(t, 30*time.Second, func() error {
				if n := p.processed.Load(); n != want {
					return fmt.Errorf("%d records processed, want %d", n, want)
				}
				return nil
			})
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error { return f.checkJoined(t, f.joined(t), keys) })
	if n := r.Stats("join").InputWaits.Load(); n != 0 {
		t.Fatalf("the task waited %d times for an input read to its marker", n)
	}
}

// TestNextInputOrder: records run oldest first across a task's inputs; on
// a timestamp tie a task table's record runs before a stream input's, then
// the lower input's.
func TestNextInputOrder(t *testing.T) {
	at := func(ms int64) []*kgo.Record { return []*kgo.Record{{Timestamp: time.UnixMilli(ms)}} }
	tk := &task{table: []int{-1, -1, 0, 1}} // inputs 0 and 1 stream, 2 and 3 tables
	for _, c := range []struct {
		name  string
		batch [][]*kgo.Record
		want  int
	}{
		{"none", [][]*kgo.Record{nil, nil, nil, nil}, -1},
		{"oldest", [][]*kgo.Record{at(5), at(3), at(4), nil}, 1},
		{"one input", [][]*kgo.Record{nil, at(3), nil, nil}, 1},
		{"streams tie: the lower input", [][]*kgo.Record{at(3), at(3), nil, nil}, 0},
		{"table wins a tie", [][]*kgo.Record{at(3), at(3), nil, at(3)}, 3},
		{"tables tie: the lower", [][]*kgo.Record{at(3), nil, at(3), at(3)}, 2},
		{"an older stream record before a table's", [][]*kgo.Record{at(2), nil, at(3), nil}, 0},
	} {
		if got := tk.nextInput(c.batch); got != c.want {
			t.Errorf("%s: input %d, want %d", c.name, got, c.want)
		}
	}
}
