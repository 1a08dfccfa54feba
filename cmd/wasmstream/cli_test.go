package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// TestHelpForEveryCommand: every command and subcommand answers -h,
// --help and `wasmstream help CMD` with exit 0 on stdout: its one-line
// description, usage, flags (when it has any) and examples.
func TestHelpForEveryCommand(t *testing.T) {
	withFlags := map[string]bool{"run": true, "validate": true, "state dump": true, "deploy": true, "rollback": true, "pause": true, "resume": true, "query": true, "demo": true, "init": true, "plugin inspect": true,
		"plugin sign": true, "plugin keygen": true, "reset": true, "replay": true,
		"topic produce": true, "topic consume": true, "topic list": true, "topic create": true, "topic describe": true,
		"test": true}
	for _, d := range docs {
		words := strings.Fields(d.name)
		for _, args := range [][]string{append(append([]string{}, words...), "--help"), append(append([]string{}, words...), "-h"), append([]string{"help"}, words...)} {
			code, out, errs := runCLI(t, args...)
			if code != exitOK || errs != "" {
				t.Errorf("%q: exit %d, stderr %q; want exit 0 and help on stdout", args, code, errs)
				continue
			}
			for _, want := range []string{"wasmstream " + d.name + ": " + d.summary + "\n", "Usage:\n  " + d.usage, "Examples:\n  "} {
				if !strings.Contains(out, want) {
					t.Errorf("%q: help lacks %q:\n%s", args, want, out)
				}
			}
			if withFlags[d.name] != strings.Contains(out, "\nFlags:\n") {
				t.Errorf("%q: flags listed = %v, want %v:\n%s", args, !withFlags[d.name], withFlags[d.name], out)
			}
		}
		if strings.Contains(d.summary, "\n") || d.summary == "" || strings.HasSuffix(d.summary, ".") {
			t.Errorf("%s: summary %q is not one line without a final period", d.name, d.summary)
		}
	}
	// The command list names every visible command.
	code, out, _ := runCLI(t, "help")
	if code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	for _, d := range docs {
		if !d.hidden && !strings.Contains(out, "  "+d.name+" ") {
			t.Errorf("help does not list %s:\n%s", d.name, out)
		}
	}
	if code, _, errs := runCLI(t, "help", "frobnicate"); code != exitUsage || !strings.Contains(errs, `no command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, %q", code, errs)
	}
	// run --help lists the embedded broker's port flag and the config flags.
	_, out, _ = runCLI(t, "run", "--help")
	for _, want := range []string{"--embedded-port", "--brokers", "-c, --config"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %s:\n%s", want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		for _, re := range []string{`(?m)^wasmstream \S+$`, `(?m)^commit: +\S+`, `(?m)^go: +go1\.\d+`, `(?m)^wazero: +v1\.\d+\.\d+`, `(?m)^franz-go: +v1\.\d+\.\d+`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%v: output does not match %s:\n%s", args, re, out)
			}
		}
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", code, exitUsage)
	}
}

// TestRunFromEnvironmentAlone: `run` with no -c takes the whole config,
// processors included (by index), from WASMSTREAM_* variables, and
// --embedded-port puts the development broker on the port asked for;
// log.format json makes every log line a JSON object.
func TestRunFromEnvironmentAlone(t *testing.T) {
	plugin, _ := filepath.Abs(testdata("passthrough"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	environ := []string{
		"WASMSTREAM_APP_ID=envonly",
		"WASMSTREAM_STATE__DIR=" + t.TempDir(),
		"WASMSTREAM_RUNTIME__CACHE_DIR=off",
		"WASMSTREAM_PROCESSORS__0__NAME=p",
		"WASMSTREAM_PROCESSORS__0__PLUGIN=" + plugin,
		"WASMSTREAM_PROCESSORS__0__INPUTS=in-a,in-b",
		"WASMSTREAM_PROCESSORS__0__OUTPUTS__OUT=out",
		"WASMSTREAM_LOG__FORMAT=json",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- doMain(ctx, []string{"run", "--embedded-port", strconv.Itoa(port)}, &stdout, &stderr, environ)
	}()
	want := "DEVELOPMENT MODE: embedded Kafka at 127.0.0.1:" + strconv.Itoa(port) + " "
	testutil.Eventually(t, 30*time.Second, func() error {
		select {
		case code := <-done:
			t.Fatalf("run exited %d: %s", code, stderr.String())
		default:
		}
		if s := stderr.String(); !strings.Contains(s, `"msg":"running"`) {
			return fmt.Errorf("not running; stderr:\n%s", s)
		}
		return nil
	})
	if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), `"processors":1`) {
		t.Errorf("stderr lacks %q or \"processors\":1:\n%s", want, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.HasPrefix(line, "wasmstream: DEVELOPMENT MODE") {
			continue // the notice is for the operator, not a log line
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("log.format json: line is not JSON: %q", line)
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}

	// A gap in the indices is named.
	code, _, errs := runCLIEnv(t, []string{"WASMSTREAM_APP_ID=x", "WASMSTREAM_PROCESSORS__1__NAME=p"}, "run")
	if code != exitError || !strings.Contains(errs, "processors[1]: set by the environment, but processors has 0 elements") {
		t.Errorf("gap: exit %d, %s", code, errs)
	}
}

func runCLIEnv(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := doMain(ctx, args, &out, &errb, environ)
	return code, out.String(), errb.String()
}

// TestDemoHintsWork: the demo's closing hint is a command that works: with
// --keep it names the kept config, and running it prints the store.
func TestDemoHintsWork(t *testing.T) {
	keep := t.TempDir()
	code, out, errs := runCLI(t, "demo", "--keep", keep)
	if code != exitOK {
		t.Fatalf("demo exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`(?m)^Look inside host 3's store, offline: wasmstream (state dump -c \S+ --store \S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo --keep prints no state dump hint:\n%s", out)
	}
	code, dump, errs := runCLI(t, strings.Fields(m[1])...)
	if code != exitOK {
		t.Fatalf("the hint %q: exit %d: %s", m[1], code, errs)
	}
	for _, want := range []string{"the", "6", "end"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the hint's dump lacks %q:\n%s", want, dump)
		}
	}
}
