// Package wasmbuild builds Go plugins to WebAssembly from tests and tools,
// the way users build them:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o p.wasm <pkg>
//
// Linking one Go plugin takes seconds, so Build caches each package's
// module for the life of the test process: every test that needs the
// passthrough plugin shares one build.
package wasmbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Build builds the Go package pkg (an import path, or a path relative to
// the module root such as "./plugins/passthrough") for wasip1 and returns
// the .wasm file's path. The first call for a package builds it; later
// calls in the same process return the same file. A failed build fails tb
// with the compiler's output, and fails every later Build of that package
// the same way. The file must not be modified.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	p, err := cached(pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*result{}
)

func cached(pkg string) (string, error) {
	cacheMu.Lock()
	r := cache[pkg]
	if r == nil {
		r = &result{}
		cache[pkg] = r
	}
	cacheMu.Unlock()
	r.once.Do(func() {
		r.path, r.err = buildCached(pkg)
	})
	return r.path, r.err
}

// buildCached builds into the checkout's own .cache/wasmbuild, at a path
// derived from the package, so the space used is one file per plugin
// however many test processes run, and it goes with the checkout (under
// the system temp directory every fresh clone's builds stayed behind).
// Writers build to a temporary name and rename, so parallel test
// processes (go test ./... runs packages concurrently) never see a torn
// file.
func buildCached(pkg string) (string, error) {
	root, err := ModuleRoot(context.Background())
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "wasmbuild")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	sum := sha256.Sum256([]byte(pkg))
	out := filepath.Join(dir, Name(pkg)+"-"+hex.EncodeToString(sum[:6])+".wasm")
	if err := BuildTo(context.Background(), pkg, out); err != nil {
		return "", err
	}
	if err := consultSources(context.Background(), root, pkg); err != nil {
		return "", err
	}
	return out, nil
}

// consultSources stats every Go file of the module that pkg is built from.
// go test caches a test's result unless a file the test process itself
// consulted changed; the compiler runs in a subprocess, so without this a
// change to a plugin would not rerun the tests that build it.
func consultSources(ctx context.Context, root, pkg string) error {
	const format = `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", format, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("wasmbuild: go list -deps %s: %w\n%s", pkg, err, stderr.String())
	}
	files := append(strings.Split(strings.TrimSpace(string(out)), "\n"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		os.Stat(f) // the result does not matter; the consultation does
	}
	return nil
}

// Name is the file name (without .wasm) a package builds to: the last
// element of its path.
func Name(pkg string) string {
	return path.Base(strings.TrimSuffix(filepath.ToSlash(pkg), "/"))
}

// BuildTo builds pkg for wasip1 as a reactor (c-shared) module and writes
// it to outPath, atomically: outPath is replaced only by a complete module.
// The build runs in the module root, so pkg may be relative to it. The
// error includes the go command's output.
func BuildTo(ctx context.Context, pkg, outPath string) error {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(outPath)
	if err != nil {
		return fmt.Errorf("wasmbuild: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*.tmp")
	if err != nil {
		return fmt.Errorf("wasmbuild: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // no-op after the rename

	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false",
		"-o", tmp.Name(), pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("wasmbuild: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared %s (in %s): %w\n%s",
			pkg, root, err, strings.TrimSpace(output.String()))
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return fmt.Errorf("wasmbuild: %w", err)
	}
	return nil
}

// ModuleRoot is the directory of the main module's go.mod, as the go
// command sees it from the working directory.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("wasmbuild: go env GOMOD: %w\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("wasmbuild: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("wasmbuild: not inside a Go module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}
