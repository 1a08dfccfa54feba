package wasmstream

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestSDKEmbedsEveryFile: SDK holds every file a generated project needs,
// byte for byte as in the tree. Go: every source file (whatever its build
// tags) of every package of this module that the SDK's packages depend
// on, on any platform; Rust: the crate's Cargo.toml and all of src/; C:
// the .c and .h files of sdk/c; TypeScript: the files of sdk/ts but its
// tests, node_modules and README. A package or file the patterns in
// embed.go miss fails here, not in a user's build.
func TestSDKEmbedsEveryFile(t *testing.T) {
	want := map[string]bool{"go.mod": true}
	for _, goos := range []string{"", "wasip1"} {
		for _, f := range goSources(t, goos) {
			want[f] = true
		}
	}
	err := filepath.WalkDir("sdk/rust/src", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			want[filepath.ToSlash(path)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want["sdk/rust/Cargo.toml"] = true
	for _, glob := range []string{"sdk/c/*.c", "sdk/c/*.h"} {
		m, _ := filepath.Glob(glob)
		if len(m) == 0 {
			t.Fatalf("no %s: the C SDK moved?", glob)
		}
		for _, f := range m {
			want[filepath.ToSlash(f)] = true
		}
	}
	// TypeScript: every file of sdk/ts but its tests, its node_modules and
	// its README (the SDK's documentation, not a source).
	err = filepath.WalkDir("sdk/ts", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "test") {
			return filepath.SkipDir
		}
		if !d.IsDir() && path != filepath.Join("sdk", "ts", "README.md") {
			want[filepath.ToSlash(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for f := range want {
		got, err := fs.ReadFile(SDK, f)
		if err != nil {
			missing = append(missing, f)
			continue
		}
		disk, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, disk) {
			t.Errorf("%s: the embedded copy differs from the file", f)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("embed.go's patterns miss %d SDK files (add a pattern):\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
}

// goSources lists the module-relative Go source files, test files aside,
// of the module's packages that ./sdk/... needs for GOOS goos ("" native).
func goSources(t *testing.T, goos string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and (not .Standard) .Module}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .IgnoredGoFiles}} {{.}}{{end}}{{end}}`, "./sdk/...")
	cmd.Env = os.Environ()
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH=wasm")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dir, err := filepath.Rel(root, fields[0])
		if err != nil || strings.HasPrefix(dir, "..") {
			t.Fatalf("package directory %s is outside the module", fields[0])
		}
		for _, f := range fields[1:] {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, filepath.ToSlash(filepath.Join(dir, f)))
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("go list found no SDK sources")
	}
	return files
}
