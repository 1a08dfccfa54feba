package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/demo"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// statefulPipeline writes a wordcount pipeline on the test broker (the
// embedded demo plugin, fresh single-partition topics).
type statefulPipeline struct {
	b       *testbroker.Broker
	cfg     string
	in, out string
	environ []string
}

func newStatefulPipeline(t *testing.T) *statefulPipeline {
	b := testbroker.New(t)
	p := &statefulPipeline{b: b, in: b.Name(t, "lines"), out: b.Name(t, "counts")}
	b.CreateTopic(t, p.in, 1, nil)
	b.CreateTopic(t, p.out, 1, nil)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "wordcount.wasm")
	if err := os.WriteFile(plugin, demo.WordcountWasm, 0o644); err != nil {
		t.Fatal(err)
	}
	p.cfg = writeFile(t, dir, "wc.yaml", "app_id: "+b.Name(t, "wc")+"\n"+
		"kafka:\n  commit_interval: 20ms\n"+
		"processors:\n  - name: wordcount\n    plugin: wordcount.wasm\n    inputs: ["+p.in+"]\n"+
		"    outputs: {counts: "+p.out+"}\n    stores: [counts]\n"+
		"runtime:\n  cache_dir: "+filepath.Join(dir, "cache")+"\n")
	p.environ = []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")}
	return p
}

// run runs `wasmstream run` on stateDir, produces lines, waits until
// wantTotal counts are out, calls during (if any) while it runs, stops it
// like SIGTERM does and returns its stderr and the latest counts.
func (p *statefulPipeline) run(t *testing.T, stateDir string, wantTotal int, during func(), lines ...string) (string, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- doMain(ctx, []string{"run", "-c", p.cfg, "--state-dir", stateDir}, &stdout, &stderr, p.environ)
	}()
	for _, l := range lines {
		p.b.Produce(t, &kgo.Record{Topic: p.in, Value: []byte(l)})
	}
	var recs []*kgo.Record
	testutil.Eventually(t, 60*time.Second, func() error {
		if recs = p.b.ReadCommitted(t, p.out, 30*time.Second); len(recs) < wantTotal {
			return fmt.Errorf("%d of %d counts came out; stderr:\n%s", len(recs), wantTotal, stderr.String())
		}
		return nil
	})
	if during != nil {
		during()
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("run exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not stop within 60s")
	}
	counts := map[string]string{}
	for _, r := range recs {
		counts[string(r.Key)] = string(r.Value)
	}
	return stderr.String(), counts
}

// A stateful `run` keeps its store in the state directory, `state dump`
// shows it offline, and a run on an empty state directory restores it
// from the changelog, reporting the restore in plain log lines when
// stderr is not a terminal.
func TestStatefulRunStateDumpAndRestore(t *testing.T) {
	p := newStatefulPipeline(t)
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()

	// "the cat the" emits the, cat; "the dog" emits the, dog.
	_, counts := p.run(t, dirA, 4, func() {
		code, _, errs := runCLI(t, "state", "dump", "-c", p.cfg, "--state-dir", dirA, "--store", "counts")
		if code != exitError || !strings.Contains(errs, "is in use by a running wasmstream; stop it or copy the directory") {
			t.Errorf("state dump while run holds the directory: exit %d, stderr:\n%s", code, errs)
		}
	}, "the cat the", "the dog")
	if counts["the"] != "3" || counts["dog"] != "1" {
		t.Fatalf("counts after the first run: %v", counts)
	}

	dump := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"state", "dump", "-c", p.cfg, "--state-dir", dirA}, args...)...)
	}
	code, out, errs := dump("--store", "counts")
	if code != exitOK {
		t.Fatalf("state dump: exit %d: %s", code, errs)
	}
	t.Logf("state dump:\n%s", out)
	for _, want := range []string{
		"(opened read-only)",
		`store "counts" of processor "wordcount"`,
		"task wordcount/" + p.in + "/0", // the runner's name, as in the logs and /v1
		"checkpoint: changelog offset ",
		"the  0x0000000000000003  (big-endian uint64 3)",
		"cat  0x0000000000000001  (big-endian uint64 1)",
		"(3 keys)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("state dump lacks %q", want)
		}
	}
	if !regexp.MustCompile(`checkpoint: changelog offset [1-9]`).MatchString(out) {
		t.Errorf("no checkpoint above 0 in the dump")
	}
	if code, out, _ := dump("--store", "counts", "--format", "hex", "--processor", "wordcount", "--partition", "0"); code != exitOK || !strings.Contains(out, "0x746865  0x0000000000000003") {
		t.Errorf("--format hex: exit %d:\n%s", code, out)
	}
	if code, out, _ := dump("--store", "counts", "--format", "text", "--limit", "1"); code != exitOK || !strings.Contains(out, `"cat"  "\x00\x00\x00\x00\x00\x00\x00\x01"`) || !strings.Contains(out, "first 1 keys") {
		t.Errorf("--format text --limit 1: exit %d:\n%s", code, out)
	}
	if code, out, _ := dump("--store", "counts", "--partition", "5"); code != exitOK || !strings.Contains(out, "no local state for partition 5") || !strings.Contains(out, "partitions in this directory: 0") {
		t.Errorf("--partition 5: exit %d:\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--store", "nope"}, exitError, `unknown store "nope"; the config declares: counts (processor wordcount)`},
		{[]string{"--store", "counts", "--processor", "nope"}, exitError, `unknown processor "nope"; the config's processors: wordcount (stores: counts)`},
		{nil, exitUsage, "--store is required; the config declares: counts (processor wordcount)"},
		{[]string{"--store", "counts", "--format", "yaml"}, exitUsage, "--format"},
		{[]string{"--store", "counts", "--app-id", "other"}, exitError, "no local state in"},
	} {
		code, _, errs := dump(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("state dump %v: exit %d, stderr %q; want exit %d with %q", c.args, code, errs, c.code, c.want)
		}
	}
	if code, _, errs := runCLI(t, "state"); code != exitUsage || !strings.Contains(errs, "wasmstream state dump") {
		t.Errorf("state without a subcommand: exit %d, %s", code, errs)
	}

	// An empty state directory: the store is restored from the changelog
	// and the counts go on. Not a terminal: plain log lines, no bars.
	stderr, counts := p.run(t, dirB, 6, nil, "the end")
	if counts["the"] != "4" || counts["end"] != "1" {
		t.Fatalf("counts after restoring into an empty state dir: %v\nstderr:\n%s", counts, stderr)
	}
	if !regexp.MustCompile(`msg="restore: complete".* restored=[1-9]`).MatchString(stderr) {
		t.Errorf("no restore completion line with the restored count; stderr:\n%s", stderr)
	}
	if strings.Contains(stderr, "\x1b[") {
		t.Errorf("terminal escapes in a non-terminal stderr:\n%q", stderr)
	}

	// Pretend stderr is a terminal: logs still arrive whole, through the
	// bar renderer (this restore is too quick to get a bar).
	defer func(f func(io.Writer, []string) (func() int, bool)) { terminal = f }(terminal)
	terminal = func(io.Writer, []string) (func() int, bool) { return func() int { return 120 }, true }
	stderr, counts = p.run(t, dirC, 7, nil, "the")
	if counts["the"] != "5" {
		t.Fatalf("counts after restoring with bars on: %v\nstderr:\n%s", counts, stderr)
	}
	if !strings.Contains(stderr, `msg="restore: complete"`) || !strings.Contains(stderr, `msg="stopped cleanly"`) {
		t.Errorf("log lines missing with bars on; stderr:\n%s", stderr)
	}
}

// state.dir is relative to the config file: state dump run from another
// directory reads the same state, a missing one is named by its absolute
// path, and the layout of an earlier wasmstream (state.dir relative to the
// working directory) is found and explained.
func TestStateDumpPaths(t *testing.T) {
	conf, wd := t.TempDir(), t.TempDir()
	t.Chdir(wd)
	cfg := writeFile(t, conf, "pipeline.yaml", "app_id: paths\nprocessors:\n  - {name: p, plugin: p.wasm, inputs: [in], stores: [counts]}\n")
	want := filepath.Join(conf, "wasmstream-state", "paths")
	code, _, errs := runCLI(t, "state", "dump", "-c", cfg, "--store", "counts")
	if code != exitError || !strings.Contains(errs, "no local state in "+want+" ") || !strings.Contains(errs, "has run on this machine with this state.dir") {
		t.Errorf("no state: exit %d, stderr %q; want the absolute %s named", code, errs, want)
	}
	old := filepath.Join(wd, "wasmstream-state", "paths")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "state", "dump", "-c", cfg, "--store", "counts")
	for _, w := range []string{"no local state in " + want, "relative to the config file's directory since this release",
		"kept this app's state in " + old, "--state-dir " + filepath.Dir(old), "mv " + old + " " + want} {
		if code != exitError || !strings.Contains(errs, w) {
			t.Errorf("old layout: exit %d, stderr %q; want %q", code, errs, w)
		}
	}
}
