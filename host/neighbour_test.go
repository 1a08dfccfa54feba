package host

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// Timer work and page faults beside a healthy processor:
// a processing-time timer flood (engine/testdata/timerflood.wat: 5,000
// timers due at once per record, on 8 partitions) and an instance burst
// (memburst.wat: 32 tasks, each instance touching its whole 64 MiB when
// its record comes, all records produced at once). Round after round, the
// healthy passthrough processor beside it commits everything produced to
// it, fails and aborts nothing, and the hostile processor finishes its
// work too without the host stopping: the timer flood within its limits,
// the burst within runtime.memory_budget (its instances' memory is in the
// account: the records of the tasks it has no room for fail, and the
// process grows by at most the account's peak plus a fixed overhead). Conditions, not times: each round
// waits for its records to be committed; the latency of each round
// against rounds measured alone in the same test is logged, not asserted.
func TestNeighbourFloods(t *testing.T) {
	for _, c := range []struct {
		name, plugin   string
		parts, perPart int
		stores         []string
	}{
		{"timer-flood", "timerflood", 8, 4, []string{"s"}},
		{"instance-burst", "memburst", 32, 2, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testutil.Race {
				// The race detector makes every Go call of the flood's
				// ten times slower and the burst's 2 GiB of touched
				// memory 8 GiB of RSS: a quarter of the timers, and
				// the burst only without it (make test-real).
				if c.stores == nil {
					t.Skip("32 x 64 MiB touched at once is 8 GiB of RSS under the race detector; make test-real runs it without")
				}
				c.parts, c.perPart = 4, 1
			}
			testNeighbourFlood(t, c.plugin, c.parts, c.perPart, c.stores)
		})
	}
}

func testNeighbourFlood(t *testing.T, plugin string, parts, perPart int, stores []string) {
	b := testbroker.New(t)
	fin, fout, gin, gout := b.Name(t, "flood-in"), b.Name(t, "flood-out"), b.Name(t, "steady-in"), b.Name(t, "steady-out")
	b.CreateTopic(t, fin, parts, nil)
	b.CreateTopic(t, fout, 1, nil)
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{
			{Name: "flood", Plugin: engineTestdata(plugin), Inputs: []string{fin}, Outputs: map[string]OutputConfig{"out": {Topic: fout}},
				Stores: stores, OnError: OnErrorSkip, Limits: Limits{RecordTimeout: 3 * time.Second}},
			{Name: "steady", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]OutputConfig{"out": {Topic: gout}},
				OnError: OnErrorFail},
		},
		Admin:   AdminConfig{Listen: "127.0.0.1:0"},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p := &pipeline{b: b, in: gin, out: gout, cfg: cfg}
	rssBefore := vmRSS(t)
	h, stop := p.run(t)
	admin := "http://" + h.AdminAddr()
	// timerMetric sums a timer metric of the flood processor.
	timerMetric := func(name string) int64 {
		_, m := httpGet(t, admin+"/metrics")
		var n int64
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, name+"{") && strings.Contains(l, `processor="flood"`) {
				if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
					n += int64(v)
				}
			}
		}
		return n
	}
	produced := 0
	round := func() time.Duration {
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: gin, Key: []byte(fmt.Sprintf("r%d", produced+i)), Value: []byte("v")})
		}
		produced += len(recs)
		start := time.Now()
		b.Produce(t, recs...)
		p.waitProcessed(t)
		return time.Since(start)
	}
	var alone []time.Duration
	for range 3 {
		alone = append(alone, round())
	}

	// The flood: every partition of its input gets its records at once.
	for part := range int32(parts) {
		var recs []*kgo.Record
		for i := range perPart {
			recs = append(recs, &kgo.Record{Topic: fin, Key: []byte("f"), Value: []byte(strconv.Itoa(i))})
		}
		b.ProduceTo(t, part, recs...)
	}
	fl := &diskPair{t: t, b: b, cfg: cfg}
	floodBusy := func() bool {
		n, err := fl.behind(fin)
		return err != nil || n > 0 || (stores != nil && timerMetric("wasmstream_timers_pending") > 0)
	}
	var during, after []time.Duration
	for len(after) < 3 {
		busy := floodBusy()
		d := round()
		if busy && floodBusy() {
			during = append(during, d) // the flood was under way for the whole round
		} else if !busy {
			after = append(after, d)
		}
		if len(during)+len(after) > 3000 {
			t.Fatalf("the flood processor had not finished after %d healthy rounds (behind or timers pending)", len(during)+len(after))
		}
	}
	rssAfter := vmRSS(t)
	flood, _ := h.Stats("flood")
	steady, _ := h.Stats("steady")
	firings := timerMetric("wasmstream_timer_firings_total")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}
	t.Logf("healthy round (10 records produced to committed): alone median %s max %s; during the flood median %s max %s over %d rounds; after median %s",
		median(alone), slices.Max(alone), median(during), slices.Max(append(during, 0)), len(during), median(after))
	t.Logf("flood: %d records in, %d skipped, failures %v, %d commits, %d aborts, %d timer firings; RSS %d -> %d MiB",
		flood.RecordsIn, flood.Skipped, flood.Failures, flood.Commits, flood.Aborts, firings, rssBefore>>20, rssAfter>>20)
	if len(during) == 0 {
		t.Errorf("no healthy round was committed while the flood was under way: the test measured nothing")
	}
	if got := len(b.ReadCommitted(t, gout, 30*time.Second)); got != produced {
		t.Errorf("the healthy processor's output holds %d records, %d were produced", got, produced)
	}
	if steady.Aborts != 0 || steady.Skipped != 0 || steady.FailedTasks != 0 {
		t.Errorf("the healthy processor aborted %d transactions, skipped %d records, failed %d tasks beside the flood", steady.Aborts, steady.Skipped, steady.FailedTasks)
	}
	if flood.Aborts != 0 {
		t.Errorf("the flood processor aborted %d transactions", flood.Aborts)
	}
	if plugin != "memburst" {
		if flood.Skipped != 0 {
			t.Errorf("the flood processor skipped %d records (failures %v): its work is within its limits", flood.Skipped, flood.Failures)
		}
	} else {
		// 32 instances of 64 MiB do not fit in what the default budget
		// (1 GiB) leaves the instances (896 MiB), and past what the
		// steady processor's share leaves, the burst's tasks start no
		// more instances: those tasks' records fail, memory_limit, and
		// nothing else does. The process grows by at most what the
		// account held at its peak plus a fixed overhead (the compiled
		// modules, the clients and the embedded broker, the Go
		// runtime's own): 256 MiB, where the burst alone grew it by
		// 2.1 GB before instances' memory was in the account.
		const overhead = 256 << 20
		pool := h.memory
		t.Logf("account: peak %d MiB (budget %d MiB, instances' room %d MiB)", pool.Peak()>>20, pool.Budget()>>20, pool.InstanceRoom()>>20)
		if pool.Peak() > pool.Budget() || pool.Memory() > pool.InstanceRoom() {
			t.Errorf("the account held %d bytes at its peak, %d of instances, past the budget %d or the room %d", pool.Peak(), pool.Memory(), pool.Budget(), pool.InstanceRoom())
		}
		if ml := flood.Failures["memory_limit"]; ml != flood.Skipped || len(flood.Failures) > 1 {
			t.Errorf("the burst skipped %d records, failures %v: want only memory_limit, for the instances the budget had no room for", flood.Skipped, flood.Failures)
		}
		if flood.Skipped >= int64(parts*perPart) {
			t.Errorf("every record of the burst failed (%d): no instance started", flood.Skipped)
		}
		if grew := rssAfter - rssBefore; grew > pool.Peak()+overhead {
			t.Errorf("the process grew by %d MiB, past the account's peak (%d MiB) plus %d MiB", grew>>20, pool.Peak()>>20, overhead>>20)
		}
		if pool.Used() != 0 {
			t.Errorf("the account holds %d bytes (%d of instances) after the host stopped", pool.Used(), pool.Memory())
		}
	}
	if stores != nil && firings < int64(parts*perPart*5000) {
		t.Errorf("%d timer firings, want the %d timers set", firings, parts*perPart*5000)
	}
}

// median is the middle of ds (0 if none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
