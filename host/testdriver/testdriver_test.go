package testdriver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// plugins are the Go packages of the plugins testdata/pipeline.yaml names.
var plugins = map[string]string{
	"split.wasm":       "./plugins/split",
	"wordcount.wasm":   "./plugins/wordcount",
	"windowcount.wasm": "./plugins/windowcount",
	"alert.wasm":       "./plugins/alert",
	"enrich.wasm":      "./plugins/enrich",
}

// pipelineDir lays out testdata/pipeline.yaml with its plugins built
// beside it and returns the config's path.
func pipelineDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"pipeline.yaml": filepath.Join("testdata", "pipeline.yaml")}
	for name, pkg := range plugins {
		files[name] = wasmbuild.Build(t, pkg)
	}
	for to, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "pipeline.yaml")
}

func open(t *testing.T) *Driver {
	t.Helper()
	d, err := Open(context.Background(), pipelineDir(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func at(sec int) time.Time { return DefaultStart.Add(time.Duration(sec) * time.Second) }

func TestSmoke(t *testing.T) {
	d := open(t)
	if err := d.Pipe("lines", Record{Key: []byte("l1"), Value: []byte("the cat the"), Timestamp: at(1)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	out, err := d.Output("word-counts")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out {
		t.Logf("%s=%s", r.Key, r.Value)
	}
	st, err := d.Store("count", "counts")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st {
		t.Logf("store %s=%x", e.Key, e.Value)
	}
}
