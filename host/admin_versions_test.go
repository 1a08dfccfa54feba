package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// versionsDoc is the part of /v1/processors this file checks.
type versionsDoc struct {
	Processors []struct {
		Name   string `json:"name"`
		Plugin struct {
			Path    string `json:"path"`
			SHA256  string `json:"sha256"`
			Version string `json:"version"`
		} `json:"plugin"`
		ActiveVersion struct {
			ID     string `json:"id"`
			SHA256 string `json:"sha256"`
			Label  string `json:"label"`
		} `json:"active_version"`
		Tasks []struct {
			Task    string `json:"task"`
			Version string `json:"version"`
		} `json:"tasks"`
		Refused []struct {
			ID     string    `json:"id"`
			SHA256 string    `json:"sha256"`
			Label  string    `json:"label"`
			Reason string    `json:"reason"`
			At     time.Time `json:"at"`
		} `json:"refused"`
		Counters struct {
			RecordsIn int64 `json:"records_in"`
			Refusals  int64 `json:"refusals"`
			Swaps     int64 `json:"swaps"`
		} `json:"counters"`
	} `json:"processors"`
}

func getVersionsDoc(t *testing.T, base string) versionsDoc {
	t.Helper()
	code, body := httpGet(t, base+"/v1/processors")
	if code != http.StatusOK {
		t.Fatalf("/v1/processors: %d %s", code, body)
	}
	var doc versionsDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/v1/processors: %v: %s", err, body)
	}
	if len(doc.Processors) != 1 {
		t.Fatalf("/v1/processors: %d processors, want 1: %s", len(doc.Processors), body)
	}
	return doc
}

// waitVersionsDoc polls /v1/processors until ok accepts it, calling
// between (if not nil) after each look that was not it.
func waitVersionsDoc(t *testing.T, base, what string, ok func(versionsDoc) bool, between func()) versionsDoc {
	t.Helper()
	var doc versionsDoc
	first := true
	testutil.Eventually(t, 60*time.Second, func() error {
		if !first && between != nil {
			between()
		}
		first = false
		if doc = getVersionsDoc(t, base); !ok(doc) {
			return fmt.Errorf("/v1/processors never showed %s: %+v", what, doc)
		}
		return nil
	})
	return doc
}

// The admin endpoint reports the plugin version of the processor and of
// each task, and a version from the control topic that cannot run: it is
// refused (listed with its reason, counted), and the running version stays
// and keeps processing. Two kinds of bad version: a manifest record that is
// not JSON, and a well-formed manifest whose module chunk was never written.
// A good version deployed after them is then reported on every task.
func TestAdminPluginVersions(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	p.cfg.Admin.Listen = "127.0.0.1:0"
	h, stop := p.run(t)
	base := "http://" + h.AdminAddr()

	wasm, err := os.ReadFile(p.cfg.Processors[0].Plugin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	hash := hex.EncodeToString(sum[:])
	id := "config@" + hash[:12] // the wasmstream-version of the config's plugin

	// Before any deploy: the config's plugin, on every task once assigned.
	doc := waitVersionsDoc(t, base, "3 tasks", func(d versionsDoc) bool { return len(d.Processors[0].Tasks) == 3 }, nil)
	pr := doc.Processors[0]
	if pr.ActiveVersion.ID != id || pr.ActiveVersion.SHA256 != hash || pr.ActiveVersion.Label != "config" {
		t.Errorf("active_version %+v, want {%s %s config}", pr.ActiveVersion, id, hash)
	}
	if pr.Plugin.SHA256 != hash || pr.Plugin.Version != id || pr.Plugin.Path != p.cfg.Processors[0].Plugin {
		t.Errorf("plugin %+v", pr.Plugin)
	}
	for i, task := range pr.Tasks {
		if want := "proc/" + p.in + "/" + strconv.Itoa(i); task.Task != want || task.Version != id {
			t.Errorf("task %d: %+v, want {%s %s}", i, task, want, id)
		}
	}
	if len(pr.Refused) != 0 || pr.Counters.Refusals != 0 {
		t.Errorf("refusals before any deploy: %+v, %d", pr.Refused, pr.Counters.Refusals)
	}

	// Two bad versions, written as a broken deploy tool or a torn write
	// would: raw records, not through control.Publisher.
	ghost := strings.Repeat("ab", 32)
	manifest, err := json.Marshal(control.Manifest{
		Format: control.Format, Processor: "proc",
		Version:    control.Version{Hash: ghost, Size: 100, Chunks: 1, Label: "ghost"},
		DeployedBy: "test", DeployedAt: time.Now().UTC(), Reason: control.ReasonDeploy,
		History: []control.Version{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl := control.TopicName(p.cfg.AppID)
	cl := p.b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: ctl, Key: []byte("processor/proc"), Value: []byte(`{"format": 1, "processor": `)},
		&kgo.Record{Topic: ctl, Key: []byte("processor/proc"), Value: manifest},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	doc = waitVersionsDoc(t, base, "2 refusals", func(d versionsDoc) bool { return len(d.Processors[0].Refused) == 2 }, nil)
	pr = doc.Processors[0]
	unreadable, missing := pr.Refused[0], pr.Refused[1]
	if unreadable.ID != "(unreadable)" || unreadable.SHA256 != "" || !strings.Contains(unreadable.Reason, "corrupt") {
		t.Errorf("refusal of the manifest that is not JSON: %+v", unreadable)
	}
	if missing.ID != "ghost@"+ghost[:12] || missing.SHA256 != ghost || missing.Label != "ghost" ||
		!strings.Contains(missing.Reason, "chunks missing") {
		t.Errorf("refusal of the manifest whose chunk is missing: %+v", missing)
	}
	for _, r := range pr.Refused {
		if time.Since(r.At) > time.Minute || r.At.After(time.Now()) {
			t.Errorf("refusal time %v is not now", r.At)
		}
	}
	if pr.Counters.Refusals != 2 {
		t.Errorf("counters.refusals %d, want 2", pr.Counters.Refusals)
	}
	if pr.ActiveVersion.ID != id || pr.Plugin.SHA256 != hash || len(pr.Tasks) != 3 {
		t.Errorf("after the refusals: active %+v, plugin %+v, tasks %+v; want %s kept", pr.ActiveVersion, pr.Plugin, pr.Tasks, id)
	}
	for _, task := range pr.Tasks {
		if task.Version != id {
			t.Errorf("task %s runs %s after the refusals, want %s", task.Task, task.Version, id)
		}
	}

	// The running version keeps processing.
	p.produce(t, "a", "b", "c", "d")
	p.waitProcessed(t)

	// The runner records a commit point's duration after the commit
	// returns, which is after the broker shows the committed offsets that
	// waitProcessed waits for: wait for the sample too.
	var metrics string
	testutil.Eventually(t, 30*time.Second, func() error {
		_, metrics = httpGet(t, base+"/metrics")
		if n := metricValue(t, metrics, "wasmstream_commit_seconds_count"); n < 1 {
			return fmt.Errorf("wasmstream_commit_seconds_count %v after records were committed", n)
		}
		return nil
	})
	for _, want := range []string{
		`wasmstream_plugin_info{processor="proc",sha256="` + hash + `",abi_version="1",version="` + id + `"} 1`,
		`wasmstream_tasks{processor="proc",version="` + id + `"} 3`,
		`wasmstream_plugin_refusals_total{processor="proc"} 2`,
		`wasmstream_plugin_swaps_total{processor="proc"} 0`,
		`wasmstream_plugin_swap_failures_total{processor="proc"} 0`,
		`wasmstream_plugin_rollbacks_total{processor="proc"} 0`,
		`wasmstream_records_in_total{processor="proc"} 4`,
		"# TYPE wasmstream_commit_seconds histogram",
	} {
		if !hasMetricLine(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if n := metricValue(t, metrics, "wasmstream_commit_seconds_count"); n < 1 {
		t.Errorf("wasmstream_commit_seconds_count %v after records were committed", n)
	} else if inf := metricValue(t, metrics, `wasmstream_commit_seconds_bucket{le="+Inf"}`); inf != n {
		t.Errorf("wasmstream_commit_seconds: +Inf bucket %v, count %v", inf, n)
	}
	helps := map[string]int{}
	for _, l := range strings.Split(metrics, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "#" && f[1] == "HELP" {
			helps[f[2]]++
		}
	}
	for name, n := range helps {
		if n != 1 {
			t.Errorf("family %s has %d HELP lines", name, n)
		}
	}

	// A good version after the bad ones swaps in: the same plugin with a
	// custom section appended (another hash, the same behaviour).
	v2wasm := append(append([]byte{}, wasm...), 0x00, 0x04, 0x02, 'v', '2', 0x01) // section 0, size 4, name "v2", payload 0x01
	pub, err := control.NewPublisher(control.Config{Kafka: kclient.Config{Brokers: p.b.Addrs()}, Topic: ctl})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	m, err := pub.Deploy(ctx, "proc", v2wasm, "v2", "test")
	if err != nil {
		t.Fatal(err)
	}
	v2 := "v2@" + m.Hash[:12]
	// Records keep flowing on every partition while waiting, so every
	// task reaches commit points: this test is about what the endpoint
	// reports, not about when an idle task switches.
	doc = waitVersionsDoc(t, base, "every task on "+v2, func(d versionsDoc) bool {
		pr := d.Processors[0]
		all := pr.ActiveVersion.ID == v2 && len(pr.Tasks) == 3
		for _, task := range pr.Tasks {
			all = all && task.Version == v2
		}
		return all
	}, func() {
		for part := range int32(3) {
			p.b.ProduceTo(t, part, &kgo.Record{Topic: p.in, Key: []byte("k"), Value: []byte("v")})
		}
	})
	pr = doc.Processors[0]
	if pr.ActiveVersion.SHA256 != m.Hash || pr.ActiveVersion.Label != "v2" ||
		pr.Plugin.SHA256 != m.Hash || pr.Plugin.Version != v2 || pr.Plugin.Path != "" {
		t.Errorf("after the swap: active_version %+v, plugin %+v", pr.ActiveVersion, pr.Plugin)
	}
	if len(pr.Refused) != 2 || pr.Counters.Refusals != 2 || pr.Counters.Swaps != 3 {
		t.Errorf("after the swap: %d refused, counters %+v; want 2 refusals and 3 task swaps", len(pr.Refused), pr.Counters)
	}
	code, body := httpGet(t, base+"/v1/processors")
	if code != http.StatusOK || !strings.Contains(body, `"size": `+strconv.Itoa(len(v2wasm))+",") {
		t.Errorf("plugin.size is not the swapped-in module's %d bytes: %s", len(v2wasm), body)
	}
	_, metrics = httpGet(t, base+"/metrics")
	for _, want := range []string{
		`wasmstream_plugin_info{processor="proc",sha256="` + m.Hash + `",abi_version="1",version="` + v2 + `"} 1`,
		`wasmstream_tasks{processor="proc",version="` + v2 + `"} 3`,
		`wasmstream_plugin_swaps_total{processor="proc"} 3`,
		`wasmstream_plugin_refusals_total{processor="proc"} 2`,
	} {
		if !hasMetricLine(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if strings.Contains(metrics, `version="`+id+`"`) {
		t.Errorf("the replaced version %s is still reported:\n%s", id, metrics)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func hasMetricLine(body, line string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// metricValue returns the value of the unlabeled sample name.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in:\n%s", name, body)
	return 0
}
