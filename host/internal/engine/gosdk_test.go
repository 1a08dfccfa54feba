package engine

import (
	"os"
	"testing"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// goSDKPassthrough builds plugins/passthrough (the Go SDK's baseline plugin)
// for wasip1 (seconds the first time; cached per user) and compiles it.
func goSDKPassthrough(tb testing.TB, r *Runtime) *Module {
	tb.Helper()
	wasm, err := os.ReadFile(wasmbuild.Build(tb, "./plugins/passthrough"))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := r.Compile(bg, "passthrough-go", wasm)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestGoSDKPassthrough runs a real Go plugin (a 1-2 MB wasip1 c-shared
// reactor) through the instrumented engine: init, records, no allocation.
func TestGoSDKPassthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go plugin")
	}
	r, _ := newRuntime(t, Options{})
	m := goSDKPassthrough(t, r)
	info := m.Info()
	if !info.HasInitialize || info.InstrumentedLoops == 0 || info.ABIVersion != 2 || !info.Batch {
		t.Errorf("info: %+v", info)
	}
	i, sink := instantiate(t, m, Binding{Config: []byte("{}")})
	in := rec("k", "v")
	for range 3 {
		if err := i.Process(bg, in); err != nil {
			t.Fatal(err)
		}
	}
	got := sink.take()
	if len(got) != 3 || string(got[2].rec.Key) != "k" || string(got[2].rec.Value) != "v" {
		t.Fatalf("emits: %+v", got)
	}
	j, _ := instantiate(t, m, Binding{Config: []byte("{}"), Sink: &countSink{}})
	big := benchRecord()
	if err := j.Process(bg, big); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := j.Process(bg, big); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Process allocates %v times per record with the Go plugin", n)
	}
}

// BenchmarkProcessGoSDK is BenchmarkProcessWAT with the Go SDK's
// passthrough plugin.
func BenchmarkProcessGoSDK(b *testing.B) {
	r, _ := newRuntime(b, Options{})
	benchModule(b, goSDKPassthrough(b, r), Binding{Config: []byte("{}")}, nil)
}
