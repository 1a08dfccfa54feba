package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// stager is the window-staging plugin, written in Go: every record
// puts puts values of size bytes under keys of its own (the offset and
// the put's index, so the window's pending writes really hold them all),
// each under the per-record limits (1 MiB per value, 16 MiB per record),
// then emits its input. Its puts and emits are charged to the task's
// account like a Wasm plugin's (state.Task.SetHold, task.Emit).
type stager struct {
	puts, size int
	// errs counts the puts the host refused (ELIMIT: the account's cap).
	errs atomic.Int64
}

func (p *stager) Close(context.Context) error { return nil }

func (p *stager) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &stagerInstance{p: p, sink: env.Sink, st: env.State, value: make([]byte, p.size)}, nil
}

type stagerInstance struct {
	p     *stager
	sink  Sink
	st    *state.Task
	value []byte
}

func (i *stagerInstance) Process(_ context.Context, rec *abi.Record) error {
	key := make([]byte, 12)
	binary.BigEndian.PutUint32(key, uint32(rec.Partition))
	binary.BigEndian.PutUint64(key[4:], uint64(rec.Offset))
	for n := range i.p.puts {
		key[0] = byte(n) // the partition fits in the low bytes
		if err := i.st.Put(0, key, i.value); err != nil {
			return i.p.refused(err)
		}
	}
	if err := i.sink.Emit(0, &abi.Record{Key: rec.Key, Value: rec.Value, Partition: abi.AnyPartition}); err != nil {
		return i.p.refused(err)
	}
	return nil
}

// refused is the record's failure when the host refused a call: the
// engine's for ELIMIT (limit exceeded), counted.
func (p *stager) refused(err error) error {
	if !errors.Is(err, account.ErrLimit) {
		return err
	}
	p.errs.Add(1)
	return &KindError{Kind: FailureLimitExceeded, Err: err}
}

func (i *stagerInstance) Close(context.Context) error { return nil }

// heapPeak samples the Go heap's live bytes (as of each GC) until stop is
// called, and returns the largest.
func heapPeak() (stop func() int64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := int64(sample[0].Value.Uint64()); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return peak.Load() }
}

// liveHeap is the live heap after a full collection.
func liveHeap() int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return int64(sample[0].Value.Uint64())
}

// heldFixedOverhead is what the process may hold beyond three times the
// account's figure (abi/ABI.md section 7: the staged bytes, their copy in
// the store's batch that applies them, and the previous window's batch,
// which the store keeps in memory until it is flushed): the store's
// memtables (two of 8 MiB), the client's fetch and produce buffers, the
// runner's own. Stated here; measured at 35-55 MiB.
const heldFixedOverhead = 96 << 20

// The window-staging plugin (15 values of 990,000 bytes per
// record, each record under the per-record limits) with every record
// available at once and a commit interval that never comes: without a
// bound per window, one commit window would stage all of them (the issue
// measured 4.0 GB). With the account, the commit point comes forward each
// time the task's window holds its budget (64 MiB by default), so the run
// makes about records x 14.85 MB / 64 MiB commits; no record fails (the
// cap, twice the budget, is never reached: one record stages at most a
// quarter of the window); the account never holds more than the budget
// plus one record; the process's live heap grows by at most three times
// the account's peak plus heldFixedOverhead, beyond what the broker keeps
// when it is the embedded one; every input has exactly one output.
func TestWindowStagingPluginCommitsEarly(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) { testWindowStaging(t, eos) })
	}
}

func testWindowStaging(t *testing.T, eos bool) {
	const (
		records = 20
		puts    = 15
		size    = 990_000
	)
	perRecord := int64(puts) * (size + 2*12 + state.HeldEntryOverhead)
	f := newFixture(t, eos, 1)
	clog := f.b.Name(t, "clog")
	f.b.CreateTopic(t, clog, 1, map[string]string{"cleanup.policy": "compact"})
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
	}
	f.b.Produce(t, recs...)

	pool := account.NewPool(1 << 30)
	p := &stager{puts: puts, size: size}
	before := liveHeap()
	peak := heapPeak()
	r := f.runnerWith(t, p, Fail, func(o *Options) {
		// Only the budget brings a commit point; the interval stays inside
		// half the transaction timeout, as the host's config requires.
		o.CommitInterval, o.TransactionTimeout = 25*time.Second, time.Minute
		o.State = db
		o.Memory = pool
		o.Processors[0].Stores = []string{"s"}
		o.Processors[0].Changelogs = []string{clog}
	})
	stop := start(t, r)
	f.waitCommitted(t, map[int32]int64{0: records})
	heapPeak := peak() - before
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats("upper")

	// Fewest commits: the window ends at the first record boundary at or
	// past the budget.
	perWindow := DefaultWindowBytes/perRecord + 1
	wantCommits := int64(records) / perWindow
	if got := st.BudgetCommits.Load(); got < wantCommits {
		t.Errorf("%d commit points brought forward, want at least %d (%d records of %d bytes, a window of %d)",
			got, wantCommits, records, perRecord, DefaultWindowBytes)
	}
	if got := st.Commits.Load(); got < wantCommits {
		t.Errorf("%d commits, want at least %d", got, wantCommits)
	}
	if n := p.errs.Load(); n != 0 || len(st.Failures()) != 0 {
		t.Errorf("%d puts refused, failures %v: no record may fail below the cap", n, st.Failures())
	}
	if st.Aborts.Load() != 0 {
		t.Errorf("%d transactions aborted", st.Aborts.Load())
	}

	// The account (as its pool granted it, rounded up to a grant): never
	// more than the budget plus the record that reached it, all of it
	// released once the runner stopped.
	acctPeak := pool.Peak()
	if most := DefaultWindowBytes + perRecord + account.Grant; acctPeak == 0 || acctPeak > most {
		t.Errorf("the account's peak is %d bytes, want (0, %d]", acctPeak, most)
	}
	if g := pool.Granted(); g != 0 {
		t.Errorf("the pool still grants %d bytes after the runner stopped", g)
	}
	if g := st.HeldBytes.Load(); g != 0 {
		t.Errorf("the held-bytes gauge reads %d after the runner stopped", g)
	}

	// The process's heap: three times the account's peak plus the fixed overhead,
	// plus, on the embedded broker, what the broker itself keeps of the
	// changelog (every window's values) and the outputs.
	allow := 3*acctPeak + heldFixedOverhead
	if !f.b.Real() {
		allow += int64(records) * perRecord
	}
	if heapPeak > allow {
		t.Errorf("the live heap grew by %d MiB at its peak, over the %d MiB allowed (account peak %d MiB)", heapPeak>>20, allow>>20, acctPeak>>20)
	}
	t.Logf("%s: %d commits, %d brought forward; account peak %.1f MiB; live heap +%.1f MiB at its peak (allowed %.1f)",
		guarantee(eos), st.Commits.Load(), st.BudgetCommits.Load(), float64(acctPeak)/(1<<20), float64(heapPeak)/(1<<20), float64(allow)/(1<<20))

	// Exactly one output per input.
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	seen := map[string]int{}
	for _, o := range out {
		seen[string(o.Key)]++
	}
	if len(out) != records || len(seen) != records {
		t.Errorf("%d outputs for %d distinct keys, want %d of each", len(out), len(seen), records)
	}
}

// 32 tasks of the window-staging plugin cannot make the process hold more
// than its budget: the pool grants nothing past it. Past half of it the
// tasks above the average commit early; the calls that would pass it fail
// their records with ELIMIT (kind limit exceeded: here on_error skip, so
// every record is still accounted for).
func TestThirtyTwoTasksStayInTheProcessBudget(t *testing.T) {
	const (
		partitions = 32
		perTask    = 4
		puts       = 8
		size       = 500_000
		budget     = 48 << 20 // a window of 32 tasks' records is ~128 MB
	)
	f := newFixture(t, true, partitions)
	clog := f.b.Name(t, "clog")
	f.b.CreateTopic(t, clog, partitions, map[string]string{"cleanup.policy": "compact"})
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var recs []*kgo.Record
	for part := range partitions {
		for i := range perTask {
			recs = append(recs, &kgo.Record{Topic: f.in, Partition: int32(part), Key: []byte(fmt.Sprintf("p%d-%d", part, i)), Value: []byte("v")})
		}
	}
	for part := range partitions {
		f.b.ProduceTo(t, int32(part), recs[part*perTask:(part+1)*perTask]...)
	}

	pool := account.NewPool(budget)
	p := &stager{puts: puts, size: size}
	var most atomic.Int64
	watching := make(chan struct{})
	go func() {
		for {
			most.Store(max(most.Load(), pool.Granted()))
			select {
			case <-watching:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	r := f.runnerWith(t, p, Skip, func(o *Options) {
		o.CommitInterval, o.TransactionTimeout = 25*time.Second, time.Minute
		o.State = db
		o.Memory = pool
		o.Processors[0].Stores = []string{"s"}
		o.Processors[0].Changelogs = []string{clog}
		o.Processors[0].WindowBytes = 16 << 20 // 32 x 16 MiB = 512 MiB of windows
	})
	stop := start(t, r)
	want := map[int32]int64{}
	for part := range partitions {
		want[int32(part)] = perTask
	}
	f.waitCommitted(t, want)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(watching)
	st := r.Stats("upper")
	if m := most.Load(); m > budget {
		t.Errorf("the pool granted %d bytes, over its budget of %d", m, budget)
	}
	if st.BudgetCommits.Load() == 0 {
		t.Error("no commit point was brought forward")
	}
	if pool.Granted() != 0 {
		t.Errorf("the pool still grants %d bytes after the runner stopped", pool.Granted())
	}
	skipped, failed := st.Skipped.Load(), p.errs.Load()
	if skipped != failed || st.Failures()[FailureLimitExceeded.String()] != failed {
		t.Errorf("%d records skipped, %d puts refused, failures %v: every refusal must be a limit_exceeded failure", skipped, failed, st.Failures())
	}
	out := f.b.ReadCommitted(t, f.out, 30*time.Second)
	if int64(len(out))+skipped != partitions*perTask {
		t.Errorf("%d outputs and %d skipped for %d inputs", len(out), skipped, partitions*perTask)
	}
	t.Logf("pool peak %.1f MiB of %d MiB; %d commits, %d brought forward; %d records skipped at the process budget",
		float64(most.Load())/(1<<20), budget>>20, st.Commits.Load(), st.BudgetCommits.Load(), skipped)
}

// A put past the account's cap is refused with an error the engine turns
// into ELIMIT and the record's failure (abi.ErrnoLimit in the chain), and
// leaves nothing charged.
func TestHoldPastTheCapIsELIMIT(t *testing.T) {
	tk := &task{id: TaskID{Processor: "p", Topic: "in"}, acct: (*account.Pool)(nil).Open(1000, nil)}
	if err := tk.hold(2000); err != nil {
		t.Fatal(err)
	}
	err := tk.hold(1)
	var errno abi.Errno
	if !errors.As(err, &errno) || errno != abi.ErrnoLimit || !errors.Is(err, account.ErrLimit) {
		t.Fatalf("hold past the cap: %v", err)
	}
	if tk.acct.Held() != 2000 {
		t.Fatalf("held %d after a refused charge", tk.acct.Held())
	}
}

// The input records a slow task holds, fetched and not processed, are
// charged to its account and bounded in bytes (maxHeldBytes), not only in
// number (maxHeld): a thousand records of a megabyte would otherwise be a
// gigabyte per partition. A task whose records take 10 ms each is fed
// 48 MiB of 256 KiB records on one partition, so the client fetches them
// faster than the task works through them; the bytes it holds, sampled
// between polls, stay within maxHeldBytes, and its account sees them;
// every record is processed in the end.
func TestHeldInputIsBoundedInBytes(t *testing.T) {
	f := newFixture(t, false, 1)
	const n, size = 192, 256 << 10
	value := make([]byte, size)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i)), Value: value})
	}
	f.b.Produce(t, recs...)
	r := f.runnerWith(t, &goPlugin{delay: 10 * time.Millisecond}, Fail, func(o *Options) {
		o.Memory = account.NewPool(1 << 30)
	})
	stop := start(t, r)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	var maxHeld, maxInput int64
	sample := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, tk := range r.tasks {
			maxHeld = max(maxHeld, tk.win.heldBytes())
			maxInput = max(maxInput, tk.acct.Input())
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.waitCommitted(t, map[int32]int64{0: n})
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(5 * time.Millisecond):
			sample()
		}
	}
	t.Logf("held at most %d MiB of input (bound %d MiB), the account saw %d MiB", maxHeld>>20, maxHeldBytes>>20, maxInput>>20)
	// What a fetch brings past the bound is fetched again later (before,
	// one fetch of this partition held 57 records, 14 MiB, and the task
	// held 26 MiB).
	if limit := int64(maxHeldBytes); maxHeld > limit {
		t.Errorf("the task held %d bytes of input, over %d", maxHeld, limit)
	}
	if maxHeld < 4<<20 || maxInput == 0 {
		t.Errorf("the task held at most %d bytes of input (its account %d): the test did not make it hold any", maxHeld, maxInput)
	}
}
