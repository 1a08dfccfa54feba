package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// TestInspectMaxModuleSize: plugin inspect refuses a module over
// runtime.max_module_size (from -c or --max-module-size, else the default)
// before reading it.
func TestInspectMaxModuleSize(t *testing.T) {
	dir := t.TempDir()
	plugin, _ := filepath.Abs(testdata("passthrough"))
	small := writeFile(t, dir, "small.yaml", "app_id: a\nruntime:\n  max_module_size: 1KiB\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n")
	big := append(make([]byte, 0, 65<<20), "\x00asm\x01\x00\x00\x00"...)
	big = append(big, make([]byte, 65<<20)...)
	bigFile := filepath.Join(dir, "big.wasm")
	if err := os.WriteFile(bigFile, big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plugin", "inspect", "--max-module-size", "100", plugin}, exitError, "over runtime.max_module_size (100)"},
		{[]string{"plugin", "inspect", "--max-module-size", "1MiB", plugin}, exitOK, ""},
		{[]string{"plugin", "inspect", "-c", small, bigFile}, exitError, "over runtime.max_module_size (1KiB)"},
		{[]string{"plugin", "inspect", bigFile}, exitError, "over runtime.max_module_size (64MiB)"},
		{[]string{"plugin", "inspect", "--max-module-size", "lots", plugin}, exitUsage, "not a size"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestInspectStopsOnSignal: a SIGTERM (the context main cancels) during the
// compilation of a large plugin ends plugin inspect at once.
func TestInspectStopsOnSignal(t *testing.T) {
	plugin := wasmbuild.Build(t, "./plugins/passthrough")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	start := time.Now()
	code := doMain(ctx, []string{"plugin", "inspect", plugin}, &out, &errb, nil)
	took := time.Since(start)
	if code != exitError || !strings.Contains(errb.String(), "canceled") {
		t.Fatalf("exit %d after %v, stderr %q; want a canceled compilation", code, took, errb.String())
	}
	t.Logf("stopped %v after start", took)
	if took > 2*time.Second {
		t.Errorf("inspect took %v to stop", took)
	}
}

// TestValidateStopsOnSignal: the same for validate, which compiles every
// plugin of the config.
func TestValidateStopsOnSignal(t *testing.T) {
	plugin := wasmbuild.Build(t, "./plugins/passthrough")
	cfg := writeFile(t, t.TempDir(), "p.yaml", "app_id: a\nprocessors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: [in]\n    outputs: {out: out}\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	start := time.Now()
	code := doMain(ctx, []string{"validate", "-c", cfg}, &out, &errb, nil)
	took := time.Since(start)
	if code != exitError || !strings.Contains(errb.String(), "canceled") {
		t.Fatalf("exit %d after %v, stderr %q; want a canceled compilation", code, took, errb.String())
	}
	t.Logf("stopped %v after start", took)
	if took > 2*time.Second {
		t.Errorf("validate took %v to stop", took)
	}
}
