package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
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

// floorChildEnv makes this test binary, started by Bench.Run as the
// floor's process (Options.Self), run `benchkit floor` instead of tests.
const floorChildEnv = "BENCHKIT_TEST_FLOOR_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(floorChildEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "floor" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := floorMain(ctx, os.Args[2:], os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// A run end to end, with the floor as the measured process: from a backlog
// written before the run, and live, written during it at a rate; both are
// done once their input is processed, and the check passes.
func TestRunMeasuresTheFloor(t *testing.T) {
	t.Setenv(floorChildEnv, "1")
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "backlog", true: "live"}[live], func(t *testing.T) {
			br := testbroker.New(t)
			dir := t.TempDir()
			o := Options{Brokers: br.Addrs(), Spec: InputSpec{Lines: 2000, Words: 4, Partitions: 3, Vocab: 300, ZipfS: 1, Seed: 5},
				CommitInterval: 50 * time.Millisecond, Poll: 50 * time.Millisecond, Quiet: 500 * time.Millisecond,
				RunTimeout: 2 * time.Minute, StopGrace: 10 * time.Second, Self: os.Args[0], Work: dir, Live: live}
			if live {
				o.InputRate = 5000
			}
			b, err := NewBench(o, testWriter{t})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := context.Background()
			in, err := b.PrepareInput(ctx, LayoutAny)
			if err != nil {
				t.Fatal(err)
			}
			if in.Live != live || (in.Topic == "") == !live {
				t.Fatalf("input %+v for live %v", in, live)
			}
			var sum int64
			for _, e := range in.Ends {
				sum += e
			}
			if sum != 2000 || len(in.Truth) == 0 {
				t.Fatalf("input ends %v (want 2000 lines), %d words", in.Ends, len(in.Truth))
			}
			r := b.Run(ctx, in, ExactlyOnce, config(t, "floor"), 1)
			if !r.Measured() {
				t.Fatalf("run: err %v, check %v, pending %q", r.Err, r.Check, r.Pending)
			}
			if r.Outputs != 2000*4 || r.Wall <= 0 || r.CPU <= 0 || r.PeakRSS <= 0 {
				t.Fatalf("run: %+v", r)
			}
			if !live && r.Drain != 0 {
				t.Fatalf("a backlog run has a drain time: %s", r.Drain)
			}
			// The run's topics are deleted: its output, internal topics
			// and live input.
			testutil.Eventually(t, 30*time.Second, func() error {
				topics, err := b.adm.ListTopics(ctx)
				if err != nil {
					return err
				}
				for _, name := range topics.Names() {
					if strings.Contains(name, "-floor-r1") {
						return fmt.Errorf("topic %s left after the run", name)
					}
				}
				return nil
			})
		})
	}
}

// testWriter logs what the harness writes to its log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
