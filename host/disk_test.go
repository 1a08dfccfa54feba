package host

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/diskfault"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// diskPair is a host of two stateful processors on the test broker: the
// "filler" (statecounter, store "counts", on_error: skip) on a state
// disk the test fails at will, and the "healthy" one (tally) beside it.
type diskPair struct {
	t        *testing.T
	b        *testbroker.Broker
	cfg      *Config
	h        *Host
	disk     *diskfault.FS
	base     string // the admin endpoint
	fin, hin string
	produced map[string]int // the filler's records by key
	round    int
	stopped  bool
	done     chan error
	cancel   context.CancelFunc
}

func newDiskPair(t *testing.T, writeTimeout time.Duration, tune ...func(*Config)) *diskPair {
	b := testbroker.New(t)
	fin, fout, hin, hout := b.Name(t, "fill-in"), b.Name(t, "fill-out"), b.Name(t, "healthy-in"), b.Name(t, "healthy-out")
	for _, topic := range []string{fin, fout, hin, hout} {
		b.CreateTopic(t, topic, 2, nil)
	}
	cfg := &Config{
		AppID: b.Name(t, "disk"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		Processors: []ProcessorConfig{
			{Name: "filler", Plugin: engineTestdata("statecounter"), Inputs: []string{fin},
				Outputs: map[string]OutputConfig{"out": {Topic: fout}}, Stores: []string{"counts"}, OnError: OnErrorSkip},
			{Name: "healthy", Plugin: engineTestdata("tally"), Inputs: []string{hin},
				Outputs: map[string]OutputConfig{"out": {Topic: hout}}, Stores: []string{"tally"}, OnError: OnErrorFail},
		},
		State:   StateConfig{Dir: t.TempDir(), SyncInterval: 50 * time.Millisecond},
		Admin:   AdminConfig{Listen: "127.0.0.1:0"},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	for _, f := range tune {
		f(cfg)
	}
	p := &diskPair{t: t, b: b, cfg: cfg, disk: diskfault.OnDisk(), fin: fin, hin: hin, produced: map[string]int{}, done: make(chan error, 1)}
	h, err := New(context.Background(), cfg, WithLogger(testLogger(t)), func(o *options) {
		o.stateOptions = func(processor string, so *state.Options) {
			if processor == "filler" {
				so.FS, so.WriteTimeout = p.disk, writeTimeout
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	p.h, p.base = h, "http://"+h.AdminAddr()
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- h.Run(ctx) }()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

// stop stops the host and returns Close's error (Run's is reported).
func (p *diskPair) stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		p.t.Fatal("the host did not stop within 60s of its context ending")
	}
	return p.h.Close()
}

// produce writes n records to topic (the filler's are counted by key).
func (p *diskPair) produce(topic string, n int) {
	var recs []*kgo.Record
	for i := range n {
		k := fmt.Sprintf("k%d", (p.round*n+i)%7)
		if topic == p.fin {
			p.produced[k]++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
	}
	p.round++
	p.b.Produce(p.t, recs...)
}

// behind is how many records of topic the app has not committed.
func (p *diskPair) behind(topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := p.b.Admin(p.t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	committed, err := adm.FetchOffsets(ctx, p.cfg.AppID)
	if err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(e kadm.ListedOffset) {
		c, _ := committed.Lookup(topic, e.Partition)
		n += e.Offset - max(c.At, 0)
	})
	return n, nil
}

// caughtUp is a condition: the app committed all of topic.
func (p *diskPair) caughtUp(topic string) func() error {
	return func() error {
		n, err := p.behind(topic)
		if err == nil && n > 0 {
			err = fmt.Errorf("%s: %d records not committed", topic, n)
		}
		return err
	}
}

// unready waits for /readyz to be 503 and returns its body.
func (p *diskPair) unready() string {
	var reason string
	testutil.Eventually(p.t, 60*time.Second, func() error {
		var code int
		if code, reason = httpGet(p.t, p.base+"/readyz"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d %q with the filler's disk failing", code, reason)
		}
		return nil
	})
	return reason
}

// healthyKeepsCommitting checks, the filler's database failed, that the
// healthy processor commits three rounds of records in full while the
// filler commits none of the records given it meanwhile, and skips none.
func (p *diskPair) healthyKeepsCommitting() {
	t := p.t
	p.produce(p.fin, 20)
	for range 3 {
		p.produce(p.hin, 20)
		testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	}
	if code, _ := httpGet(t, p.base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatal("the filler's database recovered on a disk that still fails")
	}
	if n, err := p.behind(p.fin); err != nil || n == 0 {
		t.Fatalf("the filler committed all its input on a failing disk (behind %d, %v): records were skipped or lost", n, err)
	}
	if st, _ := p.h.Stats("filler"); st.Skipped != 0 {
		t.Fatalf("the filler skipped %d records for a failing disk", st.Skipped)
	}
}

// A full disk under one processor's store: the disk
// refuses every write of the processor "filler" (ENOSPC through Pebble's
// errorfs). Its database fails: /readyz says so, naming the processor, the
// directory and the cause, the failure is counted in
// wasmstream_state_write_failures_total, and the processor stops without
// skipping a record (its on_error is skip: a store that cannot be written
// is not the record's failure). The stateful processor beside it, on a
// database of its own, keeps committing meanwhile. Once the disk takes
// writes again the host reopens the database, the filler's tasks restore
// from their changelog and process what they had not committed, and in the
// end its store holds exactly what its changelog says: every key's count
// is the number of records of that key.
func TestFullDiskStopsOnlyItsProcessor(t *testing.T) {
	p := newDiskPair(t, 5*time.Second)
	p.produce(p.fin, 20)
	p.produce(p.hin, 20)
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	if code, body := httpGet(t, p.base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz before the fault: %d %s", code, body)
	}

	p.disk.Fail(syscall.ENOSPC)
	p.produce(p.fin, 20)
	reason := p.unready()
	t.Logf("readyz: %s", reason)
	for _, want := range []string{"filler", p.cfg.ProcessorStateDir("filler"), "no space left on the device", "free space on the file system of state.dir"} {
		if !strings.Contains(reason, want) {
			t.Errorf("readyz says %q, which does not name %q", reason, want)
		}
	}
	_, metrics := httpGet(t, p.base+"/metrics")
	for _, want := range []string{`wasmstream_state_write_failures_total{database="filler",cause="no_space"} 1`,
		`wasmstream_state_failed{database="filler"} 1`, `wasmstream_state_failed{database="healthy"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	p.healthyKeepsCommitting()

	p.disk.Clear()
	p.produce(p.fin, 20)
	testutil.Eventually(t, 120*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := httpGet(t, p.base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("readyz %d %s after the disk was freed", code, body)
		}
		return nil
	})
	if st, _ := p.h.Stats("filler"); st.Skipped != 0 {
		t.Fatalf("the filler skipped %d records", st.Skipped)
	}
	if err := p.stop(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p.storeIsItsChangelog()
}

// storeIsItsChangelog checks, the host stopped, that the filler's store
// is what its changelog says, and both are the counts of what was
// produced.
func (p *diskPair) storeIsItsChangelog() {
	t := p.t
	changelog := map[string]uint64{}
	for _, r := range p.b.ReadCommitted(t, p.cfg.ChangelogTopic("counts"), 30*time.Second) {
		changelog[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
	}
	rd, err := OpenStateReadOnly(p.cfg.StateDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	stored := map[string]uint64{}
	for part := int32(0); part < 2; part++ {
		err := rd.Scan("filler", part, "counts", func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("a count of %d bytes", len(v))
			}
			stored[string(k)] = binary.LittleEndian.Uint64(v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, n := range p.produced {
		if stored[k] != uint64(n) || changelog[k] != uint64(n) {
			t.Errorf("key %s: %d records, the store counts %d, the changelog %d", k, n, stored[k], changelog[k])
		}
	}
	if len(stored) != len(p.produced) {
		t.Errorf("the store holds %d keys, %d were produced", len(stored), len(p.produced))
	}
}

// A disk that stops answering the filler's writes (Pebble's write stall,
// a hung network disk): its write fails at the write timeout instead of
// waiting, /readyz and the metric say so (cause timeout), the healthy
// processor keeps committing, and the host stops when asked although the
// write is still stuck: Close reports the database it could not close
// (state.ErrStuck). Once the disk answers, a new host on the same
// directory finds the filler's store consistent and catches up from its
// changelog.
func TestStalledDiskStopsOnlyItsProcessor(t *testing.T) {
	p := newDiskPair(t, 500*time.Millisecond)
	p.produce(p.fin, 20)
	p.produce(p.hin, 20)
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))

	p.disk.Stall()
	p.produce(p.fin, 20)
	reason := p.unready()
	t.Logf("readyz: %s", reason)
	if !strings.Contains(reason, "the disk did not answer in time") {
		t.Errorf("readyz says %q, not that the disk did not answer", reason)
	}
	_, metrics := httpGet(t, p.base+"/metrics")
	if want := `wasmstream_state_write_failures_total{database="filler",cause="timeout"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %q", want)
	}
	p.healthyKeepsCommitting()

	err := p.stop() // with the write still stuck
	if !errors.Is(err, state.ErrStuck) {
		t.Errorf("Close with a write stuck: %v, want state.ErrStuck", err)
	}
	p.disk.Clear()

	// The stuck close finishes once the disk answers; then the directory
	// can be opened again: a new host on it processes what the filler had
	// not committed, and its store is its changelog.
	cfg := *p.cfg
	cfg.Admin.Listen = ""
	var h *Host
	testutil.Eventually(t, 30*time.Second, func() error {
		var err error
		h, err = New(context.Background(), &cfg, WithLogger(testLogger(t)))
		if err != nil && !errors.Is(err, state.ErrLocked) {
			t.Fatalf("a new host on the directory: %v", err)
		}
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.fin))
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	p.storeIsItsChangelog()
}

// limits.state_disk: the filler's tasks may hold 1 MiB on disk, and each
// of its records adds a new 1 KiB key of random bytes (incompressible).
// Past the budget its state_put gets ELIMIT (statecounter then fails the
// record, which on_error: skip skips), so every task's store stays within
// the budget whatever the input; the healthy processor is untouched, and
// nothing stops.
func TestStateDiskBudgetBoundsATask(t *testing.T) {
	const budget = 1 << 20
	p := newDiskPair(t, 5*time.Second, func(cfg *Config) {
		cfg.Processors[0].Limits.StateDisk = budget
	})
	var recs []*kgo.Record
	for range 3000 { // about 1.5 MiB of keys per task
		key := make([]byte, 1024)
		_, _ = rand.Read(key)
		recs = append(recs, &kgo.Record{Topic: p.fin, Key: key, Value: []byte("v")})
	}
	p.b.Produce(t, recs...)
	p.produce(p.hin, 20)
	testutil.Eventually(t, 120*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	st, _ := p.h.Stats("filler")
	if st.Skipped == 0 || st.Failures["plugin_failed"] != st.Skipped {
		t.Fatalf("the filler skipped %d records (failures %v): its puts were not refused at the budget", st.Skipped, st.Failures)
	}
	t.Logf("skipped %d of 3000 records past a budget of %d bytes per task", st.Skipped, budget)
	if code, body := httpGet(t, p.base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz: %d %s (a budget is not a failure)", code, body)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	rd, err := OpenStateReadOnly(p.cfg.StateDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for part := int32(0); part < 2; part++ {
		held := 0
		if err := rd.Scan("filler", part, "counts", func(k, v []byte) error {
			held += len(k) + len(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if held > budget || held < budget/2 {
			t.Errorf("task %d holds %d bytes of keys and values, budget %d", part, held, budget)
		}
	}
}
