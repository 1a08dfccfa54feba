package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// restorePaths are the two ways state writes restored batches.
var restorePaths = []struct {
	name string
	db   func(testing.TB) (*state.DB, vfs.FS)
}{{"ingest", memDB}, {"batch", memDBBatches}}

func TestRestoreFull(t *testing.T) {
	for _, p := range restorePaths {
		t.Run(p.name, func(t *testing.T) { testRestoreFull(t, p.db) })
	}
}

func testRestoreFull(t *testing.T, memDB func(testing.TB) (*state.DB, vfs.FS)) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	recs := genRecs(0, 5000, 700, 9, 20)
	recs[17].val = []byte{} // an empty value is a value, not a tombstone
	produce(t, b, topic, recs)

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	res, err := newRestorer(t, testConfig(t, b)).Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Position != 5000 || res.Target != 5000 || res.Restored != 5000 || res.Wipes != 0 || res.Start != 0 {
		t.Fatalf("result %+v", res)
	}
	checkStore(t, "full restore", tk, 0, reference(recs))
	if v, ok, _ := tk.Get(0, []byte(recs[17].key)); recs[17].key != recs[17+700].key && (!ok || len(v) != 0) {
		t.Fatalf("empty value restored as %q present %v", v, ok)
	}
	if cp, ok := checkpoint(t, tk, 0); !ok || cp != 5000 {
		t.Fatalf("checkpoint %d %v, want 5000", cp, ok)
	}
	t.Logf("restored %d records at %.0f records/s", res.Restored, res.Rate)
}

// TestRestoreResume interrupts a restore (context cancelled after three
// batches): what it applied stays, with a checkpoint that matches the data
// exactly; a second restore resumes there and reaches the new end.
func TestRestoreResume(t *testing.T) {
	for _, p := range restorePaths {
		t.Run(p.name, func(t *testing.T) { testRestoreResume(t, p.db) })
	}
}

func testRestoreResume(t *testing.T, memDB func(testing.TB) (*state.DB, vfs.FS)) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	recs := genRecs(0, 8000, 1500, 11, 30)
	produce(t, b, topic, recs)

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	ctx, cancel := context.WithCancel(testCtx(t, 60*time.Second))
	cfg := testConfig(t, b)
	batches := 0
	cfg.Progress = func(p Progress) {
		if batches++; batches == 3 {
			cancel()
		}
	}
	res, err := newRestorer(t, cfg).Restore(ctx, tk, 0, topic, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted restore: %v (%+v)", err, res)
	}
	cp, ok := checkpoint(t, tk, 0)
	if !ok || cp <= 0 || cp >= 8000 || cp != res.Position {
		t.Fatalf("after interruption: checkpoint %d %v, result %+v", cp, ok, res)
	}
	checkStore(t, "interrupted restore", tk, 0, reference(recs[:cp]))

	more := genRecs(8000, 2000, 1500, 11, 30)
	produce(t, b, topic, more)
	tk = db.Task("proc", 0, []string{"s"}) // a new assignment of the task
	cfg.Progress = nil
	res, err = newRestorer(t, cfg).Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Start != cp || res.Restored != 10000-cp || res.Position != 10000 {
		t.Fatalf("resumed restore %+v, want start %d", res, cp)
	}
	checkStore(t, "resumed restore", tk, 0, reference(append(recs, more...)))
}

// TestRestoreEmpty: an empty changelog, and one whose records were all
// deleted (log start == end > 0), finish at once without a consumer wait.
func TestRestoreEmpty(t *testing.T) {
	b := testbroker.New(t)
	empty := b.Name(t, "empty")
	b.CreateTopic(t, empty, 1, nil)
	deleted := b.Name(t, "deleted")
	b.CreateTopic(t, deleted, 1, nil)
	produce(t, b, deleted, genRecs(0, 100, 10, 0, 10))
	b.DeleteRecords(t, deleted, 0, 100)

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"a", "b"})
	cfg := testConfig(t, b)
	cfg.IdleProbe = 30 * time.Second // finishing must not depend on an idle timeout
	r := newRestorer(t, cfg)
	for i, topic := range []string{empty, deleted} {
		start := time.Now()
		res, err := r.Restore(testCtx(t, 60*time.Second), tk, i, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(100 * i)
		if el := time.Since(start); el > 10*time.Second || !res.Done || res.Restored != 0 || res.Position != want || res.Probes != 0 {
			t.Fatalf("%s: %+v after %v", topic, res, el)
		}
		if cp, ok := checkpoint(t, tk, i); !ok || cp != want {
			t.Fatalf("%s: checkpoint %d %v, want %d", topic, cp, ok, want)
		}
	}
}

// TestRestoreAbortedOnly: a changelog that holds only aborted transactions
// restores nothing and finishes on the last abort marker, without waiting
// for a record; with a committed transaction before them, exactly that one
// is restored.
func TestRestoreAbortedOnly(t *testing.T) {
	b := testbroker.New(t)
	onlyAborted := b.Name(t, "aborted")
	b.CreateTopic(t, onlyAborted, 1, nil)
	mixed := b.Name(t, "mixed")
	b.CreateTopic(t, mixed, 1, nil)

	p := txnProducer(t, b, onlyAborted)
	for i := 0; i < 3; i++ {
		inTxn(t, p, genRecs(i*50, 50, 20, 0, 10), false)
	}
	committed := genRecs(1000, 40, 30, 7, 10)
	p2 := txnProducer(t, b, mixed)
	inTxn(t, p2, committed, true)
	inTxn(t, p2, genRecs(2000, 60, 30, 0, 10), false)

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"aborted", "mixed"})
	cfg := testConfig(t, b)
	cfg.IdleProbe = 30 * time.Second // finishing must not depend on an idle timeout
	r := newRestorer(t, cfg)
	for i, c := range []struct {
		topic string
		want  map[string]string
		n     int64
	}{{onlyAborted, map[string]string{}, 0}, {mixed, reference(committed), 40}} {
		_, lso, hwm := listOffsets(t, b, c.topic)
		if lso != hwm || lso == 0 {
			t.Fatalf("%s: last stable offset %d, high watermark %d", c.topic, lso, hwm)
		}
		start := time.Now()
		res, err := r.Restore(testCtx(t, 60*time.Second), tk, i, c.topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 10*time.Second || !res.Done || res.Restored != c.n || res.Position != lso || res.Probes != 0 {
			t.Fatalf("%s: %+v after %v, want %d restored up to %d", c.topic, res, el, c.n, lso)
		}
		checkStore(t, c.topic, tk, i, c.want)
		if cp, ok := checkpoint(t, tk, i); !ok || cp != lso {
			t.Fatalf("%s: checkpoint %d %v, want %d", c.topic, cp, ok, lso)
		}
		t.Logf("%s: %d records restored, end %d, in %v", c.topic, res.Restored, lso, time.Since(start).Round(time.Millisecond))
	}
}

// TestRestoreCompacted restores a compacted changelog whose offsets have
// gaps, both from scratch and from a checkpoint taken before compaction.
func TestRestoreCompacted(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "compacted")
	cfgs := map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "86400000"}
	if b.Real() {
		// The cleaner only compacts rolled segments: roll them by time, and
		// clean as soon as anything is dirty (log.cleaner.backoff.ms=1000).
		cfgs["segment.ms"] = "200"
		cfgs["min.cleanable.dirty.ratio"] = "0"
		cfgs["min.compaction.lag.ms"] = "0"
	}
	b.CreateTopic(t, topic, 1, cfgs)
	// A first record whose key is never overwritten keeps the log start at
	// 0 on kfake (whose compaction moves the log start to the first kept
	// record), then rounds that overwrite 200 keys.
	all := []rec{{key: "anchor", val: []byte("first")}}
	produce(t, b, topic, all)
	for round := 0; round < 5; round++ {
		rs := genRecs(round*1000, 1000, 200, 13, 20)
		produce(t, b, topic, rs)
		all = append(all, rs...)
		if b.Real() {
			time.Sleep(300 * time.Millisecond) // the next append rolls the segment
		}
	}

	db, _ := memDB(t)
	cfg := testConfig(t, b)
	// A checkpoint early in the log: cancel after the first batch (the
	// reader stops within two more batches). On the real broker the cleaner
	// may already have compacted the first rounds by now.
	cfg.BatchRecords = 100
	early := db.Task("early", 0, []string{"s"})
	ctx, cancel := context.WithCancel(testCtx(t, 60*time.Second))
	cfg.Progress = func(Progress) { cancel() }
	if _, err := newRestorer(t, cfg).Restore(ctx, early, 0, topic, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted restore: %v", err)
	}
	cfg.Progress = nil
	cfg.BatchRecords = 500
	cpEarly, _ := checkpoint(t, early, 0)

	// The last record, with a fresh key, goes into a new segment on the real
	// broker, so every round can be cleaned.
	tail := []rec{{key: "tail", val: []byte("last")}}
	produce(t, b, topic, tail)
	all = append(all, tail...)
	_, end, _ := listOffsets(t, b, topic)
	compact(t, b, topic, end)

	start, _, _ := listOffsets(t, b, topic)
	want := reference(all)
	if got := referenceFromBroker(t, b, topic); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the compacted topic reads as %d keys, the produced records make %d", len(got), len(want))
	}
	r := newRestorer(t, cfg)
	fresh := db.Task("fresh", 0, []string{"s"})
	res, err := r.Restore(testCtx(t, 60*time.Second), fresh, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Position != end || res.Restored >= end-start {
		t.Fatalf("fresh restore of the compacted topic: %+v (log start %d, end %d): gaps expected", res, start, end)
	}
	checkStore(t, "fresh restore", fresh, 0, want)

	res, err = r.Restore(testCtx(t, 60*time.Second), early, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Position != end || (start <= cpEarly && (res.Start != cpEarly || res.Wipes != 0)) {
		t.Fatalf("resumed restore from %d: %+v (log start %d)", cpEarly, res, start)
	}
	checkStore(t, "restore resumed across gaps", early, 0, want)
	t.Logf("log start %d, end %d, %d records left by compaction, resumed from %d; probes %d", start, end, res.Restored, cpEarly, res.Probes)
}

// compact compacts topic and waits until reading it shows gaps below end,
// failing t if it does not within 90 s. kfake compacts when asked; the real
// broker's log cleaner runs every second (scripts/kafka.sh sets
// log.cleaner.backoff.ms=1000) and the caller's topic config makes every
// rolled segment cleanable at once.
func compact(t testing.TB, b *testbroker.Broker, topic string, end int64) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		if c := b.Fake(); c != nil {
			c.Compact()
		}
		start, _, _ := listOffsets(t, b, topic)
		n := int64(0)
		for _, r := range b.ReadCommitted(t, topic, 60*time.Second) {
			if r.Offset < end {
				n++
			}
		}
		if n >= end-start {
			return fmt.Errorf("%s is not compacted: all %d offsets below %d hold records (is the broker's log cleaner running?)", topic, end-start, end)
		}
		t.Logf("compacted: %d of %d offsets below %d hold records", n, end-start, end)
		return nil
	})
}

// TestRestoreTailGapUnderOpenTransaction: the records just below the last
// stable offset were compacted away and the next records are in a
// transaction still open, so nothing the consumer can read lies between the
// position and the target. Only the probe can tell; without it the restore
// would wait until StallTimeout. kfake compacts below the last stable
// offset; real Kafka's cleaner stops at the first unstable offset, so there
// the same shape needs an expired tombstone or marker (24 h by default).
func TestRestoreTailGapUnderOpenTransaction(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "needs compaction below the last stable offset, which kfake does and real Kafka's cleaner avoids")
	topic := b.Name(t, "tailgap")
	b.CreateTopic(t, topic, 1, map[string]string{"cleanup.policy": "compact"})
	produce(t, b, topic, []rec{{"kept", []byte("x")}})          // offset 0
	produce(t, b, topic, []rec{{"overwritten", []byte("old")}}) // offset 1
	p := txnProducer(t, b, topic)
	ctx := testCtx(t, 60*time.Second)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, newRec("overwritten", "in-open-txn")).FirstErr(); err != nil { // offset 2, open
		t.Fatal(err)
	}
	produce(t, b, topic, []rec{{"after", []byte("y")}}) // offset 3
	b.Fake().Compact()
	start, lso, hwm := listOffsets(t, b, topic)
	t.Logf("log start %d, last stable offset %d, high watermark %d", start, lso, hwm)
	if start != 0 || lso != 2 {
		t.Fatalf("unexpected offsets after compaction: start %d lso %d", start, lso)
	}

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	cfg := testConfig(t, b)
	cfg.StallTimeout = 10 * time.Second
	cfg.OpenTransactionWait = 200 * time.Millisecond // this transaction never ends
	res, err := newRestorer(t, cfg).Restore(ctx, tk, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Position != 2 || res.Restored != 1 || res.Probes == 0 {
		t.Fatalf("result %+v", res)
	}
	checkStore(t, "tail gap", tk, 0, map[string]string{"kept": "x"})
	if err := p.EndTransaction(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreTopicRecreated: the store's checkpoint is beyond the end of the
// changelog, which was deleted and created again with fewer records: the
// task is wiped and restored from the new topic.
func TestRestoreTopicRecreated(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	old := genRecs(0, 1000, 1000, 0, 10) // keys k000000..k000999
	produce(t, b, topic, old)
	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	r := newRestorer(t, testConfig(t, b))
	if _, err := r.Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0); err != nil {
		t.Fatal(err)
	}

	recreateTopic(t, b, topic)
	recs := genRecs(5000, 300, 100000, 0, 10) // other keys
	produceFresh(t, b, topic, recs)
	res, err := r.Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Wipes != 1 || !res.Wiped || res.Restored != 300 || res.Position != 300 || res.Start != 0 {
		t.Fatalf("result %+v", res)
	}
	checkStore(t, "after recreation", tk, 0, reference(recs))
	if cp, _ := checkpoint(t, tk, 0); cp != 300 {
		t.Fatalf("checkpoint %d, want 300", cp)
	}
}

// TestRestoreCheckpointBelowLogStart: between two restores the log start
// passed the store's checkpoint, by DeleteRecords or by retention. The store
// is wiped up front (no consumer round trip) and restored from the new log
// start; nothing from before it remains.
func TestRestoreCheckpointBelowLogStart(t *testing.T) {
	for _, how := range []string{"DeleteRecords", "retention"} {
		t.Run(how, func(t *testing.T) {
			b := testbroker.New(t)
			topic := b.Name(t, "changelog")
			b.CreateTopic(t, topic, 1, nil)
			first := genRecs(0, 1000, 1000, 0, 10) // one key per record
			produce(t, b, topic, first)
			db, _ := memDB(t)
			tk := db.Task("proc", 0, []string{"s"})
			r := newRestorer(t, testConfig(t, b))
			if _, err := r.Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0); err != nil {
				t.Fatal(err)
			}
			// Records the store never saw are removed: the log start passes
			// the checkpoint (1000). Records that expire after the store read
			// them (below the checkpoint) are no reason to wipe.
			second := genRecs(1000, 1000, 100000, 0, 10)
			produce(t, b, topic, second)
			var rest []rec
			if how == "DeleteRecords" {
				b.DeleteRecords(t, topic, 0, 1500)
				rest = second[500:]
			} else {
				b.ExpireOldSegments(t, topic) // everything so far expires: log start 2000
				rest = genRecs(2000, 700, 100000, 0, 10)
				produce(t, b, topic, rest)
			}
			start, end, _ := listOffsets(t, b, topic)
			res, err := r.Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "after the log start passed the checkpoint", tk, 0, reference(rest))
			if !res.Done || res.Wipes != 1 || res.Restarts != 0 || res.Start != start || res.Position != end {
				t.Fatalf("result %+v (log start %d, end %d)", res, start, end)
			}
		})
	}
}

// TestRestoreFaustLogStartMoves is the Faust bug: while a large changelog
// restores, DeleteRecords moves the log start past the restore position.
// The restore must notice (an explicit offset, no automatic reset), wipe the
// partial store, restore from the new log start, count the wipe, and finish;
// no record from before the new log start may remain.
func TestRestoreFaustLogStartMoves(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	const n, newStart = 60000, 40000
	recs := genRecs(0, n, n, 0, 100) // one key per offset: leftovers are visible
	produce(t, b, topic, recs)

	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	cfg := testConfig(t, b)
	adm := b.Admin(t)
	batches, moved := 0, false
	cfg.Progress = func(p Progress) { // on the restore's applying goroutine: no t.Fatal
		if batches++; batches == 2 && !moved {
			moved = true
			t.Logf("hook: position %d; deleting records before %d", p.Position, newStart)
			var offs kadm.Offsets
			offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: newStart})
			resp, err := adm.DeleteRecords(context.Background(), offs)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Errorf("delete records: %v", err)
			}
		}
	}
	res, err := newRestorer(t, cfg).Restore(testCtx(t, 120*time.Second), tk, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the hook never ran")
	}
	if !res.Done || res.Wipes != 1 || res.Restarts != 1 || !res.Wiped || res.Start != newStart || res.Position != n {
		t.Fatalf("result %+v", res)
	}
	checkStore(t, "after the log start moved", tk, 0, reference(recs[newStart:]))
	if cp, _ := checkpoint(t, tk, 0); cp != n {
		t.Fatalf("checkpoint %d, want %d", cp, n)
	}
}

// TestRestoreKafkaStreamsRevive is the Kafka Streams revive bug at this
// level: the task is wiped during its restore (corruption handling), the
// restore is then interrupted (the task revoked: context cancelled), and
// later resumed on the same database by a new handle. At the interruption the
// checkpoint must describe exactly what the store holds; at the end the store
// must equal the changelog replayed from its log start.
func TestRestoreKafkaStreamsRevive(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	// 15,000 keys: a record lost before the interruption point is not
	// hidden by a later record of the same key.
	recs := genRecs(0, 20000, 15000, 7, 40)
	produce(t, b, topic, recs)

	db, _ := memDB(t)
	tk := db.Task("proc", 4, []string{"s"})
	ctx, cancel := context.WithCancel(testCtx(t, 60*time.Second))
	cfg := testConfig(t, b)
	batches := 0
	cfg.Progress = func(p Progress) {
		batches++
		switch batches {
		case 3:
			t.Logf("hook: wiping the task at position %d (corruption)", p.Position)
			if err := tk.Wipe(); err != nil {
				t.Error(err)
			}
		case 8:
			t.Logf("hook: revoking (cancel) at position %d", p.Position)
			cancel()
		}
	}
	res, err := newRestorer(t, cfg).Restore(ctx, tk, 0, topic, 0)
	cp, ok := checkpoint(t, tk, 0)
	if !ok || cp <= 0 || cp >= 20000 {
		t.Fatalf("checkpoint after interruption %d %v (%v)", cp, ok, err)
	}
	// The checkpoint claims the records below it, and the store holds
	// exactly them.
	checkStore(t, "at the interruption", tk, 0, reference(recs[:cp]))
	if !errors.Is(err, context.Canceled) || !res.Wiped || res.Restarts != 1 {
		t.Fatalf("interrupted restore: %v, %+v", err, res)
	}

	tk2 := db.Task("proc", 4, []string{"s"}) // assigned again, same state dir
	cfg.Progress = nil
	res, err = newRestorer(t, cfg).Restore(testCtx(t, 60*time.Second), tk2, 0, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Start != cp || res.Position != 20000 {
		t.Fatalf("resumed: %+v", res)
	}
	checkStore(t, "resumed", tk2, 0, reference(recs))
	if cp, _ := checkpoint(t, tk2, 0); cp != 20000 {
		t.Fatalf("final checkpoint %d", cp)
	}
}

// TestRestoreTaskAfterWipe: a wipe during the second store's restore
// empties the first store too; RestoreTask restores it again.
func TestRestoreTaskAfterWipe(t *testing.T) {
	b := testbroker.New(t)
	t0, t1 := b.Name(t, "c0"), b.Name(t, "c1")
	b.CreateTopic(t, t0, 1, nil)
	b.CreateTopic(t, t1, 1, nil)
	r0, r1 := genRecs(0, 3000, 400, 5, 20), genRecs(0, 6000, 6000, 0, 20) // r1: one key per record
	produce(t, b, t0, r0)
	produce(t, b, t1, r1)

	db, _ := memDB(t)
	tk := db.Task("proc", 1, []string{"s0", "s1"})
	cfg := testConfig(t, b)
	wiped := false
	cfg.Progress = func(p Progress) {
		if p.Store == "s1" && p.Position > 2000 && !wiped {
			wiped = true
			if err := tk.Wipe(); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := newRestorer(t, cfg).RestoreTask(testCtx(t, 60*time.Second), tk, []string{t0, t1}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "store 0", tk, 0, reference(r0))
	checkStore(t, "store 1", tk, 1, reference(r1))
	if !wiped || !res[0].Done || !res[1].Done || res[0].Restored != 6000 || !res[1].Wiped {
		t.Fatalf("results %+v", res)
	}
}

// TestRestoreRestartsBounded: a task wiped again after every batch makes
// the restore start over each time; it gives up after MaxRestarts with
// ErrTooManyRestarts instead of looping forever.
func TestRestoreRestartsBounded(t *testing.T) {
	b := testbroker.New(t)
	topic := b.Name(t, "changelog")
	b.CreateTopic(t, topic, 1, nil)
	produce(t, b, topic, genRecs(0, 5000, 5000, 0, 10))
	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	cfg := testConfig(t, b)
	cfg.MaxRestarts = 3
	cfg.Progress = func(Progress) {
		if err := tk.Wipe(); err != nil {
			t.Error(err)
		}
	}
	res, err := newRestorer(t, cfg).Restore(testCtx(t, 60*time.Second), tk, 0, topic, 0)
	if !errors.Is(err, ErrTooManyRestarts) || res.Restarts != 4 || res.Done {
		t.Fatalf("restore under repeated wipes: %v, %+v", err, res)
	}
	t.Log(err)
}

func TestRestoreMissingTopic(t *testing.T) {
	b := testbroker.New(t)
	db, _ := memDB(t)
	tk := db.Task("proc", 0, []string{"s"})
	_, err := newRestorer(t, testConfig(t, b)).Restore(testCtx(t, 30*time.Second), tk, 0, b.Name(t, "nope"), 0)
	if !errors.Is(err, ErrChangelogMissing) {
		t.Fatalf("missing topic: %v", err)
	}
	if _, err := newRestorer(t, testConfig(t, b)).Restore(testCtx(t, 30*time.Second), tk, 1, "x", 0); !errors.Is(err, state.ErrNoStore) {
		t.Fatalf("bad store: %v", err)
	}
	if !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error does not name the topic: %v", err)
	}
}
