package ownmodule

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
)

// TestProcessorInOwnModule follows docs/processor-module.md: a new module
// outside the repository, the page's main.go and main_test.go, go mod
// tidy, go test, the wasip1 build, and the host's own check of the module.
func TestProcessorInOwnModule(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "processor-module.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := regexp.MustCompile("(?s)```go file=(\\S+)\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(files) != 2 {
		t.Fatalf("docs/processor-module.md has %d files, want main.go and main_test.go", len(files))
	}
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[1]), []byte(f[2]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(nil, "mod", "init", "example.com/uppercase")
	run(nil, "mod", "edit", "-require", "github.com/wasmstream/wasmstream@v0.0.0", "-replace", "github.com/wasmstream/wasmstream="+root)
	run(nil, "mod", "tidy")
	run(nil, "test", "./...")
	run([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "uppercase.wasm", ".")
	wasm, err := os.ReadFile(filepath.Join(dir, "uppercase.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := host.InspectPlugin(ctx, wasm)
	if err != nil {
		t.Fatalf("the module the page builds is refused: %v", err)
	}
	if info.ABIVersion != 2 || len(info.ABIVersions) != 2 {
		t.Fatalf("ABI version %d of %v, want 2 of [1 2] (the Go SDK speaks both)", info.ABIVersion, info.ABIVersions)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if strings.Count(string(gomod), "require") != 1 || strings.Contains(string(gomod), "franz-go") || strings.Contains(string(gomod), "pebble") {
		t.Errorf("the processor's module needs more than the SDK:\n%s", gomod)
	}
}
