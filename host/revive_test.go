package host

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// The Kafka Streams failure (docs/design.md#seed-kstreams)
// at the level of processes: a task's store is wiped while it restores (here
// because the changelog's log start moves past the restore: the store is
// then corrupt for its checkpoint), the task is revoked mid-restore (a
// second process joins and takes its partition), and later assigned back
// to the first process, with the same state directory, which restores it
// again from what it left. At the end every task's local store must equal
// its changelog replayed from the log start — no record missing — and its
// checkpoint must be the changelog's end: the store's real position.
func TestKafkaStreamsReviveAcrossRevocation(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorFail)
	p.in, p.out = p.b.Name(t, "in2"), p.b.Name(t, "out2")
	p.b.CreateTopic(t, p.in, 2, nil)
	p.b.CreateTopic(t, p.out, 2, nil)
	pc := &p.cfg.Processors[0]
	pc.Inputs, pc.Outputs, pc.Stores = []string{p.in}, map[string]OutputConfig{"out": {Topic: p.out}}, []string{"counts"}
	p.cfg.Kafka.CommitRecords = 500 // many small changelog batches
	p.cfg.Kafka.CommitInterval = time.Second

	// A changelog of 30,000 keys over the two partitions.
	changelog := buildCounterChangelog(t, p, 30000)
	ends := map[int32]int64{}
	listed, err := p.b.Admin(t).ListEndOffsets(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })

	// Process A: a new state directory, slow small restore batches. On
	// each partition's first batch the log start moves to the middle of
	// its changelog (the restore wipes the store and starts over); once
	// both restores have started over and gone on a while, process B joins.
	dirA, dirB := t.TempDir(), t.TempDir()
	var mu sync.Mutex
	moved := map[int32]bool{}
	batchesAfterWipe := map[int32]int{}
	var interrupted atomic.Int64 // restores of A that ended without Done
	var bTook atomic.Bool        // process B holds a restored partition
	joinB := make(chan struct{})
	var joinOnce sync.Once
	moveErr := make(chan error, 2)
	lastA := map[int32]RestoreProgress{}
	slowA := func(o *options) {
		o.restore.FetchMaxPartitionBytes = 2 << 10
		o.restore.BatchRecords = 100
	}
	progressA := WithRestoreProgress(func(pr RestoreProgress) {
		// A restore that takes seconds, and longer once B is on its way
		// until B holds a partition, so that B's join lands in the middle
		// of it even on a slow machine (under the race detector B takes
		// seconds to start: at 300 ms a batch of 100 records, the rest of
		// a restore from the middle of its changelog lasts over 20 s).
		select {
		case <-joinB:
			if !bTook.Load() {
				time.Sleep(300 * time.Millisecond)
			}
		default:
			time.Sleep(40 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := lastA[pr.Partition]; ok && !prev.Done && pr.Start != prev.Start && pr.Restarts == 0 && pr.Wipes == 0 {
			interrupted.Add(1) // a new restore began before the last one was done
		}
		lastA[pr.Partition] = pr
		if pr.Restored > 0 && !pr.Done && !moved[pr.Partition] {
			moved[pr.Partition] = true
			o := kadm.Offsets{}
			o.AddOffset(changelog, pr.Partition, ends[pr.Partition]/2, -1)
			resp, err := p.b.Admin(t).DeleteRecords(context.Background(), o)
			if err == nil {
				err = resp.Error()
			}
			moveErr <- err
		}
		if pr.Wipes > 0 || batchesAfterWipe[pr.Partition] > 0 {
			batchesAfterWipe[pr.Partition]++
		}
		if batchesAfterWipe[0] > 5 && batchesAfterWipe[1] > 5 {
			joinOnce.Do(func() { close(joinB) })
		}
	})
	p.cfg.State.Dir = dirA
	hA, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)), slowA, progressA)
	if err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- hA.Run(ctxA) }()
	stopA := func() {
		cancelA()
		if err := <-doneA; err != nil {
			t.Errorf("process A: %v", err)
		}
		hA.Close()
	}
	select {
	case <-joinB:
	case <-time.After(90 * time.Second):
		stopA()
		t.Fatal("process A's restores did not get going")
	}
	for range 2 {
		if err := <-moveErr; err != nil {
			stopA()
			t.Fatalf("moving the log start: %v", err)
		}
	}

	// Process B takes one partition away from A in the middle of its
	// restore; once B has restored it, B stops and the partition goes
	// back to A and A's directory.
	cfgA := p.cfg
	cfgB := *p.cfg
	cfgB.State.Dir = dirB
	p.cfg = &cfgB
	hB, stopB := p.run(t)
	p.cfg = cfgA
	deadline := time.Now().Add(90 * time.Second)
	for !hB.Ready() || len(hB.Versions()[0].Tasks) == 0 {
		if time.Now().After(deadline) {
			stopA()
			t.Fatalf("process B did not take and restore a partition (ready %v, tasks %v)", hB.Ready(), hB.Versions()[0].Tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bTook.Store(true)
	t.Logf("process B took %v", hB.Versions()[0].Tasks)
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(90 * time.Second)
	for !hA.Ready() || len(hA.Versions()[0].Tasks) != 2 {
		if time.Now().After(deadline) {
			stopA()
			t.Fatalf("process A did not get both partitions back restored (ready %v, tasks %v)", hA.Ready(), hA.Versions()[0].Tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopA()
	if interrupted.Load() == 0 {
		t.Fatal("no restore of process A was interrupted by the revocation: the test proved nothing")
	}

	// A's stores against the changelog.
	byPart := map[int32][]*kgo.Record{}
	for _, r := range p.b.ReadCommitted(t, changelog, 60*time.Second) {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	rd, err := OpenStateReadOnly(cfgA.StateDir(), nil) // A's directory
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	stores, err := rd.Stores()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, st := range stores {
		if st.Store != "counts" {
			continue // the processor's time store
		}
		rs := byPart[st.Partition]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		want := map[string]string{}
		for _, r := range rs {
			if r.Value == nil {
				delete(want, string(r.Key))
			} else {
				want[string(r.Key)] = string(r.Value)
			}
		}
		got := map[string]string{}
		if err := rd.Scan(st.Processor, st.Partition, st.Store, func(k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !st.HasCheckpoint || st.Checkpoint != ends[st.Partition] {
			t.Errorf("partition %d: checkpoint %d (%v), want the changelog end %d", st.Partition, st.Checkpoint, st.HasCheckpoint, ends[st.Partition])
		}
		if len(got) != len(want) {
			t.Errorf("partition %d: the store holds %d keys, the changelog from its log start %d", st.Partition, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("partition %d: key %s = %x, the changelog says %x", st.Partition, k, got[k], v)
				break
			}
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("checked %d stores in process A's directory, want 2", checked)
	}
	t.Logf("A's restores interrupted by the revocation: %d; both stores equal their changelog, checkpoints %v", interrupted.Load(), ends)
}
