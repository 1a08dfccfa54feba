package admin

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// fullExposition is /metrics with every built-in family present (every
// optional part of the snapshot filled in) and the runtime families.
func fullExposition(t *testing.T) string {
	t.Helper()
	src := newFake()
	src.snap.Processors[0].Lifecycle = &Lifecycle{Swaps: 1, SwapFailures: 1, Rollbacks: 1, Refusals: 1,
		Tasks: []TaskVersion{{Task: "nl-orders/orders/0", Version: "v2@ab12"}}}
	src.snap.StateOpen = &StateCounts{Tasks: 1}
	src.snap.CommitLatency = &Histogram{Bounds: []float64{0.01, 0.1}, Counts: []uint64{3, 2, 1}, Sum: 0.2}
	src.snap.Lag = []PartitionLag{{Processor: "nl-orders", Topic: "orders", Partition: 0, Lag: 3}}
	src.snap.Standbys = []PartitionLag{{Processor: "nl-orders", Topic: "orders", Partition: 1, Lag: 0}}
	src.snap.Times = []TaskTime{{Processor: "nl-orders", Topic: "orders", Partition: 0, PendingTimers: 2, StreamTime: 1_700_000_000_000}}
	src.procs[0].Plugin.Version = "v2@ab12"
	src.snap.State = []StateDB{{Database: "nl-orders", Failed: "state: no space", Failures: map[string]int64{"no_space": 1}}}
	var buf bytes.Buffer
	writeText(&buf, buildFamilies(src.Metrics(), src.Processors(), func(name, reason string) { t.Errorf("family %s: %s", name, reason) }))
	if err := writeRuntime(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// exposedTypes maps each family name in an exposition to its type.
func exposedTypes(text string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(text, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestMetricsLint runs promlint — the checks `promtool check metrics`
// runs — over the whole exposition: names, units, _total on counters and
// only there, help text. When promtool itself is installed it checks the
// exposition too. Latencies are histograms, never summaries (a summary's
// quantiles cannot be aggregated across processes); the Go collector's
// go_gc_duration_seconds is the runtime's own.
func TestMetricsLint(t *testing.T) {
	text := fullExposition(t)
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for name, typ := range exposedTypes(text) {
		if typ == "summary" && name != "go_gc_duration_seconds" {
			t.Errorf("%s is a summary; latencies are histograms", name)
		}
	}
	for _, want := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if _, ok := exposedTypes(text)[want]; !ok {
			t.Errorf("runtime metric %s missing", want)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
		t.Logf("promtool check metrics: clean")
	} else {
		t.Logf("promtool not installed; promlint (the same checks, as a library) ran")
	}
}

// TestMetricReference: docs/metrics.md documents every wasmstream_ family
// the endpoint can expose, with its type, and nothing it does not expose.
func TestMetricReference(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	exposed := exposedTypes(fullExposition(t))
	rows := map[string]string{} // name -> type, from the doc's table rows
	for _, m := range regexp.MustCompile("(?m)^\\| `(wasmstream_[a-z_]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = m[2]
	}
	for name, typ := range exposed {
		if !strings.HasPrefix(name, "wasmstream_") {
			continue
		}
		if rows[name] != typ {
			t.Errorf("docs/metrics.md: %s should have a row with type %s (has %q)", name, typ, rows[name])
		}
	}
	for name := range rows {
		if _, ok := exposed[name]; !ok {
			t.Errorf("docs/metrics.md documents %s, which the endpoint does not expose", name)
		}
	}
}

// TestGrafanaDashboard: every metric a panel of the dashboard queries is
// one the endpoint exposes (a histogram's _bucket/_sum/_count series
// included), and every panel has a query.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "grafana", "wasmstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	exposed := exposedTypes(fullExposition(t))
	series := map[string]bool{}
	for name, typ := range exposed {
		series[name] = true
		if typ == "histogram" || typ == "summary" {
			series[name+"_bucket"], series[name+"_sum"], series[name+"_count"] = true, true, true
		}
	}
	metricRE := regexp.MustCompile(`\b(wasmstream_[a-z_]+|go_[a-z_]+|process_[a-z_]+)\b`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricRE.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no wasmstream, go or process metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !series[n] {
					t.Errorf("panel %q queries %s, which the host does not expose", p.Title, n)
				}
			}
		}
	}
	// The dashboard shows the latencies and the health a operator acts on.
	for _, want := range []string{"wasmstream_record_processing_seconds_bucket", "wasmstream_commit_seconds_bucket", "wasmstream_consumer_lag_records", "wasmstream_record_failures_total", "wasmstream_restoring_tasks"} {
		if !used[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
	keys := make([]string, 0, len(used))
	for k := range used {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t.Logf("%d panels query %d series: %s", len(dash.Panels), len(keys), strings.Join(keys, " "))
}
