package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

func TestResetCommand(t *testing.T) {
	b := testbroker.New(t)
	in := b.Name(t, "in")
	b.CreateTopic(t, in, 2, nil)
	plugin, _ := filepath.Abs(testdata("passthrough"))
	conf := writeFile(t, t.TempDir(), "pipeline.yaml", "app_id: "+b.Name(t, "app")+"\nkafka:\n  brokers: ["+strings.Join(b.Addrs(), ",")+"]\n"+
		"runtime: {cache_dir: \"off\"}\nprocessors:\n  - name: proc\n    plugin: "+plugin+"\n    inputs: ["+in+"]\n    outputs: {out: out}\n")
	for _, args := range [][]string{
		{"reset", "-c", conf},
		{"reset", "-c", conf, "--to-earliest", "--to-latest"},
		{"reset", "-c", conf, "--to-time", "yesterday"},
		{"reset", "-c", conf, "--to-offset", "-3"},
		{"reset", "--to-earliest"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
	code, out, errs := runCLI(t, "reset", "-c", conf, "--to-offset", "5", "--dry-run")
	if code != exitOK || !strings.Contains(out, "would commit group ") || !strings.Contains(out, in+": 0@0 1@0") || !strings.Contains(out, "dry run: nothing changed") {
		t.Fatalf("reset --dry-run: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "reset", "-c", conf, "--to-time", "2026-01-02T15:04:05Z")
	if code != exitOK || !strings.Contains(out, "commit group ") || !strings.Contains(out, "the next run processes the inputs") {
		t.Fatalf("reset: exit %d, %q, %q", code, out, errs)
	}
}
