package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// TestInitProjectsRunAsGenerated generates a project in every language,
// runs its native test and its build with the generated Makefile, and
// validates the generated pipeline.yaml, which compiles the module and
// runs its init in the host's engine.
func TestInitProjectsRunAsGenerated(t *testing.T) {
	root := polybuild.Root(t)
	for _, lang := range []string{"go", "rust", "c"} {
		t.Run(lang, func(t *testing.T) {
			switch lang {
			case "rust":
				if err := polybuild.CheckRust(); err != nil {
					t.Fatal(err)
				}
			case "c":
				if err := polybuild.CheckC(); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(t.TempDir(), "proj")
			name := "my-" + lang + "-proc"
			code, out, errs := runCLI(t, "init", name, "--lang", lang, "--dir", dir, "--sdk", root)
			if code != exitOK || !strings.Contains(out, "wrote "+dir) {
				t.Fatalf("init: exit %d: %s %s", code, out, errs)
			}
			for _, goal := range []string{"test", ""} {
				args := []string{"-C", dir}
				if goal != "" {
					args = append(args, goal)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				cmd := exec.CommandContext(ctx, "make", args...)
				b, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("make %s in the generated %s project: %v\n%s", goal, lang, err, b)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, strings.ReplaceAll(name, "-", "_")+".wasm")); err != nil {
				t.Fatalf("make built no module: %v", err)
			}
			code, out, errs = runCLI(t, "validate", "-c", filepath.Join(dir, "pipeline.yaml"))
			if code != exitOK || !strings.Contains(out, "ok (1 processors)") {
				t.Fatalf("validate the generated pipeline: exit %d: %s %s", code, out, errs)
			}
		})
	}
}

func TestInitErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"init"}, {"init", "x"}, {"init", "x", "--lang", "java"}, {"init", "Bad Name", "--lang", "c"}} {
		if code, _, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want usage error", args, code)
		}
	}
	if code, _, errs := runCLI(t, "init", "p", "--lang", "c", "--dir", filepath.Join(dir, "p"), "--sdk", dir); code != exitError ||
		!strings.Contains(errs, "is not a wasmstream checkout") {
		t.Errorf("bad --sdk: exit %d, %s", code, errs)
	}
	// Discovered from the working directory (this test runs inside the checkout).
	target := filepath.Join(dir, "q")
	if code, out, errs := runCLI(t, "init", "q", "--lang", "c", "--dir", target); code != exitOK ||
		!strings.Contains(out, "SDK at "+polybuild.Root(t)) {
		t.Fatalf("discovery: exit %d: %s %s", code, out, errs)
	}
	// Never over an existing project.
	if code, _, errs := runCLI(t, "init", "q", "--lang", "c", "--dir", target); code != exitError || !strings.Contains(errs, "not empty") {
		t.Errorf("second init into %s: exit %d, %s", target, code, errs)
	}
}
