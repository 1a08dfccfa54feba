package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeWasmstream writes an executable standing in for wasmstream validate:
// it refuses a config that contains refuse with the line msg, and accepts
// any other.
func fakeWasmstream(t *testing.T, refuse, msg string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"refuse": refuse, "msg": "wasmstream: invalid config\n  " + msg + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "wasmstream")
	script := "#!/bin/sh\n# validate -c <config>\n" +
		"if grep -qF -f " + dir + "/refuse \"$3\"; then cat " + dir + "/msg; exit 1; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func warm(t *testing.T, bin string, names ...string) (*Bench, error) {
	t.Helper()
	var cs []Config
	for _, n := range names {
		cs = append(cs, config(t, n))
	}
	dir := t.TempDir()
	b, err := NewBench(Options{Brokers: []string{"127.0.0.1:1"}, Poll: 100 * time.Millisecond, CommitInterval: 100 * time.Millisecond,
		Spec: InputSpec{Partitions: 4}, Configs: cs, Wasmstream: bin, Plugins: dir, Work: dir,
		Templates: filepath.Join("..", "..", "scripts", "bench")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, b.WarmWasmstream(context.Background())
}

// A configuration that needs a config feature the binary refuses is not
// run, and its rows say why; a refusal of anything else fails the
// session, as does a refused configuration that needs no feature.
func TestWarmWasmstreamGatesRequiredFeatures(t *testing.T) {
	refusal := "processors[1].outputs[counts]: expected type 'string', got unconvertible type 'map[string]interface {}'"
	b, err := warm(t, fakeWasmstream(t, "emit: latest_per_key}", refusal), "wasmstream-general", "wasmstream-general-latest")
	if err != nil {
		t.Fatal(err)
	}
	why := b.unsupported["wasmstream-general-latest"]
	if !strings.Contains(why, "emit: latest_per_key") || !strings.Contains(why, refusal) || len(b.unsupported) != 1 {
		t.Fatalf("unsupported = %q", b.unsupported)
	}
	in := &Input{Layout: LayoutAny, Lines: 10, Topic: "in"}
	if r := b.Run(context.Background(), in, ExactlyOnce, config(t, "wasmstream-general-latest"), 1); r.Pending != why || r.Measured() {
		t.Fatalf("run of an unsupported configuration: %+v", r)
	}

	// Refused somewhere else: not the feature's absence, a broken template.
	if _, err := warm(t, fakeWasmstream(t, "emit: latest_per_key}", "processors[0].plugin: no such file"), "wasmstream-general-latest"); err == nil {
		t.Fatal("a refusal at another path was taken for the missing feature")
	}
	// A configuration that requires nothing must load.
	if _, err := warm(t, fakeWasmstream(t, "split.wasm", refusal), "wasmstream-general"); err == nil {
		t.Fatal("a refused configuration without a required feature did not fail the session")
	}
}
