package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/versions"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

func versionOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == HeaderVersion {
			return string(h.Value)
		}
	}
	return ""
}

// waitProcessed waits until the processor has taken in at least n records.
func waitProcessed(t *testing.T, r *Runner, n int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if got := r.Stats("upper").RecordsIn.Load(); got < n {
			return fmt.Errorf("processed %d records, want %d", got, n)
		}
		return nil
	})
}

// A swap while records flow: every input comes out exactly once; within
// each partition the outputs of the old version all come before those of
// the new one (a task switches once, at a commit point); every task ends
// on the new version.
func testSwapUnderLoad(t *testing.T, eos bool) {
	f := newFixture(t, eos, 4)
	const n = 4000
	f.produceInputs(t, 0, n/2)
	r := f.runner(t, &goPlugin{delay: 100 * time.Microsecond}, Fail)
	stop := start(t, r)
	waitProcessed(t, r, 300)
	if err := r.vers.Propose("upper", versions.Info{ID: "v2"}, &goPlugin{delay: 100 * time.Microsecond}, versions.Canary{}); err != nil {
		t.Fatal(err)
	}
	f.produceInputs(t, n/2, n/2)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	active, tasks := activeVersion(r, "upper")
	stalls, _ := r.SwapStalls("upper")
	swaps := r.Stats("upper").Swaps.Load()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if active != "v2" || len(tasks) != 4 {
		t.Fatalf("active version %q, tasks %v; want v2 on 4 tasks", active, tasks)
	}
	for id, v := range tasks {
		if v != "v2" {
			t.Fatalf("task %s runs %q after the swap", id, v)
		}
	}
	if swaps != 4 {
		t.Fatalf("%d task switches, want 4", swaps)
	}
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	seen := map[string]int{}
	last := map[int32]string{}
	counts := map[string]int{}
	for _, o := range out {
		seen[string(o.Value)]++
		v := versionOf(o)
		counts[v]++
		switch prev := last[o.Partition]; {
		case prev == "" || prev == v:
		case prev == "initial" && v == "v2":
		default:
			t.Fatalf("partition %d: version %q after %q", o.Partition, v, prev)
		}
		last[o.Partition] = v
	}
	for i := 0; i < n; i++ {
		if c := seen["VALUE-"+strconv.Itoa(i)]; c != 1 {
			t.Fatalf("input %d came out %d times", i, c)
		}
	}
	if counts["initial"] == 0 || counts["v2"] == 0 {
		t.Fatalf("outputs by version %v: the swap did not happen under load", counts)
	}
	t.Logf("outputs by version %v; stalls %v", counts, stalls)
}

// A new version that fails a third of its records is rolled back on its
// own: the transaction holding its failures is aborted, so under
// exactly_once no output of a record it failed is committed (it emits
// before failing) and every input comes out exactly once. A commit window
// in which the new version failed nothing may commit before the one that
// trips the canary: those outputs are right and stay. Under at_least_once
// the rollback happens too, and every input comes out at least once.
//
// The failure ratio limit is 1 %: a task would have to run 100 records of
// the new version without a failure before its first one (odds (2/3)^100)
// for that failure not to trip the canary. At 10 % it took 10 (odds
// (2/3)^10, about 2 % a task), and under on_error: fail the task then
// stopped, as it should, which the test read as a stall.
func testAutoRollback(t *testing.T, eos bool, onError ErrorPolicy) {
	f := newFixture(t, eos, 4)
	const n = 3000
	f.produceInputs(t, 0, n/2)
	var mu sync.Mutex
	var events []RollbackEvent
	r := f.runnerWith(t, &goPlugin{delay: 100 * time.Microsecond}, onError, func(o *Options) {
		o.OnRollback = func(ev RollbackEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	})
	stop := start(t, r)
	waitProcessed(t, r, 200)
	bad := &goPlugin{delay: 100 * time.Microsecond, fail: map[string]bool{}}
	for i := 0; i < n; i += 3 {
		bad.fail["k"+strconv.Itoa(i)] = true
	}
	if err := r.vers.Propose("upper", versions.Info{ID: "v2"}, bad, versions.Canary{Window: 30 * time.Second, MaxFailureRatio: 0.01}); err != nil {
		t.Fatal(err)
	}
	f.produceInputs(t, n/2, n/2)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	active, _ := activeVersion(r, "upper")
	rollbacks := r.Stats("upper").Rollbacks.Load()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if active != "initial" || rollbacks != 1 {
		t.Fatalf("active %q after %d rollbacks; want initial after 1", active, rollbacks)
	}
	mu.Lock()
	if len(events) != 1 || events[0].From != "v2" || events[0].To != "initial" {
		t.Fatalf("rollback events %+v", events)
	}
	mu.Unlock()
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	seen := map[string]int{}
	v2 := 0
	for _, o := range out {
		seen[string(o.Value)]++
		if versionOf(o) != "v2" {
			continue
		}
		v2++
		if eos && bad.fail[string(o.Key)] {
			t.Fatalf("output %q of a record the rolled-back version failed was committed", o.Value)
		}
	}
	for i := 0; i < n; i++ {
		c := seen["VALUE-"+strconv.Itoa(i)]
		if c == 0 || (eos && c != 1) {
			t.Fatalf("input %d came out %d times", i, c)
		}
	}
	t.Logf("%d outputs, %d from v2, rollback: %s", len(out), v2, events[0].Reason)
}

func TestSwap(t *testing.T) {
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Run("UnderLoad", func(t *testing.T) { testSwapUnderLoad(t, mode.eos) })
			t.Run("AutoRollbackSkip", func(t *testing.T) { testAutoRollback(t, mode.eos, Skip) })
			if mode.eos {
				t.Run("AutoRollbackFail", func(t *testing.T) { testAutoRollback(t, mode.eos, Fail) })
			}
		})
	}
}

// A version whose instances cannot start is not switched to: the tasks
// keep the old one, and the failure is counted.
func TestSwapToBrokenVersionKeepsTheOld(t *testing.T) {
	f := newFixture(t, true, 2)
	f.produceInputs(t, 0, 100)
	r := f.runner(t, &goPlugin{}, Fail)
	stop := start(t, r)
	waitProcessed(t, r, 100)
	if err := r.vers.Propose("upper", versions.Info{ID: "broken"}, brokenPlugin{}, versions.Canary{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if r.Stats("upper").SwapFailures.Load() == 0 {
			return errors.New("the broken version was never tried")
		}
		return nil
	})
	f.produceInputs(t, 100, 100)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	active, tasks := activeVersion(r, "upper")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if active != "initial" {
		t.Fatalf("active version %q, want initial", active)
	}
	for id, v := range tasks {
		if v != "initial" {
			t.Fatalf("task %s runs %q", id, v)
		}
	}
	if err := r.vers.Propose("nope", versions.Info{ID: "x"}, nil, versions.Canary{}); err == nil {
		t.Fatal("a proposal for an unknown processor succeeded")
	}
}

type brokenPlugin struct{}

func (brokenPlugin) Close(context.Context) error { return nil }

func (brokenPlugin) Instantiate(context.Context, TaskID, Env) (Processor, error) {
	return nil, errors.New("init trapped")
}

// A swap reaches the tasks of an idle runner too: with no record to
// process, the loop waits in its poll, and the new version's instances
// being ready must end that wait.
func TestSwapWhileIdle(t *testing.T) {
	f := newFixture(t, true, 3)
	f.produceInputs(t, 0, 30)
	r := f.runner(t, &goPlugin{}, Fail)
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	for i := 2; i <= 6; i++ {
		id := "v" + strconv.Itoa(i)
		if err := r.vers.Propose("upper", versions.Info{ID: id}, &goPlugin{}, versions.Canary{}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			_, tasks := activeVersion(r, "upper")
			done := len(tasks) == 3
			for _, v := range tasks {
				done = done && v == id
			}
			if !done {
				return fmt.Errorf("idle tasks still run %v, want %s", tasks, id)
			}
			return nil
		})
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// activeVersion is the registry's active version of processor and the
// version of each of its tasks.
func activeVersion(r *Runner, processor string) (active string, tasks map[string]string) {
	s, _ := r.vers.Snapshot(processor)
	return s.Active.ID, s.Tasks
}

// slowStartPlugin is goPlugin whose instances say their start ran long (as
// an engine instance whose init took over half its budget does).
type slowStartPlugin struct{ goPlugin }

type slowStartInstance struct{ *goInstance }

func (slowStartInstance) StartTime() (time.Duration, bool) { return 6 * time.Second, true }

func (p *slowStartPlugin) Instantiate(ctx context.Context, id TaskID, env Env) (Processor, error) {
	inst, err := p.goPlugin.Instantiate(ctx, id, env)
	if err != nil {
		return nil, err
	}
	return slowStartInstance{inst.(*goInstance)}, nil
}

// A version swapped in under a canary whose instances start slowly (init
// over half its budget) is counted, reported through OnRollback and
// rolled back before any task switches to it; without a canary it is only
// counted, and taken.
func TestSlowStartRollsBackACanary(t *testing.T) {
	f := newFixture(t, true, 2)
	f.produceInputs(t, 0, 100)
	var mu sync.Mutex
	var events []RollbackEvent
	r := f.runnerWith(t, &goPlugin{}, Fail, func(o *Options) {
		o.OnRollback = func(ev RollbackEvent) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		}
	})
	stop := start(t, r)
	waitProcessed(t, r, 100)
	if err := r.vers.Propose("upper", versions.Info{ID: "slow"}, &slowStartPlugin{}, versions.Canary{Window: time.Minute, MaxFailureRatio: 0.5}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 {
			return errors.New("no rollback reported")
		}
		return nil
	})
	f.produceInputs(t, 100, 100)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	active, tasks := activeVersion(r, "upper")
	if active != "initial" {
		t.Fatalf("active version %q, want initial", active)
	}
	for id, v := range tasks {
		if v != "initial" {
			t.Fatalf("task %s runs %q", id, v)
		}
	}
	st := r.Stats("upper")
	if st.SlowStarts.Load() == 0 || st.Rollbacks.Load() == 0 || st.Swaps.Load() != 0 {
		t.Fatalf("slow starts %d, rollbacks %d, swaps %d; want some, some and none", st.SlowStarts.Load(), st.Rollbacks.Load(), st.Swaps.Load())
	}
	mu.Lock()
	ev := events[0]
	mu.Unlock()
	if ev.From != "slow" || ev.To != "initial" || !strings.Contains(ev.Reason, "start") {
		t.Fatalf("rollback event %+v", ev)
	}

	// Without a canary: counted, and taken.
	if err := r.vers.Propose("upper", versions.Info{ID: "slow2"}, &slowStartPlugin{}, versions.Canary{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, tasks := activeVersion(r, "upper"); len(tasks) != 2 || tasks[TaskID{Processor: "upper", Topic: f.in, Partition: 0}.String()] != "slow2" {
			return fmt.Errorf("tasks run %v, want slow2", tasks)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// blockingStartPlugin's instances take until their start's context ends,
// or a minute, to start (a plugin whose init runs long: the engine stops
// an init when its context ends).
type blockingStartPlugin struct {
	goPlugin
	entered chan struct{}
}

func (p *blockingStartPlugin) Instantiate(ctx context.Context, id TaskID, env Env) (Processor, error) {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("start stopped: %w", ctx.Err())
	case <-time.After(time.Minute):
	}
	return p.goPlugin.Instantiate(ctx, id, env)
}

// A runner that stops while a task's plugin starts (in the assignment
// callback) ends that start: Run returns long before the start would have
// (before: SIGTERM waited 8.6 s for a running init).
func TestStopDoesNotWaitForAStart(t *testing.T) { testStopDuringStart(t, true) }

// The client joins the group from New on, so a task can start (in the
// assignment callback, holding the runner's lock) before Run begins: a Run
// stopped then ends that start too, rather than waiting for the lock as
// long as the plugin's init runs (the race detector's CI run once met it).
func TestStopDoesNotWaitForAStartBeforeRun(t *testing.T) { testStopDuringStart(t, false) }

// testStopDuringStart stops Run while a task's plugin start blocks (for a
// minute unless its context ends), Run begun before that start (runFirst)
// or after it, and fails unless Run returns long before the minute.
func testStopDuringStart(t *testing.T, runFirst bool) {
	f := newFixture(t, true, 1)
	f.produceInputs(t, 0, 10)
	p := &blockingStartPlugin{entered: make(chan struct{}, 1)}
	r := f.runner(t, p, Fail)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	run := func() { go func() { done <- r.Run(ctx) }() }
	if runFirst {
		run()
	}
	select {
	case <-p.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no task started")
	}
	if !runFirst {
		run()
	}
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		t.Logf("Run returned %v after the stop: %v", time.Since(stopped), err)
		if took := time.Since(stopped); took > 20*time.Second {
			t.Errorf("Run took %v to stop, a third of the start's minute", took)
		}
	case <-time.After(50 * time.Second):
		t.Fatal("Run waited for the start")
	}
}

// A task that starts while its processor's version is under a canary (a
// partition assigned to this member after the deploy) is watched for the
// rest of the window; after the window, or for a first version, it is not.
func TestTaskStartedUnderACanaryIsWatched(t *testing.T) {
	reg := versions.New[Plugin](nil)
	reg.Start("p", versions.Info{ID: "v1"}, &goPlugin{})
	first, since := startVersion(reg.Current("p"), time.Now())
	if first.canary.Window != 0 || !since.IsZero() {
		t.Fatalf("a first version is watched: %+v since %v", first.canary, since)
	}
	canary := versions.Canary{Window: time.Minute, MaxFailureRatio: 0.01, MinRecords: 1}
	if err := reg.Propose("p", versions.Info{ID: "v2"}, &goPlugin{}, canary); err != nil {
		t.Fatal(err)
	}
	reg.TakePending("p")
	c := reg.Current("p")
	v, since := startVersion(c, c.Since.Add(20*time.Second))
	if v.Version != c.Active || v.canary != canary || !since.Equal(c.Since) {
		t.Fatalf("a task started 20s into a 1m canary: version %s, watch %+v since %v; want %s under %+v since %v",
			v.ID, v.canary, since, c.Active.ID, canary, c.Since)
	}
	v, since = startVersion(c, c.Since.Add(2*time.Minute))
	if v.canary.Window != 0 || !since.IsZero() {
		t.Fatalf("a task started after the canary window is watched: %+v since %v", v.canary, since)
	}
}
