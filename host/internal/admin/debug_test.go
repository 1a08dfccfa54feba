package admin

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The debug endpoints are off unless asked for: without Debug every
// /debug/ path is a 404, so a profiler never runs by accident.
func TestDebugOffByDefault(t *testing.T) {
	s := start(t, newFake())
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/snapshot"} {
		if resp, body := get(t, s, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s without admin.debug: status %d (%.80q), want 404", path, resp.StatusCode, body)
		}
	}
}

// With Debug: the pprof index, a heap profile (gzipped protobuf), every
// goroutine's stack as text, and the snapshot with what each processor
// holds. The debug routes are read-only like the rest.
func TestDebugEndpoints(t *testing.T) {
	src := newFake()
	src.snap.Processors[1].Lifecycle = &Lifecycle{Held: 2, Modules: 2, Instances: 3, MemoryBytes: 3 << 20,
		Tasks: []TaskVersion{{Task: "counts/words/0", Version: "v2"}, {Task: "counts/words/1", Version: "v2"}}}
	src.snap.StateOpen = &StateCounts{Tasks: 2, Iterators: 0}
	s, err := New("127.0.0.1:0", src, quietLogger(), Debug())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})

	resp, body := get(t, s, "/debug/pprof/")
	if resp.StatusCode != 200 || !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Errorf("pprof index: %d %.200q", resp.StatusCode, body)
	}
	resp, body = get(t, s, "/debug/pprof/heap?gc=1")
	if resp.StatusCode != 200 {
		t.Fatalf("heap profile: %d %.200q", resp.StatusCode, body)
	}
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatalf("heap profile is not gzipped: %v", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
		t.Fatalf("heap profile: %d bytes, %v", len(raw), err)
	}
	resp, body = get(t, s, "/debug/pprof/goroutine?debug=2")
	if resp.StatusCode != 200 || !strings.Contains(body, "goroutine ") || !strings.Contains(body, "net/http") {
		t.Errorf("goroutine dump: %d %.200q", resp.StatusCode, body)
	}

	resp, body = get(t, s, "/debug/snapshot?gc=1")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("snapshot: %d %s %.200q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var snap DebugSnapshot
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if !snap.GC || snap.HeapLiveBytes == 0 || snap.HeapAllocBytes == 0 || snap.GCCycles == 0 || snap.Goroutines < 2 {
		t.Errorf("runtime part of the snapshot: %+v", snap)
	}
	if snap.RSSBytes <= 0 || snap.Threads <= 0 || snap.OpenFDs <= 0 {
		t.Errorf("/proc part of the snapshot: rss %d, threads %d, fds %d", snap.RSSBytes, snap.Threads, snap.OpenFDs)
	}
	want := []DebugProcessor{{Name: "nl-orders"}, {Name: "counts", Versions: 2, Modules: 2, Instances: 3, MemoryBytes: 3 << 20, Tasks: 2}}
	if len(snap.Processors) != 2 || snap.Processors[0] != want[0] || snap.Processors[1] != want[1] {
		t.Errorf("processors %+v, want %+v", snap.Processors, want)
	}
	if snap.State == nil || *snap.State != (StateCounts{Tasks: 2}) {
		t.Errorf("state %+v", snap.State)
	}
	if resp, _ := do(t, s, http.MethodPost, "/debug/snapshot"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /debug/snapshot: %d, want 405", resp.StatusCode)
	}
	// The metrics carry the same counts.
	_, metrics := get(t, s, "/metrics")
	for _, line := range []string{`wasmstream_plugin_versions_held{processor="counts"} 2`, `wasmstream_plugin_modules{processor="counts"} 2`,
		`wasmstream_plugin_instances{processor="counts"} 3`, `wasmstream_state_task_handles 2`, `wasmstream_state_iterators 0`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
