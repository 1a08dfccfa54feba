package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// standbyLags are the standbys the host's members keep, by task.
func (h *Host) standbyLags() map[runner.TaskID]runner.StandbyLag {
	out := map[runner.TaskID]runner.StandbyLag{}
	for _, m := range h.members {
		if r := m.runner(); r != nil {
			maps.Copy(out, r.StandbyLags())
		}
	}
	return out
}

// Standby replicas, under both guarantees and both group
// protocols: two processes of one app, state.standby_replicas: 1. Each
// keeps a warm copy of the other's tasks, caught up while records flow.
// When one process leaves, the other takes its tasks over and restores
// only the changelog's tail its copies had not read (here: nothing),
// where without standbys it restores every record of their changelogs;
// and every count stays exact through the move.
func TestStandbyReplicasRestoreOnlyTheTail(t *testing.T) {
	for _, protocol := range []string{"classic", "consumer"} {
		for _, guarantee := range []string{"exactly_once", "at_least_once"} {
			t.Run(protocol+"/"+guarantee, func(t *testing.T) {
				testStandbyTakeover(t, protocol, guarantee, 2, 1)
			})
		}
	}
	// Three processes, a copy of every task on each other process: a
	// moved task finds one wherever the assignor puts it. (With fewer
	// copies the classic balancer prefers the process holding one as far
	// as balance allows, copartition's TestStandbyBalancerPlacesMovedUnitsOnTheirStandby; KIP-848's
	// broker knows nothing of them.)
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol+"/3 processes/2 standbys", func(t *testing.T) { testStandbyTakeover(t, protocol, "exactly_once", 3, 2) })
	}
	t.Run("without standbys", func(t *testing.T) { testStandbyTakeover(t, "classic", "exactly_once", 2, 0) })
}

func testStandbyTakeover(t *testing.T, protocol, guarantee string, processes, replicas int) {
	const partitions, keys = 4, 1000
	b := testbroker.New(t)
	in, out := b.Name(t, "in"), b.Name(t, "out")
	b.CreateTopic(t, in, partitions, nil)
	b.CreateTopic(t, out, partitions, nil)
	base := Config{
		AppID: b.Name(t, "standby"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second,
			GroupProtocol: GroupProtocol(protocol)},
		Guarantee: Guarantee(guarantee),
		Processors: []ProcessorConfig{{Name: "counter", Plugin: engineTestdata("statecounter"), Inputs: []string{in},
			Outputs: map[string]OutputConfig{"out": {Topic: out}}, Stores: []string{"counts"}, OnError: OnErrorFail}},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	var mu sync.Mutex
	restored := map[string]int64{} // by host and task: records the latest restore of its store "counts" applied
	start := func(name string) (*Host, func() error) {
		cfg := base
		cfg.Processors = slices.Clone(base.Processors)
		cfg.State = StateConfig{Dir: t.TempDir(), StandbyReplicas: replicas}
		h, err := New(context.Background(), &cfg, WithLogger(testLogger(t)),
			WithRestoreProgress(func(p RestoreProgress) {
				mu.Lock()
				// The data store only: the time store is written at
				// every commit point, so its tail since the copy's last
				// round is never empty.
				if p.Store == "counts" {
					restored[name+" "+p.Task] = p.Restored
				}
				mu.Unlock()
			}),
			func(o *options) { o.standbyInterval = 100 * time.Millisecond })
		if err != nil {
			t.Fatal(err)
		}
		return h, runHost(t, h)
	}
	produced := map[string]int{}
	produce := func(n int) {
		var recs []*kgo.Record
		for i := range n {
			k := "k" + strconv.Itoa(i%keys)
			produced[k]++
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v")})
		}
		b.Produce(t, recs...)
	}
	cfg := base
	cfg.State = StateConfig{}
	caughtUp := func() error {
		return waitCommittedErr(t, b, &cfg, in)
	}

	names := []string{"a", "b", "c"}[:processes]
	hosts := map[string]*Host{}
	stops := map[string]func() error{}
	for _, n := range names {
		hosts[n], stops[n] = start(n)
	}
	// settled: every partition owned, nothing moving for a second, and no
	// task of the live processes restoring. Under KIP-848 a partition
	// moves in steps (its old owner releases it at a heartbeat, then the
	// new one gets it at its own), and a task's restore runs on after it
	// is assigned: restores counted after this began after it.
	var settled map[int32]string
	var since time.Time
	settledErr := func(live []string) error {
		now := groupOwners(t, b, cfg.AppID, protocol)
		if len(now) != partitions || !maps.Equal(now, settled) {
			settled, since = now, time.Now()
			return fmt.Errorf("the group is moving partitions: %v", now)
		}
		if time.Since(since) < time.Second {
			return errors.New("the group has not been still for a second")
		}
		for _, n := range live {
			for _, m := range hosts[n].members {
				if r := m.runner(); r != nil && r.Restoring() > 0 {
					return fmt.Errorf("a task of %s is restoring", n)
				}
			}
		}
		return nil
	}
	produce(2000)
	testutil.Eventually(t, 90*time.Second, caughtUp)
	processed := time.Now()

	if replicas > 0 {
		// Every task has its standbys on replicas other processes,
		// caught up: a round that began after everything was processed
		// had nothing to read. And the group is settled: a task that
		// moved after the input was processed has restored (a restore
		// still running would be counted as the takeover's below).
		testutil.Eventually(t, 60*time.Second, func() error {
			if err := settledErr(names); err != nil {
				return err
			}
			copies := map[string]int{}
			for _, n := range names {
				for id, l := range hosts[n].standbyLags() {
					copies[id.String()]++
					if l.Behind != 0 || !l.Round.After(processed) {
						return fmt.Errorf("%s's standby of %s: its latest round, at %v, was %d records behind", n, id, l.Round, l.Behind)
					}
				}
			}
			if len(copies) != partitions {
				return fmt.Errorf("standbys of %d tasks, want %d: %v", len(copies), partitions, copies)
			}
			for id, c := range copies {
				if c != replicas {
					return fmt.Errorf("task %s has %d standbys, want %d", id, c, replicas)
				}
			}
			return nil
		})
	}
	// a's tasks move to the others: under the classic protocol to where
	// their standbys are; with as many standbys as other processes, they
	// are everywhere.
	mu.Lock()
	clear(restored)
	mu.Unlock()
	if err := stops["a"](); err != nil {
		t.Fatal(err)
	}
	// The restores of the takeover: until the group settles (every
	// partition owned, nothing moving for a second), before more input
	// comes (tasks moving later between the live processes restore the
	// tail of what was written since their copies' last rounds).
	settled = nil
	testutil.Eventually(t, 90*time.Second, func() error { return settledErr(names[1:]) })
	mu.Lock()
	takeover := maps.Clone(restored)
	mu.Unlock()
	produce(400)
	testutil.Eventually(t, 90*time.Second, caughtUp)
	for _, n := range names[1:] {
		if err := stops[n](); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	restored = takeover
	var survivors int64
	var moved []string
	for task, n := range restored {
		if task[:2] != "a " {
			survivors += n
			moved = append(moved, task)
		}
	}
	mu.Unlock()
	slices.Sort(moved)
	if len(moved) == 0 {
		t.Fatal("no task was restored when a left")
	}
	t.Logf("standby_replicas %d, %d processes: the others restored %d changelog records for %v", replicas, processes, survivors, moved)
	if replicas > 0 && survivors != 0 {
		t.Errorf("with caught-up standbys the moved tasks restored %d records, want 0 (only the tail)", survivors)
	}
	if replicas == 0 && survivors < 100 {
		t.Errorf("without standbys only %d records were restored: the test does not measure what it says", survivors)
	}

	// Exact counts: the changelog's last value of every key is the
	// number of records of that key.
	counts := map[string]uint64{}
	for _, r := range b.ReadCommitted(t, cfg.ChangelogTopic("counts"), 30*time.Second) {
		counts[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
	}
	for k, n := range produced {
		if counts[k] != uint64(n) && (guarantee == "exactly_once" || counts[k] < uint64(n)) {
			t.Errorf("key %s: %d records, counted %d", k, n, counts[k])
		}
	}
}

// waitCommittedErr is a condition: the group committed topic's end offsets.
func waitCommittedErr(t *testing.T, b *testbroker.Broker, cfg *Config, topic string) error {
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if !testbroker.AllCommitted(t, adm, cfg.AppID, ends) {
		return fmt.Errorf("%s not all committed yet", topic)
	}
	return nil
}

// groupOwners maps each partition of the group's assignment to its
// member (one input topic: under KIP-848 kfake leaves topic names out).
func groupOwners(t *testing.T, b *testbroker.Broker, group, protocol string) map[int32]string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[int32]string{}
	adm := b.Admin(t)
	if protocol == "consumer" {
		gs, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return nil
		}
		for _, m := range gs[group].Members {
			m.Assignment.Each(func(_ string, p int32) { out[p] = m.MemberID })
		}
		return out
	}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil
	}
	for _, m := range gs[group].Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				for _, p := range tp.Partitions {
					out[p] = m.MemberID
				}
			}
		}
	}
	return out
}
