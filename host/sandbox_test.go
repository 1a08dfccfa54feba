package host

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// The sandbox through the whole host (issue 11): one hostile module
// (host/internal/engine/testdata/hostile.wasm, an attack per record key:
// tables, deep and fat recursion, emit and state floods, an emit its
// output cannot take, log and stdout floods, a loop over table.fill) runs
// next to a healthy processor in one process, on the test broker. Every
// attack fails only its own record, through on_error with its kind named;
// the healthy processor processes everything; no transaction aborts; the
// host does not stop; and the process's memory grows within the documented
// bound (abi/ABI.md section 7: about 160 MiB per instance with default
// limits), far from what the attacks took before (0.9 to 3.6 GB).
func TestHostileNeighbour(t *testing.T) {
	b := testbroker.New(t)
	hin, hout, gin, gout := b.Name(t, "hostile-in"), b.Name(t, "hostile-out"), b.Name(t, "healthy-in"), b.Name(t, "healthy-out")
	b.CreateTopic(t, hin, 1, nil)
	b.CreateTopic(t, hout, 1, map[string]string{"max.message.bytes": "2048"})
	b.CreateTopic(t, gin, 2, nil)
	b.CreateTopic(t, gout, 2, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second},
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{
			{Name: "hostile", Plugin: engineTestdata("hostile"), Inputs: []string{hin}, Outputs: map[string]string{"out": hout},
				Stores: []string{"s"}, OnError: OnErrorDeadLetter, Limits: Limits{RecordTimeout: time.Second}},
			{Name: "healthy", Plugin: engineTestdata("passthrough"), Inputs: []string{gin}, Outputs: map[string]string{"out": gout},
				OnError: OnErrorFail, Limits: Limits{RecordTimeout: time.Second}},
		},
		Runtime: RuntimeConfig{CacheDir: "off"},
	}
	p := &pipeline{b: b, in: hin, out: hout, cfg: cfg}
	rssBefore := vmRSS(t)
	h, stop := p.run(t)

	big := strings.Repeat("v", 512<<10)
	attacks := []struct{ key, value, kind string }{
		{"tgro", "", ""}, // table.grow over the cap is refused (-1); the record succeeds
		{"tfil", "", runner.FailureTimeout.String()},
		{"deep", "", runner.FailureStackLimit.String()},
		{"dep1", "", ""}, // recursion within the stack limit
		{"fat!", "", runner.FailureStackLimit.String()},
		{"emit", big, runner.FailureLimitExceeded.String()},
		{"ecnt", "v", runner.FailureLimitExceeded.String()},
		{"stat", big, runner.FailureLimitExceeded.String()},
		{"logs", "", ""}, // rate-limited, the rest counted as dropped
		{"outs", "", ""},
		{"big1", strings.Repeat("v", 4000), runner.FailureLimitExceeded.String()}, // over hostile-out's 2048 bytes
	}
	var recs []*kgo.Record
	for _, a := range attacks {
		recs = append(recs, &kgo.Record{Topic: hin, Key: []byte(a.key), Value: []byte(a.value)})
	}
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: gin, Key: []byte("g" + strconv.Itoa(i)), Value: []byte("ok")})
	}
	b.Produce(t, recs...)
	p.waitProcessed(t)
	(&pipeline{b: b, in: gin, cfg: cfg}).waitProcessed(t)
	rssAfter := vmRSS(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v (nothing a plugin does may stop the host)", err)
	}

	if got := len(b.ReadCommitted(t, gout, 30*time.Second)); got != 100 {
		t.Errorf("the healthy processor's output holds %d records, want 100", got)
	}
	dlq := b.ReadCommitted(t, cfg.DeadLetterTopic(&cfg.Processors[0]), 30*time.Second)
	kinds := map[string]string{}
	for _, r := range dlq {
		for _, hd := range r.Headers {
			if hd.Key == runner.HeaderErrorKind {
				kinds[string(r.Key)] = string(hd.Value)
			}
		}
	}
	for _, a := range attacks {
		if kinds[a.key] != a.kind {
			t.Errorf("attack %s: dead-lettered with kind %q, want %q", a.key, kinds[a.key], a.kind)
		}
	}
	if len(dlq) != len(kinds) {
		t.Errorf("%d dead letters for %d keys", len(dlq), len(kinds))
	}
	for _, proc := range []string{"hostile", "healthy"} {
		if st, _ := h.Stats(proc); st.Aborts != 0 {
			t.Errorf("%s: %d transactions aborted", proc, st.Aborts)
		}
	}
	// Loose: one hostile instance at a time plus the healthy ones, against
	// a documented bound of ~160 MiB per instance with default limits.
	if grew := rssAfter - rssBefore; grew > 768<<20 {
		t.Errorf("the process grew by %d MiB during the attacks", grew>>20)
	}
	t.Logf("RSS %d MiB -> %d MiB during the attacks", rssBefore>>20, rssAfter>>20)
}

// vmRSS is this process's resident set, in bytes (Linux).
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
