package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmgen"
)

// The compile budget's tests run the command line in a child (the test
// binary started again) under a 3 GB address-space cap, as `prlimit --as`
// would: a module that got past the budget could not take the machine's
// memory, only the child's.

func TestMain(m *testing.M) {
	testutil.RunChild(map[string]func() int{"cli": cliChild})
	os.Exit(m.Run())
}

const cliArgsEnv = "WASMSTREAM_TEST_CLI_ARGS"

// cliChild runs the command line in cliArgsEnv (a JSON array).
func cliChild() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(cliArgsEnv)), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return doMain(ctx, args, os.Stdout, os.Stderr, nil)
}

// runCapped runs the command line in a child under a 3 GB address-space
// cap.
func runCapped(t *testing.T, args ...string) testutil.ChildResult {
	t.Helper()
	b, _ := json.Marshal(args)
	return testutil.Child(t, "cli", 3<<30, 3*time.Minute, cliArgsEnv+"="+string(b))
}

// A compile bomb: 99,990 functions (the plugin's three and
// 99,987 more), each with 49,990 i64 locals and an empty body, 800 KB and
// inside every shape limit. wazero's decoder alone would take 40 GB.
var bombShape = wasmgen.Shape{Funcs: 99987, Locals: 49990, Plugin: true}

// The costliest modules FuzzCompileBudget (host/internal/engine) has
// inside the default budget: in time, one function whose 1,000 locals stay
// live across 2,500 ifs (21 KB; about 260 MB and 4.5 s of CPU to compile);
// in memory, 611,669 exports (6 MB; about 340 MB to compile or inspect).
var (
	worstShape        = wasmgen.Shape{Funcs: 1, Locals: 1000, Ops: 2500, OpKind: wasmgen.OpIf, Live: true, Plugin: true}
	worstExportsShape = wasmgen.Shape{Funcs: 1, Exports: 611669, Plugin: true}
)

// TestCompileBudgetEveryCommand: every command that compiles a module
// (plugin inspect, validate, deploy, run) refuses the compile bomb before
// compiling it, within the 3 GB cap, with a message that names the budget,
// the module's figure and the setting to raise; and compiles the costliest
// modules inside the budget within the same cap. A process following the
// control topic is host/internal/follower's TestCompileBombRefused.
func TestCompileBudgetEveryCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bomb := write("bomb.wasm", wasmgen.Module(bombShape))
	worst := write("worst.wasm", wasmgen.Module(worstShape))
	exports := write("exports.wasm", wasmgen.Module(worstExportsShape))
	config := func(name, appID, plugin, brokers string) string {
		return writeFile(t, dir, name, "app_id: "+appID+"\nkafka:\n  brokers: ["+brokers+"]\n"+
			"runtime: {cache_dir: \"off\"}\nstate: {dir: "+filepath.Join(dir, "state")+"}\n"+
			"processors:\n  - name: proc\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	}
	passthrough, _ := filepath.Abs(testdata("passthrough"))
	b := testbroker.New(t)
	// A name of its own on a real broker, whose control topics outlive the
	// test.
	deployCfg := config("deploy.yaml", b.Name(t, "budget"), passthrough, strings.Join(b.Addrs(), ","))
	bombCfg := config("bomb.yaml", "bomb", bomb, "")
	worstCfg := config("worst.yaml", "worst", worst, "")
	exportsCfg := config("exports.yaml", "exports", exports, "")

	lowCfg := writeFile(t, dir, "low.yaml", "app_id: low\nruntime: {module_limits: {compile_memory: 16MiB}}\n"+
		"processors:\n  - name: proc\n    plugin: "+passthrough+"\n    inputs: [in]\n    outputs: {out: out}\n")

	bombRefused := []string{"over the compile budget of 512 MiB (runtime.module_limits.compile_memory)",
		"4998450122 parameters and locals", "or raise runtime.module_limits.compile_memory"}
	for _, c := range []struct {
		args []string
		want []string // on stderr for a refusal, on stdout for success
		ok   bool
	}{
		{args: []string{"plugin", "inspect", bomb}, want: bombRefused},
		{args: []string{"validate", "-c", bombCfg}, want: bombRefused},
		{args: []string{"deploy", "-c", deployCfg, "proc", bomb}, want: bombRefused},
		{args: []string{"run", "-c", bombCfg}, want: bombRefused},
		{args: []string{"plugin", "inspect", worst}, want: []string{"abi version:  1"}, ok: true},
		{args: []string{"validate", "-c", worstCfg}, want: []string{": ok (1 processor)"}, ok: true},
		{args: []string{"deploy", "-c", deployCfg, "proc", worst}, want: []string{"deployed proc worst@"}, ok: true},
		{args: []string{"plugin", "inspect", exports}, want: []string{"exports (611673):"}, ok: true},
		{args: []string{"validate", "-c", exportsCfg}, want: []string{": ok (1 processor)"}, ok: true},
		// inspect -c applies the config's budget.
		{args: []string{"plugin", "inspect", "-c", lowCfg, worst}, want: []string{"over the compile budget of 16 MiB (runtime.module_limits.compile_memory)"}},
	} {
		res := runCapped(t, c.args...)
		t.Logf("%s: %v", strings.Join(c.args[:min(len(c.args), 2)], " "), res)
		out, code := res.Stderr, exitError
		if c.ok {
			out, code = res.Stdout, exitOK
		}
		for _, w := range c.want {
			if res.Code != code || !strings.Contains(out, w) {
				t.Errorf("%v: %v, stdout %q; want exit %d saying %q", c.args, res, res.Stdout, code, w)
			}
		}
		if !c.ok && res.MaxRSS > 512<<20 {
			// Refused before compiling: nothing close to the budget.
			t.Errorf("%v: peak RSS %d MiB for a refusal", c.args, res.MaxRSS>>20)
		}
	}
}
