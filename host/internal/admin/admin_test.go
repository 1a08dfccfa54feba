package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/shadow"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// fakeSource is a Source whose answers the test sets.
type fakeSource struct {
	mu          sync.Mutex
	healthy     bool
	healthWhy   string
	ready       bool
	readyWhy    string
	procs       []ProcessorInfo
	snap        Snapshot
	metricCalls int
	// shadows are the processors' shadow runs, samples their samples.
	shadows map[string]shadow.Status
	samples map[string][]shadow.Sample
}

func (f *fakeSource) Shadow(processor string) (shadow.Status, []shadow.Sample, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.shadows[processor]
	return st, f.samples[processor], ok
}

func (f *fakeSource) Health() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthy, f.healthWhy
}

func (f *fakeSource) Ready() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready, f.readyWhy
}

func (f *fakeSource) Processors() []ProcessorInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs
}

func (f *fakeSource) Metrics() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metricCalls++
	return f.snap
}

func (f *fakeSource) set(fn func(f *fakeSource)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// latencyBounds are the runner's bounds, in seconds.
var latencyBounds = []float64{1e-6, 5e-6, 25e-6, 100e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3, 1}

func newFake() *fakeSource {
	return &fakeSource{
		healthy: true,
		ready:   true,
		procs: []ProcessorInfo{{
			Name:    "nl-orders",
			Inputs:  []string{"orders"},
			Outputs: map[string]string{"out": "orders-nl"},
			OnError: "dead_letter",
			Plugin:  PluginInfo{Path: "/plugins/filter.wasm", SHA256: "ab12", Size: 1234, ABIVersion: 1},
		}, {
			Name:    "counts",
			Inputs:  []string{"words"},
			Outputs: map[string]string{"counts": "word-counts", "alerts": "word-alerts"},
			Stores:  []string{"counts"},
			OnError: "fail",
			Plugin:  PluginInfo{Path: "/plugins/wordcount.wasm", SHA256: "cd34", Size: 99, ABIVersion: 1},
		}},
		snap: Snapshot{
			Processors: []ProcessorMetrics{{
				Name: "nl-orders", RecordsIn: 100, RecordsOut: 40, Skipped: 0, DeadLettered: 2,
				Commits: 7, Aborts: 1,
				Failures: map[string]int64{"trap": 1, "timeout": 1},
				Latency: Histogram{
					Bounds: latencyBounds,
					Counts: []uint64{0, 10, 50, 30, 5, 3, 1, 0, 0, 0, 1},
					Sum:    2.5,
				},
			}, {
				Name: "counts", RecordsIn: 5, RecordsOut: 5, FailedTasks: 1, Commits: 3,
				Latency: Histogram{Bounds: latencyBounds, Counts: make([]uint64, len(latencyBounds)+1)},
			}},
			RestoringTasks: 1,
			Restores: []RestoreProgress{
				{Task: "counts/words/0", Store: "counts", Topic: "app-counts-changelog", Target: 500, Position: 500, Restored: 480, Rate: 1200.5, Done: true},
				{Task: "counts/words/1", Store: "counts", Topic: "app-counts-changelog", Target: 900, Position: 300, Restored: 300, Wipes: 1},
			},
		},
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, src Source) *Server {
	t.Helper()
	s, err := New("127.0.0.1:0", src, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

var client = &http.Client{Timeout: 5 * time.Second}

func do(t *testing.T, s *Server, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func get(t *testing.T, s *Server, path string) (*http.Response, string) {
	t.Helper()
	return do(t, s, http.MethodGet, path)
}

func expect(t *testing.T, resp *http.Response, body string, code int, ctype, wantBody string) {
	t.Helper()
	if resp.StatusCode != code {
		t.Errorf("%s: status %d, want %d (body %q)", resp.Request.URL.Path, resp.StatusCode, code, body)
	}
	if got := resp.Header.Get("Content-Type"); got != ctype {
		t.Errorf("%s: Content-Type %q, want %q", resp.Request.URL.Path, got, ctype)
	}
	if wantBody != "" && body != wantBody {
		t.Errorf("%s: body %q, want %q", resp.Request.URL.Path, body, wantBody)
	}
}

const textPlain = "text/plain; charset=utf-8"

func TestHealthz(t *testing.T) {
	src := newFake()
	s := start(t, src)

	resp, body := get(t, s, "/healthz")
	expect(t, resp, body, 200, textPlain, "ok\n")
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}

	src.set(func(f *fakeSource) {
		f.healthy, f.healthWhy = false, "processor counts: 1 task stopped by on_error: fail"
	})
	resp, body = get(t, s, "/healthz")
	expect(t, resp, body, 503, textPlain, "processor counts: 1 task stopped by on_error: fail\n")

	src.set(func(f *fakeSource) { f.healthWhy = "" })
	resp, body = get(t, s, "/healthz")
	expect(t, resp, body, 503, textPlain, "unavailable\n")
}

func TestReadyz(t *testing.T) {
	src := newFake()
	src.ready, src.readyWhy = false, RestoringReason(3)
	s := start(t, src)

	resp, body := get(t, s, "/readyz")
	expect(t, resp, body, 503, textPlain, "restoring 3 tasks\n")

	src.set(func(f *fakeSource) { f.ready, f.readyWhy = true, "" })
	resp, body = get(t, s, "/readyz")
	expect(t, resp, body, 200, textPlain, "ok\n")
}

func TestMetrics(t *testing.T) {
	src := newFake()
	s := start(t, src)
	resp, body := get(t, s, "/metrics")
	expect(t, resp, body, 200, "text/plain; version=0.0.4; charset=utf-8", "")

	for _, line := range []string{
		"# HELP wasmstream_records_in_total Records handed to the processor's plugin.",
		"# TYPE wasmstream_records_in_total counter",
		`wasmstream_records_in_total{processor="nl-orders"} 100`,
		`wasmstream_records_in_total{processor="counts"} 5`,
		`wasmstream_records_out_total{processor="nl-orders"} 40`,
		`wasmstream_records_skipped_total{processor="nl-orders"} 0`,
		`wasmstream_records_dead_lettered_total{processor="nl-orders"} 2`,
		`wasmstream_record_failures_total{processor="nl-orders",kind="timeout"} 1`,
		`wasmstream_record_failures_total{processor="nl-orders",kind="trap"} 1`,
		`wasmstream_tasks_failed_total{processor="counts"} 1`,
		`wasmstream_commits_total{processor="nl-orders"} 7`,
		`wasmstream_transaction_aborts_total{processor="nl-orders"} 1`,
		"# TYPE wasmstream_record_processing_seconds histogram",
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="1e-06"} 0`,
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="5e-06"} 10`,
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="2.5e-05"} 60`,
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="0.0001"} 90`,
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="1"} 99`,
		`wasmstream_record_processing_seconds_bucket{processor="nl-orders",le="+Inf"} 100`,
		`wasmstream_record_processing_seconds_sum{processor="nl-orders"} 2.5`,
		`wasmstream_record_processing_seconds_count{processor="nl-orders"} 100`,
		`wasmstream_record_processing_seconds_count{processor="counts"} 0`,
		`wasmstream_plugin_info{processor="nl-orders",sha256="ab12",abi_version="1"} 1`,
		"# TYPE wasmstream_restoring_tasks gauge",
		"wasmstream_restoring_tasks 1",
		`wasmstream_restore_records{task="counts/words/0",store="counts"} 480`,
		`wasmstream_restore_target_offset{task="counts/words/1",store="counts"} 900`,
		`wasmstream_restore_position_offset{task="counts/words/1",store="counts"} 300`,
		`wasmstream_restore_records_per_second{task="counts/words/0",store="counts"} 1200.5`,
		`wasmstream_restore_wipes{task="counts/words/1",store="counts"} 1`,
		`wasmstream_restore_done{task="counts/words/0",store="counts"} 1`,
		`wasmstream_restore_done{task="counts/words/1",store="counts"} 0`,
	} {
		if !hasLine(body, line) {
			t.Errorf("no line %q in:\n%s", line, body)
		}
	}
	// Not supplied: not written.
	for _, name := range []string{mSwaps, mSwapFailures, mRollbacks, mRefusals, mTasks, mCommitSeconds, mLag} {
		if strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("%s written though not supplied", name)
		}
	}
	checkExposition(t, body)
}

// TestMetricsLater covers the metrics the host supplies later: plugin
// version, swaps and rollbacks, consumer lag, and extra families.
func TestMetricsLater(t *testing.T) {
	src := newFake()
	src.procs[0].Plugin.Version = "v2"
	src.snap.Processors[0].Lifecycle = &Lifecycle{Swaps: 3, SwapFailures: 2, Rollbacks: 1, Refusals: 4,
		Tasks: []TaskVersion{{Task: "nl-orders/orders/0", Version: "v2"}, {Task: "nl-orders/orders/1", Version: `a "quoted" \ label@ab12`}}}
	src.snap.CommitLatency = &Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{2, 7, 0}, Sum: 0.03}
	src.snap.Lag = []PartitionLag{{Processor: "nl-orders", Topic: "orders", Partition: 2, Lag: 42}}
	src.snap.Extra = []Family{
		{Name: "wasmstream_example_total", Help: "An example.\nSecond line \\ done.", Type: Counter,
			Samples: []Sample{{Labels: []Label{{"processor", `a"b\c` + "\n"}}, Value: 9}}},
		{Name: "wasmstream_ratio", Type: Gauge, Samples: []Sample{{Value: 0.25}}},
		{Name: "bad name", Type: Gauge, Samples: []Sample{{Value: 1}}},
		{Name: mRecordsIn, Type: Counter, Samples: []Sample{{Value: 1}}},
		{Name: "wasmstream_bad_label", Type: Gauge, Samples: []Sample{{Labels: []Label{{"__x", "1"}}, Value: 1}}},
		{Name: "wasmstream_bad_type", Type: "histogram", Samples: []Sample{{Value: 1}}},
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	s, err := New("127.0.0.1:0", src, slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	_, body := get(t, s, "/metrics")
	for _, line := range []string{
		`wasmstream_plugin_info{processor="nl-orders",sha256="ab12",abi_version="1",version="v2"} 1`,
		`wasmstream_plugin_swaps_total{processor="nl-orders"} 3`,
		`wasmstream_plugin_swap_failures_total{processor="nl-orders"} 2`,
		`wasmstream_plugin_rollbacks_total{processor="nl-orders"} 1`,
		`wasmstream_plugin_refusals_total{processor="nl-orders"} 4`,
		`wasmstream_tasks{processor="nl-orders",version="a \"quoted\" \\ label@ab12"} 1`,
		`wasmstream_tasks{processor="nl-orders",version="v2"} 1`,
		"# TYPE wasmstream_commit_seconds histogram",
		`wasmstream_commit_seconds_bucket{le="0.001"} 2`,
		`wasmstream_commit_seconds_bucket{le="+Inf"} 9`,
		"wasmstream_commit_seconds_sum 0.03",
		"wasmstream_commit_seconds_count 9",
		`wasmstream_consumer_lag_records{processor="nl-orders",topic="orders",partition="2"} 42`,
		`# HELP wasmstream_example_total An example.\nSecond line \\ done.`,
		"# TYPE wasmstream_example_total counter",
		`wasmstream_example_total{processor="a\"b\\c\n"} 9`,
		"wasmstream_ratio 0.25",
	} {
		if !hasLine(body, line) {
			t.Errorf("no line %q in:\n%s", line, body)
		}
	}
	for _, bad := range []string{"bad name", "wasmstream_bad_label", "wasmstream_bad_type"} {
		if strings.Contains(body, bad) {
			t.Errorf("invalid family %q written", bad)
		}
	}
	if n := strings.Count(body, "# TYPE "+mRecordsIn+" "); n != 1 {
		t.Errorf("%s has %d TYPE lines, want 1", mRecordsIn, n)
	}
	// A second scrape logs nothing new.
	get(t, s, "/metrics")
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if n := strings.Count(out, "not exported"); n != 4 {
		t.Errorf("%d warnings about extra families, want 4 (once each):\n%s", n, out)
	}
	checkExposition(t, body)
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A histogram with the wrong number of counts is not written (the rest is).
func TestMetricsBadHistogram(t *testing.T) {
	src := newFake()
	src.snap.Processors[0].Latency.Counts = []uint64{1, 2}
	s := start(t, src)
	_, body := get(t, s, "/metrics")
	if strings.Contains(body, `wasmstream_record_processing_seconds_count{processor="nl-orders"}`) {
		t.Error("malformed histogram written")
	}
	if !hasLine(body, `wasmstream_record_processing_seconds_count{processor="counts"} 0`) {
		t.Error("well-formed histogram missing")
	}
}

func hasLine(body, line string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// checkExposition checks the text format's structure: every sample
// belongs to the family of the TYPE line before it, each family has
// HELP and TYPE once, and the body ends with a newline.
func checkExposition(t *testing.T, body string) {
	t.Helper()
	if !strings.HasSuffix(body, "\n") {
		t.Error("exposition does not end with a newline")
	}
	seen := map[string]bool{}
	current, typ := "", ""
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "# HELP "):
			name := strings.Fields(l)[2]
			if !metricNameRE.MatchString(name) {
				t.Errorf("invalid family name %q", name)
			}
			if seen[name] {
				t.Errorf("family %s twice", name)
			}
			seen[name] = true
			current = name
		case strings.HasPrefix(l, "# TYPE "):
			f := strings.Fields(l)
			if len(f) != 4 || f[2] != current {
				t.Errorf("TYPE line %q not after its HELP", l)
			}
			typ = f[3]
		default:
			name, _, _ := strings.Cut(l, " ")
			name, _, _ = strings.Cut(name, "{")
			ok := name == current
			switch typ {
			case "histogram":
				ok = name == current+"_bucket" || name == current+"_sum" || name == current+"_count"
			case "summary":
				ok = name == current || name == current+"_sum" || name == current+"_count"
			}
			if !ok {
				t.Errorf("sample %q outside its family (%s)", l, current)
			}
		}
	}
}

func TestProcessors(t *testing.T) {
	src := newFake()
	s := start(t, src)
	resp, body := get(t, s, "/v1/processors")
	expect(t, resp, body, 200, "application/json", "")

	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	procs := doc["processors"].([]any)
	if len(procs) != 2 {
		t.Fatalf("%d processors, want 2: %s", len(procs), body)
	}
	want := map[string]any{
		"name":     "nl-orders",
		"inputs":   []any{"orders"},
		"outputs":  map[string]any{"out": "orders-nl"},
		"stores":   []any{},
		"on_error": "dead_letter",
		"paused":   false,
		"plugin": map[string]any{
			"path": "/plugins/filter.wasm", "sha256": "ab12", "size": 1234.0, "abi_version": 1.0,
		},
		"counters": map[string]any{
			"records_in": 100.0, "records_out": 40.0, "skipped": 0.0, "dead_lettered": 2.0,
			"failed_tasks": 0.0, "commits": 7.0, "aborts": 1.0,
			"failures": map[string]any{"trap": 1.0, "timeout": 1.0},
			"swaps":    0.0, "swap_failures": 0.0, "rollbacks": 0.0, "refusals": 0.0,
			"shadow_matches": 0.0, "shadow_differences": 0.0, "shadow_failures": 0.0, "shadow_stops": 0.0,
		},
		// No versions known: the active one is the plugin's hash alone.
		"active_version": map[string]any{"id": "", "sha256": "ab12", "label": ""},
		"tasks":          []any{},
		"refused":        []any{},
	}
	if !reflect.DeepEqual(procs[0], want) {
		t.Errorf("processor 0:\n got %v\nwant %v", procs[0], want)
	}
	p1 := procs[1].(map[string]any)
	if p1["name"] != "counts" || !reflect.DeepEqual(p1["stores"], []any{"counts"}) ||
		!reflect.DeepEqual(p1["outputs"], map[string]any{"counts": "word-counts", "alerts": "word-alerts"}) ||
		!reflect.DeepEqual(p1["counters"].(map[string]any)["failures"], map[string]any{}) ||
		p1["counters"].(map[string]any)["failed_tasks"] != 1.0 {
		t.Errorf("processor 1: %v", p1)
	}

	// A processor the snapshot does not know has zero counters.
	src.set(func(f *fakeSource) { f.snap.Processors = nil })
	_, body = get(t, s, "/v1/processors")
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc["processors"].([]any)[0].(map[string]any)["counters"].(map[string]any)
	if c["records_in"] != 0.0 || !reflect.DeepEqual(c["failures"], map[string]any{}) {
		t.Errorf("counters of an unknown processor: %v", c)
	}

	// No processors: an empty list, not null.
	src.set(func(f *fakeSource) { f.procs = nil })
	_, body = get(t, s, "/v1/processors")
	if !strings.Contains(body, `"processors": []`) {
		t.Errorf("no processors: %s", body)
	}
}

// The versions of a processor in the middle of a swap, with a refusal:
// active_version, tasks, refused and the swap counters.
func TestProcessorsVersions(t *testing.T) {
	src := newFake()
	at := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	src.procs[0].Plugin = PluginInfo{SHA256: "bb", Size: 99, ABIVersion: 1, Version: "v2@bbbbbbbbbbbb", Label: "v2"}
	src.snap.Processors[0].Lifecycle = &Lifecycle{
		Swaps: 2, SwapFailures: 1, Rollbacks: 0, Refusals: 3,
		Tasks: []TaskVersion{
			{Task: "nl-orders/orders/0", Version: "v2@bbbbbbbbbbbb"},
			{Task: "nl-orders/orders/1", Version: "config@aaaaaaaaaaaa"},
		},
		Refused: []Refusal{
			{Version: "(unreadable)", Reason: "control: corrupt: not a JSON object", At: at},
			{Version: "v3@cccccccccccc", SHA256: "cc", Label: "v3", Reason: "chunk 0 missing", At: at.Add(time.Second)},
		},
	}
	s := start(t, src)
	_, body := get(t, s, "/v1/processors")
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	p0 := doc["processors"].([]any)[0].(map[string]any)
	for field, want := range map[string]any{
		"active_version": map[string]any{"id": "v2@bbbbbbbbbbbb", "sha256": "bb", "label": "v2"},
		"tasks": []any{
			map[string]any{"task": "nl-orders/orders/0", "version": "v2@bbbbbbbbbbbb"},
			map[string]any{"task": "nl-orders/orders/1", "version": "config@aaaaaaaaaaaa"},
		},
		"refused": []any{
			map[string]any{"id": "(unreadable)", "sha256": "", "label": "",
				"reason": "control: corrupt: not a JSON object", "at": "2025-03-04T05:06:07.000000008Z"},
			map[string]any{"id": "v3@cccccccccccc", "sha256": "cc", "label": "v3",
				"reason": "chunk 0 missing", "at": "2025-03-04T05:06:08.000000008Z"},
		},
		// plugin keeps its fields; version is the active version's ID.
		"plugin": map[string]any{"path": "", "sha256": "bb", "size": 99.0, "abi_version": 1.0, "version": "v2@bbbbbbbbbbbb"},
	} {
		if !reflect.DeepEqual(p0[field], want) {
			t.Errorf("%s:\n got %v\nwant %v", field, p0[field], want)
		}
	}
	c := p0["counters"].(map[string]any)
	if c["swaps"] != 2.0 || c["swap_failures"] != 1.0 || c["rollbacks"] != 0.0 || c["refusals"] != 3.0 || c["records_in"] != 100.0 {
		t.Errorf("counters: %v", c)
	}
	// The other processor has no Lifecycle: empty lists, not null.
	p1 := doc["processors"].([]any)[1].(map[string]any)
	if !reflect.DeepEqual(p1["tasks"], []any{}) || !reflect.DeepEqual(p1["refused"], []any{}) {
		t.Errorf("processor without versions: tasks %v refused %v", p1["tasks"], p1["refused"])
	}
}

func TestUnknownPath(t *testing.T) {
	s := start(t, newFake())
	for _, path := range []string{"/", "/nope", "/healthz/x", "/v1", "/v1/processors/nl-orders", "/metricsx"} {
		resp, body := get(t, s, path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 (%q)", path, resp.StatusCode, body)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	src := newFake()
	s := start(t, src)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/processors"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			resp, body := do(t, s, m, path)
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405 (%q)", m, path, resp.StatusCode, body)
			}
			if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") {
				t.Errorf("%s %s: Allow %q", m, path, allow)
			}
		}
		// HEAD is a GET without body.
		resp, body := do(t, s, http.MethodHead, path)
		if resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s: %d %q", path, resp.StatusCode, body)
		}
	}
	// A refused method never reaches the Source: only the HEADs of
	// /metrics and /v1/processors read the metrics.
	src.mu.Lock()
	calls := src.metricCalls
	src.mu.Unlock()
	if calls != 2 {
		t.Errorf("Metrics called %d times, want 2", calls)
	}
}

func TestAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, err = New(addr, newFake(), quietLogger())
	if err == nil {
		t.Fatalf("New on the taken address %s succeeded", addr)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "admin.listen") {
		t.Errorf("error does not name the setting and address: %v", err)
	}
	if runtime.GOOS != "windows" {
		if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "already in use") {
			t.Errorf("error does not say the address is in use: %v", err)
		}
	}
}

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9090": "127.0.0.1:9090",
		":9090":          "127.0.0.1:9090",
		"0.0.0.0:9090":   "0.0.0.0:9090",
		"localhost:0":    "localhost:0",
		"[::1]:9090":     "[::1]:9090",
	} {
		got, err := ListenAddress(in)
		if err != nil || got != want {
			t.Errorf("ListenAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "9090", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1"} {
		if got, err := ListenAddress(in); err == nil {
			t.Errorf("ListenAddress(%q) = %q, want an error", in, got)
		}
	}
	if _, err := New("", newFake(), nil); err == nil || !strings.Contains(err.Error(), "admin.listen") {
		t.Errorf("New with no address: %v", err)
	}
	if _, err := New("127.0.0.1:0", nil, nil); err == nil {
		t.Error("New with a nil Source succeeded")
	}
}

// By default (no host in the address) the endpoint binds loopback only.
func TestDefaultHostIsLoopback(t *testing.T) {
	s, err := New(":0", newFake(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	host, _, _ := net.SplitHostPort(s.Addr())
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("bound %s, want loopback", s.Addr())
	}
}

func TestClose(t *testing.T) {
	s, err := New("127.0.0.1:0", newFake(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := client.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("endpoint still answers after Close")
	}
	// The port is free again.
	s2, err := New(addr, newFake(), quietLogger())
	if err != nil {
		t.Fatalf("rebinding after Close: %v", err)
	}
	_ = s2.Close(context.Background())
}

// A connection that never sends a request does not hold Close up (net/http
// alone would wait 5 s for it).
func TestCloseWithSilentConnection(t *testing.T) {
	s, err := New("127.0.0.1:0", newFake(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Wait until the server has the connection.
	testutil.Eventually(t, 5*time.Second, func() error {
		s.connMu.Lock()
		n := len(s.fresh)
		s.connMu.Unlock()
		if n != 1 {
			return fmt.Errorf("the server sees %d fresh connections, want 1", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

// Scrapes run concurrently with each other (run with -race).
func TestConcurrentRequests(t *testing.T) {
	src := newFake()
	s := start(t, src)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/metrics", "/v1/processors", "/healthz", "/readyz"}[i%4]
			resp, err := client.Get("http://" + s.Addr() + path)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d", path, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
}
