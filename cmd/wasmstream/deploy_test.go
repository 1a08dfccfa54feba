package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// shortHash is the hash prefix of a version ID.
func shortHash(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// deployConfig writes a one-processor config ("proc", the passthrough
// plugin) on b; with b nil, kafka.brokers is empty.
func deployConfig(t *testing.T, b *testbroker.Broker) (path, appID string) {
	plugin, _ := filepath.Abs(testdata("passthrough"))
	appID, brokers := "deploy-cli", ""
	if b != nil {
		appID, brokers = b.Name(t, "app"), strings.Join(b.Addrs(), ",")
	}
	return writeFile(t, t.TempDir(), "pipeline.yaml", "app_id: "+appID+"\nkafka:\n  brokers: ["+brokers+"]\nruntime: {cache_dir: \"off\"}\n"+
		"processors:\n  - name: proc\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n"), appID
}

func TestDeployAndRollbackCommands(t *testing.T) {
	b := testbroker.New(t)
	cfg, appID := deployConfig(t, b)
	v1, v2 := "config@"+shortHash(t, testdata("passthrough")), "trap@"+shortHash(t, testdata("trap"))

	// The label defaults to the file's base name; flags may follow the
	// positionals.
	code, out, errs := runCLI(t, "deploy", "proc", testdata("trap"), "-c", cfg)
	want := regexp.MustCompile(`^deployed proc ` + v2 + ` to ` + appID + `-plugins at offset [0-9]+ \(was ` + v1 +
		`\); running processes switch at their next commit point\n$`)
	if code != exitOK || !want.MatchString(out) {
		t.Fatalf("deploy: exit %d, stdout %q, stderr %q; want %s", code, out, errs, want)
	}

	// Again: nothing to do, and not an error.
	code, out, errs = runCLI(t, "deploy", "-c", cfg, "proc", testdata("trap"), "--label", "other")
	if code != exitOK || !strings.Contains(out, "proc already runs "+v2) || !strings.Contains(out, "nothing to deploy") {
		t.Fatalf("deploy of the active version: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	code, out, errs = runCLI(t, "rollback", "-c", cfg, "proc")
	want = regexp.MustCompile(`^rolled back proc to ` + v1 + ` in ` + appID + `-plugins at offset [0-9]+ \(was ` + v2 +
		`\); running processes switch at their next commit point\n$`)
	if code != exitOK || !want.MatchString(out) {
		t.Fatalf("rollback: exit %d, stdout %q, stderr %q; want %s", code, out, errs, want)
	}
	code, out, errs = runCLI(t, "rollback", "-c", cfg, "proc")
	if code != exitError || out != "" || !strings.Contains(errs, "wasmstream rollback: processor \"proc\" runs "+v1+" and has no previous version") {
		t.Fatalf("rollback with no previous version: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// --label "" leaves the version unlabeled.
	code, out, errs = runCLI(t, "deploy", "-c", cfg, "proc", testdata("loop"), "--label", "")
	if code != exitOK || !strings.Contains(out, "deployed proc "+shortHash(t, testdata("loop"))+" to ") {
		t.Fatalf("deploy without label: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestDeployCommandRefusals(t *testing.T) {
	b := testbroker.New(t)
	cfg, _ := deployConfig(t, b)
	embedded, _ := deployConfig(t, nil)
	notWasm := writeFile(t, t.TempDir(), "notes.wasm", "hello, not wasm")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "-c", cfg, "proc", "/no/such/file.wasm"}, "no such file"},
		{[]string{"deploy", "-c", cfg, "proc", notWasm}, `processor "proc" cannot run this module (nothing published)`},
		{[]string{"deploy", "-c", cfg, "proc", testdata("abi3")}, "unsupported ABI version"},
		{[]string{"deploy", "-c", cfg, "proc", testdata("missingprocess")}, "missing export: wasmstream_process"},
		{[]string{"deploy", "-c", cfg, "proc", testdata("inittrap")}, "init trapped"},
		{[]string{"deploy", "-c", cfg, "nope", testdata("trap")}, `unknown processor "nope"; the config's processors: proc`},
		{[]string{"deploy", "-c", embedded, "proc", testdata("trap")}, "kafka.brokers is empty"},
		{[]string{"rollback", "-c", cfg, "proc"}, "nothing deployed"},
		{[]string{"rollback", "-c", cfg, "nope"}, `unknown processor "nope"`},
		{[]string{"rollback", "-c", embedded, "proc"}, "kafka.brokers is empty"},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != exitError || out != "" || !strings.Contains(errs, c.want) || !strings.HasPrefix(errs, "wasmstream "+c.args[0]+": ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.args, code, out, errs, c.want)
		}
	}
}

func TestDeployUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"deploy"},
		{"deploy", "proc", "x.wasm"},              // no -c
		{"deploy", "-c", "p.yaml", "proc"},        // no file
		{"deploy", "-c", "p.yaml", "a", "b", "c"}, // one too many
		{"deploy", "-c", "p.yaml", "--nope", "proc", "x.wasm"},
		{"rollback", "-c", "p.yaml"},
		{"rollback", "-c", "p.yaml", "a", "b"},
		{"rollback", "proc"},
		{"deploy", "-c", "p.yaml", "proc", "x.wasm", "--shadow", "--shadow-first", "1s"},
		{"deploy", "-c", "p.yaml", "proc", "x.wasm", "--shadow", "--no-shadow-first"},
		{"deploy", "-c", "p.yaml", "proc", "x.wasm", "--shadow-first", "1s", "--no-shadow-first"},
		{"deploy", "-c", "p.yaml", "proc", "x.wasm", "--shadow-first", "1s", "--max-diff-ratio", "2"},
		{"shadow"},
		{"shadow", "status"},
		{"shadow", "stop", "-c", "p.yaml"},
		{"shadow", "start", "-c", "p.yaml", "proc"},
	} {
		if code, out, errs := runCLI(t, args...); code != exitUsage || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errs)
		}
	}
}

// deploy and rollback wait for unreachable brokers as run does, up to
// kafka.connect_timeout, and then say so naming the brokers and the
// setting.
func TestDeployUnreachableBrokers(t *testing.T) {
	plugin, _ := filepath.Abs(testdata("passthrough"))
	cfg := writeFile(t, t.TempDir(), "pipeline.yaml", "app_id: a\nkafka:\n  brokers: [127.0.0.1:1]\n  connect_timeout: 1s\n"+
		"runtime: {cache_dir: \"off\"}\nprocessors:\n  - {name: proc, plugin: "+plugin+", inputs: [in], outputs: {out: out}}\n")
	for _, args := range [][]string{{"deploy", "-c", cfg, "proc", plugin}, {"rollback", "-c", cfg, "proc"}} {
		code, _, errs := runCLI(t, args...)
		if code != exitError || !strings.Contains(errs, "cannot reach Kafka at 127.0.0.1:1 (gave up after 1s") || !strings.Contains(errs, "kafka.connect_timeout") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func TestPauseAndResumeCommands(t *testing.T) {
	b := testbroker.New(t)
	cfg, appID := deployConfig(t, b)
	code, out, errs := runCLI(t, "resume", "-c", cfg, "proc")
	if code != exitError || !strings.Contains(errs, "wasmstream resume: nothing deployed") {
		t.Fatalf("resume before any control topic: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		want *regexp.Regexp
	}{
		{[]string{"pause", "-c", cfg, "proc"}, exitOK, regexp.MustCompile(`^paused proc in ` + appID + `-plugins at offset [0-9]+; running processes apply it at their next commit point\n$`)},
		{[]string{"pause", "proc", "-c", cfg}, exitOK, regexp.MustCompile(`^processor "proc" is paused since \S+ by \S+: nothing published\n$`)},
		{[]string{"resume", "-c", cfg, "proc"}, exitOK, regexp.MustCompile(`^resumed proc in ` + appID + `-plugins at offset [0-9]+; running processes apply it at their next commit point\n$`)},
		{[]string{"resume", "-c", cfg, "proc"}, exitOK, regexp.MustCompile(`^processor "proc" is not paused: nothing published\n$`)},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != c.code || !c.want.MatchString(out) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want %s", c.args, code, out, errs, c.want)
		}
	}
	embedded, _ := deployConfig(t, nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "-c", cfg, "nope"}, `unknown processor "nope"`},
		{[]string{"pause", "-c", embedded, "proc"}, "kafka.brokers is empty"},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != exitError || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.args, code, out, errs, c.want)
		}
	}
	for _, args := range [][]string{{"pause", "-c", cfg}, {"resume", "-c", cfg, "a", "b"}, {"pause", "proc"}} {
		if code, out, errs := runCLI(t, args...); code != exitUsage || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errs)
		}
	}
}

// deploy --shadow publishes a shadow and deploys nothing; shadow status
// reads it (no process runs here: no one reports it); shadow stop ends it
// once; --shadow-first with no process to run it refuses the candidate for
// comparing no record, and publishes no version.
func TestShadowCommands(t *testing.T) {
	b := testbroker.New(t)
	cfg, appID := deployConfig(t, b)
	code, out, errs := runCLI(t, "deploy", "-c", cfg, "proc", testdata("trap"), "--shadow")
	if code != exitOK || !strings.Contains(out, "shadow of proc started from") {
		t.Fatalf("deploy --shadow: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "shadow", "status", "-c", cfg, "proc")
	if code != exitOK || !strings.Contains(out, "shadow of proc: version trap@"+shortHash(t, testdata("trap"))) ||
		!strings.Contains(out, "no process reports it") || !strings.Contains(out, "0 processes, no record compared yet") {
		t.Fatalf("shadow status: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = runCLI(t, "shadow", "stop", "-c", cfg, "proc"); code != exitOK || !strings.Contains(out, "stopped the shadow of proc") {
		t.Fatalf("shadow stop: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs = runCLI(t, "shadow", "stop", "-c", cfg, "proc"); code != exitError || !strings.Contains(errs, "no shadow of the processor runs") {
		t.Fatalf("second shadow stop: exit %d, stderr %q", code, errs)
	}
	code, out, errs = runCLI(t, "deploy", "-c", cfg, "proc", testdata("trap"), "--shadow-first", "1s")
	if code != exitError || !strings.Contains(errs, "refused after its shadow run: its shadow run compared no record") ||
		!strings.Contains(errs, "nothing of it was committed") {
		t.Fatalf("deploy --shadow-first with no process: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Nothing was deployed: the control topic has no version of proc.
	if code, _, errs = runCLI(t, "rollback", "-c", cfg, "proc"); code != exitError || !strings.Contains(errs, "nothing deployed") {
		t.Fatalf("rollback after a refused shadow-first: exit %d, stderr %q (app %s)", code, errs, appID)
	}
}

// On the embedded development broker, deploy and rollback find the
// running process's broker through -c alone, as the topic commands do,
// and the process swaps to what they publish; once it has stopped, they
// say to start it.
func TestDeployOnEmbeddedBroker(t *testing.T) {
	dir := t.TempDir()
	plugin, _ := filepath.Abs(testdata("passthrough"))
	cfg := writeFile(t, dir, "pipeline.yaml", "app_id: deploy-embedded\nkafka:\n  commit_interval: 20ms\nruntime: {cache_dir: \"off\"}\n"+
		"processors:\n  - name: proc\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	stderr, stop := startRun(t, cfg, "msg=running")

	v2 := "trap@" + shortHash(t, testdata("trap"))
	code, out, errs := runCLI(t, "deploy", "-c", cfg, "proc", testdata("trap"))
	if code != exitOK || !strings.Contains(out, v2) {
		t.Fatalf("deploy: exit %d, stdout %q, stderr %q; want %s deployed", code, out, errs, v2)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(stderr.String(), v2) {
			return fmt.Errorf("the run has not taken %s; stderr:\n%s", v2, stderr.String())
		}
		return nil
	})
	if code, out, errs := runCLI(t, "rollback", "-c", cfg, "proc"); code != exitOK {
		t.Fatalf("rollback: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	if code := stop(); code != exitOK {
		t.Fatalf("run exit %d: %s", code, stderr.String())
	}
	code, _, errs = runCLI(t, "deploy", "-c", cfg, "proc", testdata("trap"))
	if code != exitError || !strings.Contains(errs, "no wasmstream run of this config is running") || !strings.Contains(errs, "start wasmstream run") {
		t.Errorf("deploy after the run: exit %d, %s", code, errs)
	}
}
