package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/scaffold"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// maxVelocityLines bounds the processor code of the velocity processor in
// every SDK (the aim: "under about 40 lines"): its lines that are neither
// blank nor comments, without the test and the imports. (Go's error
// returns take it to 41: Rust 28, C 39, TypeScript 27.)
const maxVelocityLines = 41

// TestNewcomerPath is a newcomer's first hour, in every language, with only
// the installed binary in an empty directory outside the repository:
// init; the velocity processor ("per card, count payments in the last
// 60 s of event time; alert above 3; pass every payment on") written with
// the SDK's own time helpers (the very files the SDK's tests run:
// sdk/internal/velocity, sdk/rust/tests/velocity.rs,
// sdk/c/test/velocity_test.c, sdk/ts/test/velocity.ts, split into the
// project's processor and its native test); the native test; the build;
// validate; the pipeline's cases (wasmstream test); then wasmstream run on
// the embedded broker, fed by wasmstream topic produce and read by
// wasmstream topic consume.
func TestNewcomerPath(t *testing.T) {
	bin := installedBinary(t)
	repo := polybuild.Root(t)
	for _, l := range scaffold.Langs {
		t.Run(l.Name, func(t *testing.T) {
			checkToolchain(t, l.Name, repo)
			work := t.TempDir()
			run(t, work, bin, "init", "velocity", "--lang", l.Name)
			dir := filepath.Join(work, "velocity")
			files, proc := velocityProject(t, repo, l.Name)
			for name, text := range files {
				writeFile(t, dir, name, text)
			}
			if n := codeLines(proc); n > maxVelocityLines {
				t.Errorf("the %s velocity processor has %d lines of code; want at most %d", l.Name, n, maxVelocityLines)
			} else {
				t.Logf("the %s velocity processor: %d lines of code", l.Name, n)
			}
			writeFile(t, dir, "pipeline.yaml", velocityPipeline)
			writeFile(t, dir, "cases.yaml", velocityCases())

			run(t, dir, "make", "test")
			run(t, dir, "make")
			if out := run(t, dir, bin, "validate", "-c", "pipeline.yaml"); !strings.Contains(out, "ok (1 processor)") {
				t.Fatalf("validate said:\n%s", out)
			}
			if out := run(t, dir, bin, "test", "pipeline.yaml", "cases.yaml"); !strings.Contains(out, "ok: 1 cases") {
				t.Fatalf("test said:\n%s", out)
			}
			runVelocity(t, bin, dir)
		})
	}
}

// checkToolchain fails the test when the toolchain of lang is missing.
func checkToolchain(t *testing.T, lang, repo string) {
	t.Helper()
	var err error
	switch lang {
	case "rust":
		err = polybuild.CheckRust()
	case "c":
		err = polybuild.CheckC()
	case "ts":
		err = polybuild.CheckTS(repo)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The payments of the newcomer's path (card, second of event time): the
// same as the SDKs' velocity tests. Card a's fourth payment in 60 s (at
// 30) alerts, and so do those at 60 and 61; b is forgotten by the timer
// 60 s after its last payment.
var velocityPayments = []struct {
	card string
	sec  int64
}{{"a", 0}, {"a", 10}, {"b", 15}, {"a", 20}, {"a", 30}, {"b", 40}, {"a", 60}, {"a", 61}, {"a", 121}}

// velocityBase is the event time of the first payment (ms): a real date,
// as a newcomer's payments have.
const velocityBase = 1_767_225_600_000 // 2026-01-01T00:00:00Z

var velocityAlerts = []string{"a=4", "a=4", "a=5"}

const velocityPipeline = `app_id: velocity
kafka:
  brokers: []
processors:
  - name: velocity
    plugin: velocity.wasm
    inputs: [payments]
    outputs:
      payments: payments-checked
      alerts: payment-alerts
    stores: [recent]
    on_error: dead_letter
`

// velocityCases is cases.yaml: every payment passes on, the alerts, and
// the store keeps only card a's last payment.
func velocityCases() string {
	var in, out strings.Builder
	for _, p := range velocityPayments {
		ts := velocityBase + p.sec*1000
		fmt.Fprintf(&in, "            - {key: %s, value: %s pays, timestamp: %d}\n", p.card, p.card, ts)
		fmt.Fprintf(&out, "              - {key: %s, value: %s pays, timestamp: %d}\n", p.card, p.card, ts)
	}
	var alerts strings.Builder
	for _, a := range velocityAlerts {
		k, v, _ := strings.Cut(a, "=")
		fmt.Fprintf(&alerts, "              - {key: %s, value: %q}\n", k, v)
	}
	last := velocityBase + velocityPayments[len(velocityPayments)-1].sec*1000
	return `cases:
  - name: a card's fourth payment in 60 s alerts, and every payment passes on
    steps:
      - pipe:
          topic: payments
          records:
` + in.String() + `      - commit
      - expect:
          outputs:
            payments-checked:
` + out.String() + `            payment-alerts:
` + alerts.String() + `          stores:
            velocity:
              recent: [{key: a, value_hex: "` + fmt.Sprintf("%016x", last) + `"}]
`
}

// runVelocity runs the pipeline on the embedded broker, produces the
// payments with topic produce and reads what came out with topic consume.
func runVelocity(t *testing.T, bin, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "-c", "pipeline.yaml")
	cmd.Dir, cmd.Env = dir, offlineEnv(filepath.Join(polybuild.Root(t), ".cache", "npm"))
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
			t.Logf("wasmstream run said:\n%s", logs.String())
		}
	}()

	// The run writes where its broker listens once it is up, and creates
	// the topics.
	testutil.Eventually(t, time.Minute, func() error {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("wasmstream run exited (%v):\n%s", err, logs.String())
		default:
		}
		// (state.dir's default, beside the config; checked first, for a
		// cheap wait while the run starts)
		if _, err := os.Stat(filepath.Join(dir, "wasmstream-state", "velocity.embedded-broker")); err != nil {
			return err
		}
		out, err := cliOutput(ctx, dir, "", bin, "topic", "list", "-c", "pipeline.yaml")
		if err != nil || !strings.Contains(out, "payment-alerts") || !strings.Contains(out, "payments-checked") {
			return fmt.Errorf("topic list: %v: %s", err, out)
		}
		return nil
	})

	var lines strings.Builder
	for _, p := range velocityPayments {
		fmt.Fprintf(&lines, `{"key":%q,"value":"%s pays","timestamp":%d}`+"\n", p.card, p.card, velocityBase+p.sec*1000)
	}
	if out, err := cliOutput(ctx, dir, lines.String(), bin, "topic", "produce", "payments", "-c", "pipeline.yaml", "--format", "json"); err != nil {
		t.Fatalf("topic produce: %v\n%s", err, out)
	}

	consume := func(topic string, n int) []string {
		t.Helper()
		out, err := cliOutput(ctx, dir, "", bin, "topic", "consume", topic, "-c", "pipeline.yaml",
			"--follow", "-n", fmt.Sprint(n), "--format", `%k=%v@%d\n`)
		if err != nil {
			t.Fatalf("topic consume %s: %v\n%s", topic, err, out)
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	// Every payment passed on, each card's in order (a card's payments
	// share a partition); the alerts, card a's.
	got := consume("payments-checked", len(velocityPayments))
	for _, card := range []string{"a", "b"} {
		var want, have []string
		for _, p := range velocityPayments {
			if p.card == card {
				want = append(want, fmt.Sprintf("%s=%s pays@%d", card, card, velocityBase+p.sec*1000))
			}
		}
		for _, g := range got {
			if strings.HasPrefix(g, card+"=") {
				have = append(have, g)
			}
		}
		if !slices.Equal(have, want) {
			t.Errorf("card %s passed on %q; want %q (all: %q)", card, have, want, got)
		}
	}
	var alerts []string
	for _, a := range consume("payment-alerts", len(velocityAlerts)) {
		alerts = append(alerts, a[:strings.Index(a, "@")])
	}
	t.Logf("topic consume: %d payments passed on, alerts %q", len(got), alerts)
	if !slices.Equal(alerts, velocityAlerts) {
		t.Errorf("alerts %q; want %q", alerts, velocityAlerts)
	}

	// Ctrl-C stops the run cleanly.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := <-exited; err != nil {
		t.Fatalf("wasmstream run after SIGINT: %v\n%s", err, logs.String())
	}
}

// cliOutput runs name in dir with stdin, in the user's offline
// environment, and returns its combined output.
func cliOutput(ctx context.Context, dir, stdin, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, offlineEnv("")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// velocityProject returns the files of the velocity project in lang (its
// processor and native test, taken from the SDK's own velocity test) and
// the processor's code.
func velocityProject(t *testing.T, repo, lang string) (files map[string]string, proc string) {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(repo, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// cut splits s at the marker line, which must be there.
	cut := func(s, marker string) (string, string) {
		before, after, ok := strings.Cut(s, marker)
		if !ok {
			t.Fatalf("no %q to split the velocity processor at", marker)
		}
		return before, after
	}
	replace := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("no %q to replace in the velocity processor", old)
		}
		return strings.ReplaceAll(s, old, new)
	}
	switch lang {
	case "go":
		src := read("sdk/internal/velocity/main.go")
		_, proc = cut(src, "\n)\n") // after the imports
		return map[string]string{"main.go": src, "main_test.go": read("sdk/internal/velocity/main_test.go")}, proc
	case "rust":
		src := read("sdk/rust/tests/velocity.rs")
		head, rest := cut(src, "// ---- the processor ----\n")
		proc, test := cut(rest, "// ---- its test ----\n")
		const testing = "use wasmstream::testing::{Host, Input};\n"
		head = replace(head, testing, "")
		test = "#[cfg(test)]\nmod tests {\nuse super::*;\n" + testing + test + "}\n"
		return map[string]string{"src/lib.rs": head + proc + test}, proc
	case "c":
		src := read("sdk/c/test/velocity_test.c")
		head, rest := cut(src, "/* ---- the processor ---- */\n")
		proc, test := cut(rest, "/* ---- its test ---- */\n")
		head = replace(head, `#include "check.h"`+"\n", "")
		head = replace(head, `#include "wasmstream_fake.h"`+"\n", `#include "wasmstream.h"`+"\n")
		// The test's last word on the processor's buffer stays with it.
		test = replace(test, "    ws_buf_free(&v);\n", "")
		testHead := "#include <stdio.h>\n#include <string.h>\n\n" + read("sdk/c/test/check.h") + `#include "wasmstream_fake.h"` + "\n"
		return map[string]string{"velocity.c": head + proc, "velocity_test.c": testHead + test}, proc
	case "ts":
		src := read("sdk/ts/test/velocity.ts")
		src = replace(src, `from "../exports"`, `from "./wasmstream-sdk/exports"`)
		src = replace(src, `from "../time-exports"`, `from "./wasmstream-sdk/time-exports"`)
		src = replace(src, `from "..";`, `from "./wasmstream-sdk";`)
		test := read("sdk/ts/test/velocity.test.mjs")
		test = replace(test, `from "../fake.mjs"`, `from "./wasmstream-sdk/fake.mjs"`)
		test = replace(test, `import { built } from "./helpers.mjs";`+"\n", "")
		test = replace(test, `await built("velocity")`, `new URL("./velocity.wasm", import.meta.url)`)
		_, proc = cut(src, "\n\n") // after the file's comment
		return map[string]string{"velocity.ts": src, "velocity.test.mjs": test}, proc
	}
	t.Fatalf("no velocity processor in %s", lang)
	return nil, ""
}

// codeLines counts the lines of src that are neither blank nor comments
// (a line comment, or a line of a block comment).
func codeLines(src string) int {
	n := 0
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") || strings.HasPrefix(l, "/*") || strings.HasPrefix(l, "*") {
			continue
		}
		n++
	}
	return n
}
