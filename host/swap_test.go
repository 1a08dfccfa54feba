package host

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// counterPipeline is a stateful pipeline running internal/testplugins/counter
// (store "counts"), whose outputs show per key the exact sequence of counts.
func counterPipeline(t *testing.T) *pipeline { return counterPipelineOn(t, testbroker.New(t)) }

// counterPipelineOn is counterPipeline on broker b.
func counterPipelineOn(t *testing.T, b *testbroker.Broker) *pipeline {
	p := newPipelineOn(t, b, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorSkip)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	return p
}

// feeder produces input ids id0, id1, ... (keys k0..k29) in small batches
// until stopped, so swaps happen under load.
type feeder struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
	n    int
}

func feed(t *testing.T, p *pipeline, batch int, every time.Duration) *feeder {
	f := &feeder{stop: make(chan struct{}), done: make(chan struct{})}
	// A test that fails before it ends the feed must not leave it
	// producing (its t.Fatal after the test would panic).
	t.Cleanup(func() { f.end() })
	go func() {
		defer close(f.done)
		for {
			recs := make([]*kgo.Record, batch)
			for i := range recs {
				id := f.n + i
				recs[i] = &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(id%30)), Value: []byte("id" + strconv.Itoa(id))}
			}
			p.b.Produce(t, recs...)
			f.n += batch
			select {
			case <-f.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return f
}

// end stops producing and returns how many ids were produced.
func (f *feeder) end() int {
	f.once.Do(func() { close(f.stop) })
	<-f.done
	return f.n
}

// deploy publishes a version of processor "proc" as `wasmstream deploy`
// does (the config's plugin first, as the initial version) and returns its
// version ID.
func deploy(t testing.TB, p *pipeline, wasmPath, label string) string {
	t.Helper()
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	return deployBytes(t, p, wasm, label)
}

func deployBytes(t testing.TB, p *pipeline, wasm []byte, label string) string {
	t.Helper()
	// Deploy compiles the module first: under the race detector, on a
	// busy machine, a Go SDK plugin's compile alone took most of a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Deploy(ctx, p.cfg, "proc", wasm, label, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return res.Active.ID
}

// activeManifest reads the control topic's manifest of processor "proc".
func activeManifest(t testing.TB, p *pipeline) control.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rd, err := control.NewReader(control.Config{Kafka: kclient.Config{Brokers: p.b.Addrs()}, Topic: control.TopicName(p.cfg.AppID)})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	st, err := rd.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Manifest("proc")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitVersion waits until h runs version id on every task it has (at least one).
func waitVersion(t testing.TB, h *Host, id string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		v := h.Versions()[0]
		all := len(v.Tasks) > 0 && v.Active.ID == id
		for _, tv := range v.Tasks {
			all = all && tv == id
		}
		if !all {
			return fmt.Errorf("host runs %+v, want %s on every task", v, id)
		}
		return nil
	})
}

func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkCounts checks the counter's committed outputs against the n input
// ids: every id exactly once; per key, the counts 1..m exactly once each, and
// the versions along them in the order given by rank (never going back).
// It returns the number of outputs per version.
func checkCounts(t *testing.T, out []*kgo.Record, n int, rank map[string]int) map[string]int {
	t.Helper()
	ids := map[string]int{}
	type step struct {
		n   int
		ver string
	}
	perKey := map[string][]step{}
	byVersion := map[string]int{}
	for _, o := range out {
		ids[string(o.Key)]++
		key, count, ok := strings.Cut(string(o.Value), ":")
		if !ok {
			t.Fatalf("output value %q", o.Value)
		}
		c, _ := strconv.Atoi(count)
		ver := headerOf(o, runner.HeaderVersion)
		byVersion[ver]++
		perKey[key] = append(perKey[key], step{c, ver})
	}
	for i := 0; i < n; i++ {
		if c := ids["id"+strconv.Itoa(i)]; c != 1 {
			t.Fatalf("id%d came out %d times (%d outputs for %d inputs)", i, c, len(out), n)
		}
	}
	for key, steps := range perKey {
		sort.Slice(steps, func(i, j int) bool { return steps[i].n < steps[j].n })
		for i, s := range steps {
			if s.n != i+1 {
				t.Fatalf("key %s: counts %v, want 1..%d", key, steps, len(steps))
			}
			r, ok := rank[s.ver]
			if !ok {
				t.Fatalf("key %s count %d from version %q, not one of %v", key, s.n, s.ver, rank)
			}
			if i > 0 && r < rank[steps[i-1].ver] {
				t.Fatalf("key %s: version went back from %s to %s at count %d", key, steps[i-1].ver, s.ver, s.n)
			}
		}
	}
	return byVersion
}

// waitRecordsIn waits until processor "proc" of h has taken in at least n
// records.
func waitRecordsIn(t *testing.T, h *Host, n int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if st, _ := h.Stats("proc"); st.RecordsIn < n {
			return fmt.Errorf("processed %d records, want %d", st.RecordsIn, n)
		}
		return nil
	})
}

// checkSwapsAtCommitPoints fails t unless each task's outputs of the old
// version all come before its outputs of the new one, in separate
// transactions: the swap landed exactly at a commit point. One host writes
// the outputs, so the records of one transaction are contiguous in each
// partition and two transactions are parted by a commit marker, which a
// read_committed consumer does not see: an offset missing between the last
// old output and the first new one of a task in a partition is a commit
// point between them. An output is the counter's "<key>:<count>"; its task
// is the input partition of key.
func checkSwapsAtCommitPoints(t *testing.T, p *pipeline, out []*kgo.Record, old, v2 string) {
	t.Helper()
	taskOf := map[string]int32{}
	for _, r := range p.b.ReadCommitted(t, p.in, 30*time.Second) {
		taskOf[string(r.Key)] = r.Partition
	}
	type span struct{ lastOld, firstNew int64 }
	spans := map[[2]int32]*span{} // {output partition, task}
	present := map[int32]map[int64]bool{}
	for _, o := range out {
		if present[o.Partition] == nil {
			present[o.Partition] = map[int64]bool{}
		}
		present[o.Partition][o.Offset] = true
		key, _, _ := strings.Cut(string(o.Value), ":")
		task, ok := taskOf[key]
		if !ok {
			t.Fatalf("output %q: no input has key %q", o.Value, key)
		}
		k := [2]int32{o.Partition, task}
		s := spans[k]
		if s == nil {
			s = &span{lastOld: -1, firstNew: -1}
			spans[k] = s
		}
		switch v := headerOf(o, runner.HeaderVersion); {
		case v == old && s.firstNew >= 0:
			t.Fatalf("partition %d: task %d's output at %d is of version %s, after its first of %s at %d", o.Partition, task, o.Offset, old, v2, s.firstNew)
		case v == old:
			s.lastOld = o.Offset
		case v == v2 && s.firstNew < 0:
			s.firstNew = o.Offset
		}
	}
	for k, s := range spans {
		if s.lastOld < 0 || s.firstNew < 0 {
			continue
		}
		between := false
		for off := s.lastOld + 1; off < s.firstNew && !between; off++ {
			between = !present[k[0]][off]
		}
		if !between {
			t.Fatalf("partition %d: task %d's last output of %s (offset %d) and first of %s (offset %d) are in one transaction: the swap did not land at a commit point",
				k[0], k[1], old, s.lastOld, v2, s.firstNew)
		}
	}
}

// A deploy under load with exactly_once: the running host switches each
// task once, at a commit point (no transaction holds a task's outputs of
// both versions); every input comes out exactly once; per key the counts
// continue across the swap (the state is untouched) and the versions go
// old -> new, never back. A restart then runs the new version.
func TestSwapUnderLoadExactlyOnce(t *testing.T) {
	p := counterPipeline(t)
	h, stop := p.run(t)
	old := h.Versions()[0].Active.ID
	f := feed(t, p, 50, 10*time.Millisecond)
	waitRecordsIn(t, h, 200) // under load
	v2 := deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/counterv2"), "v2")
	waitVersion(t, h, v2)
	st, _ := h.Stats("proc")
	waitRecordsIn(t, h, st.RecordsIn+200) // the new version under load too
	n := f.end()
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := p.b.ReadCommitted(t, p.out, 30*time.Second)
	byVersion := checkCounts(t, out, n, map[string]int{old: 0, v2: 1})
	if byVersion[old] == 0 || byVersion[v2] == 0 {
		t.Fatalf("outputs by version %v: the swap did not happen under load", byVersion)
	}
	checkSwapsAtCommitPoints(t, p, out, old, v2)
	t.Logf("%d inputs; outputs by version %v", n, byVersion)

	// A restart runs the deployed version, not the config file's.
	h2, stop2 := p.run(t)
	if got := h2.Versions()[0].Active.ID; got != v2 {
		t.Fatalf("after a restart the host runs %s, want %s", got, v2)
	}
	p.produce(t, "k1")
	p.waitProcessed(t)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// A fleet: two running hosts both switch to a deployed version; a host
// started after the deploy starts with it.
func TestSwapFleetConverges(t *testing.T) {
	p := counterPipeline(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var hosts []*Host
	for _, d := range dirs[:2] {
		p.cfg.State.Dir = d
		h, _ := p.run(t)
		hosts = append(hosts, h)
	}
	f := feed(t, p, 20, 20*time.Millisecond)
	v2 := deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/counterv2"), "v2")
	for _, h := range hosts {
		waitVersion(t, h, v2)
	}
	p.cfg.State.Dir = dirs[2]
	late, _ := p.run(t)
	if got := late.Versions()[0].Active.ID; got != v2 {
		t.Fatalf("a host started after the deploy runs %s, want %s", got, v2)
	}
	n := f.end()
	p.waitProcessed(t)
	checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), n, map[string]int{plugin.VersionID(hosts[0].procs[0].ConfigVersion): 0, v2: 1})
}

// A new version failing a third of its records is rolled back by the fleet
// on its own: the transactions holding its failures are aborted, so no
// output of a record it failed is committed (it emits before failing),
// every input comes out exactly once and the counts run on without a gap.
// A window in which it failed nothing may commit before the rollback; its
// outputs are right and stay. The control topic records the rollback, so a
// host started afterwards runs the old version.
func TestAutoRollbackFleet(t *testing.T) {
	p := counterPipeline(t)
	// At 1 % a task must run 100 records of the bad version without a
	// failure (odds (2/3)^100) for its first failure not to trip the
	// canary and be skipped instead.
	p.cfg.Swap = SwapConfig{CanaryWindow: Set(30 * time.Second), MaxFailureRatio: Set(0.01), MinRecords: 1}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var hosts []*Host
	for _, d := range dirs[:2] {
		p.cfg.State.Dir = d
		h, _ := p.run(t)
		hosts = append(hosts, h)
	}
	old := hosts[0].Versions()[0].Active.ID
	f := feed(t, p, 20, 20*time.Millisecond)
	// The bad version arrives under load, once the old one has run a
	// batch of the feed.
	testutil.Eventually(t, 60*time.Second, func() error {
		var n int64
		for _, h := range hosts {
			st, _ := h.Stats("proc")
			n += st.RecordsIn
		}
		if n < 20 {
			return fmt.Errorf("the old version processed %d records, want 20", n)
		}
		return nil
	})
	bad := deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/counterbad"), "bad")
	// The first host to see the failures rolls back and publishes it; the
	// other follows the control topic (or rolls back on its own first).
	testutil.Eventually(t, 60*time.Second, func() error {
		if rollbacks(hosts[0])+rollbacks(hosts[1]) == 0 {
			return fmt.Errorf("no rollback: %+v / %+v", hosts[0].Versions(), hosts[1].Versions())
		}
		return nil
	})
	for _, h := range hosts {
		waitVersion(t, h, old)
	}
	n := f.end()
	p.waitProcessed(t)
	out := p.b.ReadCommitted(t, p.out, 30*time.Second)
	// The counts go on across the versions, back and forth: both rank 0.
	byVersion := checkCounts(t, out, n, map[string]int{old: 0, bad: 0})
	for _, o := range out {
		if headerOf(o, runner.HeaderVersion) == bad && counterbadFails(o.Key) {
			t.Fatalf("output %s of a record the rolled-back version failed was committed", o.Key)
		}
	}
	rollbacks := rollbacks(hosts[0]) + rollbacks(hosts[1])

	// The rollback is published on its own goroutine (reading the target's
	// bytes again from the topic first): wait for it.
	var m control.Manifest
	testutil.Eventually(t, time.Minute, func() error {
		if m = activeManifest(t, p); plugin.VersionID(m.Version) != old || !strings.HasPrefix(m.Reason, "auto-rollback") {
			return fmt.Errorf("control topic names %s (%s), want %s after an auto-rollback", plugin.VersionID(m.Version), m.Reason, old)
		}
		return nil
	})
	p.cfg.State.Dir = dirs[2]
	late, _ := p.run(t)
	if got := late.Versions()[0].Active.ID; got != old {
		t.Fatalf("a host started after the rollback runs %s, want %s", got, old)
	}
	t.Logf("%d inputs, outputs by version %v, %d rollbacks, topic reason %q", n, byVersion, rollbacks, m.Reason)
}

// counterbadFails reports whether internal/testplugins/counterbad fails
// the input whose value (the output's key) is id.
func counterbadFails(id []byte) bool {
	h := fnv.New32a()
	h.Write(id)
	return h.Sum32()%3 == 0
}

// rollbacks is the count of automatic rollbacks h made of processor "proc".
func rollbacks(h *Host) int64 {
	st, _ := h.Stats("proc")
	return st.Rollbacks
}
