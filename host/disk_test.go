package host

import (
	"context"
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

// A full disk under one processor's store (issue 29, item 2): the disk
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
		Runtime: RuntimeConfig{CacheDir: "off"},
	}
	disk := diskfault.OnDisk()
	h, err := New(context.Background(), cfg, WithLogger(testLogger(t)), func(o *options) {
		o.stateOptions = func(processor string, so *state.Options) {
			if processor == "filler" {
				so.FS, so.WriteTimeout = disk, 5*time.Second
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	defer stop()
	base := "http://" + h.AdminAddr()

	produced := map[string]int{} // the filler's records by key
	round := 0
	produce := func(topic string, n int) {
		var recs []*kgo.Record
		for i := range n {
			k := fmt.Sprintf("k%d", (round*n+i)%7)
			if topic == fin {
				produced[k]++
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
		}
		round++
		b.Produce(t, recs...)
	}
	adm := b.Admin(t)
	// behind is how many records of topic the app has not committed.
	behind := func(topic string) (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, err
		}
		committed, err := adm.FetchOffsets(ctx, cfg.AppID)
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
	caughtUp := func(topic string) func() error {
		return func() error {
			n, err := behind(topic)
			if err == nil && n > 0 {
				err = fmt.Errorf("%s: %d records not committed", topic, n)
			}
			return err
		}
	}

	produce(fin, 20)
	produce(hin, 20)
	testutil.Eventually(t, 60*time.Second, caughtUp(fin))
	testutil.Eventually(t, 60*time.Second, caughtUp(hin))
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz before the fault: %d %s", code, body)
	}

	disk.Fail(syscall.ENOSPC)
	produce(fin, 20)
	dir := cfg.ProcessorStateDir("filler")
	var reason string
	testutil.Eventually(t, 60*time.Second, func() error {
		var code int
		if code, reason = httpGet(t, base+"/readyz"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d %q with the filler's disk full", code, reason)
		}
		return nil
	})
	t.Logf("readyz: %s", reason)
	for _, want := range []string{"filler", dir, "no space left on the device"} {
		if !strings.Contains(reason, want) {
			t.Errorf("readyz says %q, which does not name %q", reason, want)
		}
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{`wasmstream_state_write_failures_total{database="filler",cause="no_space"} 1`,
		`wasmstream_state_failed{database="filler"} 1`, `wasmstream_state_failed{database="healthy"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The healthy processor keeps committing while the filler is down
	// (three rounds, each committed in full), and the filler skipped none
	// of its records.
	for range 3 {
		produce(hin, 20)
		testutil.Eventually(t, 60*time.Second, caughtUp(hin))
	}
	if code, _ := httpGet(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatal("the filler's database recovered on a disk that still refuses writes")
	}
	if n, err := behind(fin); err != nil || n == 0 {
		t.Fatalf("the filler committed all its input on a full disk (behind %d, %v): records were skipped or lost", n, err)
	}
	if st, _ := h.Stats("filler"); st.Skipped != 0 {
		t.Fatalf("the filler skipped %d records for a full disk", st.Skipped)
	}

	disk.Clear()
	produce(fin, 20)
	testutil.Eventually(t, 120*time.Second, caughtUp(fin))
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("readyz %d %s after the disk was freed", code, body)
		}
		return nil
	})
	if st, _ := h.Stats("filler"); st.Skipped != 0 {
		t.Fatalf("the filler skipped %d records", st.Skipped)
	}
	stop()

	// The filler's store is what its changelog says, and both are the
	// counts of what was produced.
	changelog := map[string]uint64{}
	for _, r := range b.ReadCommitted(t, cfg.ChangelogTopic("counts"), 30*time.Second) {
		changelog[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
	}
	rd, err := OpenStateReadOnly(cfg.StateDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	stored := map[string]uint64{}
	for p := int32(0); p < 2; p++ {
		err := rd.Scan("filler", p, "counts", func(k, v []byte) error {
			if len(v) != 8 {
				return errors.New("a count of " + fmt.Sprint(len(v)) + " bytes")
			}
			stored[string(k)] = binary.LittleEndian.Uint64(v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, n := range produced {
		if stored[k] != uint64(n) || changelog[k] != uint64(n) {
			t.Errorf("key %s: %d records, the store counts %d, the changelog %d", k, n, stored[k], changelog[k])
		}
	}
	if len(stored) != len(produced) {
		t.Errorf("the store holds %d keys, %d were produced", len(stored), len(produced))
	}
}
