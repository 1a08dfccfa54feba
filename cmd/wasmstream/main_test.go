package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

func testdata(name string) string {
	return filepath.Join("..", "..", "host", "internal", "engine", "testdata", name+".wasm")
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = doMain(ctx, args, &out, &errb, nil)
	return code, out.String(), errb.String()
}

func TestInspect(t *testing.T) {
	code, out, errs := runCLI(t, "plugin", "inspect", testdata("passthrough"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"abi version:  1", "wasmstream_process", "wasmstream.emit", "sha256:", "compile cost: about ", " MiB per instance"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectRejectsBadModules(t *testing.T) {
	notWasm := filepath.Join(t.TempDir(), "notes.wasm")
	if err := os.WriteFile(notWasm, []byte("hello, not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		notWasm:               "not a WebAssembly",
		testdata("corrupt"):   "",
		testdata("truncated"): "",
		testdata("abi3"):      "version",
		testdata("noabi"):     "wasmstream_abi_version",
		"/no/such/file.wasm":  "no such file",
	} {
		code, _, errs := runCLI(t, "plugin", "inspect", file)
		if code != exitError || !strings.Contains(errs, want) || !strings.Contains(errs, "wasmstream:") {
			t.Errorf("inspect %s: exit %d, stderr %q; want exit 1 mentioning %q", file, code, errs, want)
		}
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	plugin, _ := filepath.Abs(testdata("passthrough"))
	good := writeFile(t, dir, "good.yaml", "app_id: a\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	if code, out, errs := runCLI(t, "validate", "-c", good); code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("validate good: exit %d, %s %s", code, out, errs)
	}
	badField := writeFile(t, dir, "bad.yaml", "app_id: a\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n    outputz: {out: out}\n")
	if code, _, errs := runCLI(t, "validate", "-c", badField); code != exitError || !strings.Contains(errs, "processors[0].outputz: unknown field") {
		t.Fatalf("validate bad field: exit %d, %s", code, errs)
	}
	trapInit, _ := filepath.Abs(testdata("inittrap"))
	badPlugin := writeFile(t, dir, "badplugin.yaml", "app_id: a\nprocessors:\n  - name: p\n    plugin: "+trapInit+"\n    inputs: [in]\n")
	if code, _, errs := runCLI(t, "validate", "-c", badPlugin); code != exitError || !strings.Contains(errs, "processors[0] (p)") {
		t.Fatalf("validate trapping init: exit %d, %s", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}, {"validate"}, {"plugin"}, {"plugin", "inspect"}} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want usage error", args, code, errs)
		}
	}
}

// The demo from a fresh clone: embedded broker, bundled plugin, records
// printed.
func TestDemo(t *testing.T) {
	code, out, errs := runCLI(t, "demo")
	if code != exitOK {
		t.Fatalf("demo exit %d: %s", code, errs)
	}
	for _, want := range []string{"embedded Kafka", "in  ada", "out ada", "12 records in, 12 out, 0 failed",
		// part 2: word counts kept across a restart and a move
		"host 1 on state dir A (empty)",
		"counts: the=3 dog=2 ",
		"restarted: counts continued from the local store (checkpoint at offset ",
		"counts: the 3 -> 5, dog 2 -> 3, fox 1 -> 2, wakes new -> 1",
		"host 3 on state dir B (empty: a new machine)",
		"counts: the 5 -> 6, end new -> 1",
		// the closing hint is one that works (TestDemoHintsWork runs it)
		"wasmstream demo --keep DIR, then wasmstream state dump -c DIR/pipeline.yaml --store counts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`restored [1-9][0-9]* records from the changelog`).MatchString(out) {
		t.Errorf("demo output does not say how many records host 3 restored:\n%s", out)
	}
	// The restart found the checkpoint that the first host left.
	m := regexp.MustCompile(`state dir A holds 9 words, checkpoint at changelog offset ([0-9]+)\n`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "(checkpoint at offset "+m[1]+"); nothing to read from the changelog") {
		t.Errorf("demo output: the restart does not continue from host 1's checkpoint:\n%s", out)
	}
	if strings.Contains(out, "ada@example.com\",\"card\":{\"number\":\"4111-1111-1111-1000\"}") {
		t.Error("demo output shows an unmasked record as output")
	}
}

// syncBuffer is a bytes.Buffer safe to read while doMain writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `run` processes records and, on SIGTERM (a canceled context), finishes,
// commits and exits 0; a restart then processes only the new records.
func TestRunStopsCleanlyAndResumes(t *testing.T) {
	b := testbroker.New(t)
	in, out, app := b.Name(t, "in"), b.Name(t, "out"), b.Name(t, "app")
	b.CreateTopic(t, in, 2, nil)
	b.CreateTopic(t, out, 2, nil)
	plugin, _ := filepath.Abs(testdata("passthrough"))
	cfg := writeFile(t, t.TempDir(), "p.yaml", "app_id: "+app+"\nkafka:\n  commit_interval: 20ms\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: ["+in+"]\n    outputs: {out: "+out+"}\n")
	environ := []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")}

	runOnce := func(wantTotal int, keys ...string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr syncBuffer
		done := make(chan int, 1)
		go func() { done <- doMain(ctx, []string{"run", "-c", cfg}, &stdout, &stderr, environ) }()
		for _, k := range keys {
			b.Produce(t, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(k)})
		}
		testutil.Eventually(t, 60*time.Second, func() error {
			if n := len(b.ReadCommitted(t, out, 30*time.Second)); n < wantTotal {
				return fmt.Errorf("%d of %d outputs arrived; stderr:\n%s", n, wantTotal, stderr.String())
			}
			return nil
		})
		cancel() // what SIGTERM does in main
		select {
		case code := <-done:
			if code != exitOK {
				t.Fatalf("run exit %d; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("run did not stop within 60s of SIGTERM")
		}
	}
	runOnce(3, "a", "b", "c")
	runOnce(5, "d", "e")
	got := b.ReadCommitted(t, out, 30*time.Second)
	if len(got) != 5 {
		t.Fatalf("%d outputs after two runs, want 5 (no record processed twice after a clean stop)", len(got))
	}
}

// startRun starts `wasmstream run -c cfg` and waits until its stderr says
// want; it returns that stderr and stop, which stops the run and returns
// its exit code.
func startRun(t *testing.T, cfg, want string) (stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var stdout syncBuffer
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- doMain(ctx, []string{"run", "-c", cfg}, &stdout, stderr, nil) }()
	testutil.Eventually(t, 30*time.Second, func() error {
		if s := stderr.String(); !strings.Contains(s, want) {
			return fmt.Errorf("run has not said %q yet; stderr:\n%s", want, s)
		}
		return nil
	})
	return stderr, func() int {
		cancel()
		return <-done
	}
}

// `run` with no brokers starts the embedded broker and says it is for
// development only.
func TestRunWithoutBrokersUsesEmbedded(t *testing.T) {
	plugin, _ := filepath.Abs(testdata("passthrough"))
	cfg := writeFile(t, t.TempDir(), "p.yaml", "app_id: dev\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	stderr, stop := startRun(t, cfg, "DEVELOPMENT MODE: embedded Kafka at 127.0.0.1:")
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// SIGTERM while `run` is still starting (here: waiting for a broker that
// does not answer) is a clean stop: exit 0, nothing was consumed.
func TestRunStoppedWhileStarting(t *testing.T) {
	plugin, _ := filepath.Abs(testdata("passthrough"))
	// A listening socket that never speaks Kafka keeps the start waiting.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// accepted is closed once run has connected: from then on it waits for
	// an answer that never comes, so the stop below lands during start.
	accepted := make(chan struct{})
	go func() {
		var once sync.Once
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			once.Do(func() { close(accepted) })
			defer c.Close()
		}
	}()
	cfg := writeFile(t, t.TempDir(), "p.yaml", "app_id: s\nkafka:\n  brokers: ["+ln.Addr().String()+"]\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- doMain(ctx, []string{"run", "-c", cfg}, &stdout, &stderr, nil) }()
	select {
	case <-accepted:
	case code := <-done:
		cancel()
		t.Fatalf("run exited %d before connecting to the broker; stderr:\n%s", code, stderr.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("run did not connect to the broker within 30s; stderr:\n%s", stderr.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d after a stop during start, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of being canceled during start")
	}
}
