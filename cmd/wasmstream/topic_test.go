package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/demo"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = doMainIO(ctx, args, strings.NewReader(stdin), &out, &errb, nil)
	return code, out.String(), errb.String()
}

// The topic commands against --brokers: create, produce, consume, list,
// describe, and their mistakes.
func TestTopicCommands(t *testing.T) {
	b := testbroker.New(t)
	brokers := strings.Join(b.Addrs(), ",")
	topic := b.Name(t, "payments")
	t.Cleanup(func() { _, _ = b.Admin(t).DeleteTopics(context.Background(), topic) })

	code, out, errs := runCLI(t, "topic", "create", topic, "--brokers", brokers, "-p", "2")
	if code != exitOK || !strings.Contains(out, "created topic "+topic+" (2 partitions, replication factor 1)") {
		t.Fatalf("create: exit %d: %s %s", code, out, errs)
	}
	code, out, errs = runCLIIn(t, "acct-1:1999\nacct-2:250000\n", "topic", "produce", topic, "--brokers", brokers, "-k", ":", "-H", "source=test")
	if code != exitOK || out != "" || !strings.Contains(errs, "produced 2 records to "+topic) {
		t.Fatalf("produce: exit %d: %q %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "topic", "consume", topic, "--brokers", brokers, "--format", `%k=%v %h\n`)
	if code != exitOK || !strings.Contains(out, "acct-1=1999 source=test\n") || !strings.Contains(out, "acct-2=250000 source=test\n") {
		t.Fatalf("consume: exit %d: %q %q", code, out, errs)
	}
	code, out, _ = runCLI(t, "topic", "consume", topic, "--brokers", brokers, "-n", "1", "--format", "json")
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"headers":[{"key":"source","value":"test"}]`) {
		t.Errorf("consume -n 1 --format json: exit %d: %q", code, out)
	}
	code, out, _ = runCLI(t, "topic", "list", "--brokers", brokers)
	if code != exitOK || !strings.Contains(out, "TOPIC") || !strings.Contains(out, topic) {
		t.Errorf("list: exit %d: %s", code, out)
	}
	code, out, _ = runCLI(t, "topic", "describe", topic, "--brokers", brokers)
	if code != exitOK || !strings.Contains(out, "partitions  2") {
		t.Errorf("describe: exit %d: %s", code, out)
	}

	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"topic", "create", topic, "--brokers", brokers}, exitError, "already exists"},
		{"x\n", []string{"topic", "produce", b.Name(t, "nope"), "--brokers", brokers}, exitError, "does not exist on " + brokers + " (wasmstream topic create"},
		{"no-sep\n", []string{"topic", "produce", topic, "--brokers", brokers, "-k", ":"}, exitError, `line 1: no key separator ":"`},
		{"", []string{"topic", "consume", topic, "--brokers", brokers, "--from", "yesterday"}, exitError, `--from "yesterday": want start, end`},
		{"", []string{"topic", "consume", "--brokers", brokers}, exitUsage, "usage: wasmstream topic consume TOPIC"},
		{"", []string{"topic", "produce", topic, "--brokers", brokers, "-H", "novalue"}, exitUsage, "want NAME=VALUE"},
		{"", []string{"topic", "list"}, exitError, "pass --brokers HOST:PORT, or -c pipeline.yaml"},
		{"", []string{"topic", "list", "--brokers", "127.0.0.1:1", "--log-level", "error"}, exitError, "cannot reach Kafka at 127.0.0.1:1"},
		{"", []string{"topic", "frobnicate"}, exitUsage, `unknown subcommand "frobnicate"`},
	} {
		code, _, errs := runCLIIn(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// A newcomer's loop on the embedded broker: run the pipeline, feed it and
// read it with the topic commands, which find the running broker through
// -c alone. A key goes to the partition the host chooses for it: the
// word count re-emits each word under itself, so every word's count comes
// out on the partition its line went in on.
func TestTopicCommandsOnEmbeddedBroker(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wordcount.wasm"), demo.WordcountWasm, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "pipeline.yaml", "app_id: wc\nkafka:\n  commit_interval: 20ms\nruntime: {cache_dir: \"off\"}\n"+
		"processors:\n  - {name: count, plugin: wordcount.wasm, inputs: [lines], outputs: {counts: counts}, stores: [counts], config: {value_format: decimal}}\n")
	stderr, stop := startRun(t, cfg, "msg=running")
	if !strings.Contains(stderr.String(), "wasmstream topic produce|consume -c "+cfg) {
		t.Errorf("run does not say how to reach its embedded broker:\n%s", stderr.String())
	}

	var lines strings.Builder
	for i := range 60 {
		w := fmt.Sprintf("w%d", i)
		fmt.Fprintf(&lines, "%s|%s\n", w, w)
	}
	if code, out, errs := runCLIIn(t, lines.String(), "topic", "produce", "lines", "-c", cfg, "-k", "|"); code != exitOK {
		t.Fatalf("produce: exit %d: %s %s", code, out, errs)
	}
	var in, outp string
	testutil.Eventually(t, 30*time.Second, func() error {
		_, outp, _ = runCLI(t, "topic", "consume", "counts", "-c", cfg, "--format", `%k %p %v\n`)
		if n := strings.Count(outp, "\n"); n < 60 {
			return fmt.Errorf("%d counts out", n)
		}
		return nil
	})
	_, in, _ = runCLI(t, "topic", "consume", "lines", "-c", cfg, "--format", `%k %p\n`)
	partOf := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(in), "\n") {
		f := strings.Fields(l)
		partOf[f[0]] = f[1]
	}
	for _, l := range strings.Split(strings.TrimSpace(outp), "\n") {
		f := strings.Fields(l)
		if partOf[f[0]] != f[1] || f[2] != "1" {
			t.Errorf("word %s counted %s on partition %s; its line went to partition %s", f[0], f[2], f[1], partOf[f[0]])
		}
	}
	if len(partOf) != 60 {
		t.Errorf("%d distinct words read back, want 60", len(partOf))
	}

	if code := stop(); code != exitOK {
		t.Fatalf("run exit %d: %s", code, stderr.String())
	}
	// The run is over, and its broker with it.
	code, _, errs := runCLI(t, "topic", "consume", "counts", "-c", cfg)
	if code != exitError || !strings.Contains(errs, "none of app \"wc\" is running") || !strings.Contains(errs, "--brokers") ||
		!strings.Contains(errs, filepath.Join(dir, "wasmstream-state", "wc.embedded-broker")) {
		t.Errorf("consume after the run: exit %d, %s", code, errs)
	}
}
