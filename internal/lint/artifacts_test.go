package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build outputs stay out of git: a committed binary is stale as soon as its
// sources change, and bloats every clone for good. The only binaries
// tracked are fixtures that a test rebuilds from their sources and compares
// byte for byte, listed here with that test.
var fixtures = []struct {
	glob    string // module-relative, as filepath.Match reads it
	checked string // the test that rebuilds them and compares
}{
	{"internal/demo/plugins/*.wasm", "TestDemoPluginsMatchSources"},
	{"host/internal/engine/testdata/*.wasm", "TestEngineFixturesMatchSources"},
	{"host/internal/conformance/testdata/*.wasm", "TestConformanceFixturesMatchSources"},
}

// maxTracked bounds any other tracked file (the largest source file is
// about 100 KB): a larger one is almost surely an output or a data dump.
const maxTracked = 1 << 20

// binaryMagic are the first bytes of executables and Wasm modules.
var binaryMagic = [][]byte{
	[]byte("\x7fELF"),
	[]byte("\x00asm"),
	[]byte("MZ"),
	{0xcf, 0xfa, 0xed, 0xfe}, // Mach-O 64-bit
	{0xce, 0xfa, 0xed, 0xfe}, // Mach-O 32-bit
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// trackedFiles are the files git tracks under root, module-relative.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (this test needs a git checkout)", root, err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files in %s; want the whole repository", len(files), root)
	}
	return files
}

func isFixture(rel string) bool {
	for _, f := range fixtures {
		if ok, _ := filepath.Match(f.glob, rel); ok {
			return true
		}
	}
	return false
}

// TestNoTrackedBuildOutputs fails when git tracks a binary, a .wasm or an
// oversized file that is not a fixture checked against its sources.
func TestNoTrackedBuildOutputs(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range trackedFiles(t, root) {
		if isFixture(rel) {
			continue
		}
		path := filepath.Join(root, rel)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		const fix = "remove it with `git rm --cached` and ignore it in .gitignore, or make it a fixture that a test checks against its sources (internal/lint/artifacts_test.go)"
		if strings.HasSuffix(rel, ".wasm") {
			t.Errorf("%s: a tracked .wasm that no test rebuilds; %s", rel, fix)
			continue
		}
		if fi.Size() > maxTracked {
			t.Errorf("%s: %d bytes tracked (bound %d); %s", rel, fi.Size(), maxTracked, fix)
			continue
		}
		head := make([]byte, 4)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := f.Read(head)
		f.Close()
		for _, m := range binaryMagic {
			if bytes.HasPrefix(head[:n], m) {
				t.Errorf("%s: a tracked executable or module (starts %q); %s", rel, m, fix)
			}
		}
	}
}

// TestDemoPluginsMatchSources rebuilds the plugins that `wasmstream demo`
// embeds and compares them with the committed ones: Go builds are
// reproducible (same toolchain, -trimpath, no VCS stamp), so any difference
// means a plugin, the SDK or abi/ changed since they were built.
func TestDemoPluginsMatchSources(t *testing.T) {
	root := moduleRoot(t)
	committed, err := filepath.Glob(filepath.Join(root, "internal/demo/plugins/*.wasm"))
	if err != nil || len(committed) == 0 {
		t.Fatalf("no internal/demo/plugins/*.wasm (err %v)", err)
	}
	dir := t.TempDir()
	for _, c := range committed {
		name := strings.TrimSuffix(filepath.Base(c), ".wasm")
		out := filepath.Join(dir, name+".wasm")
		// The same command as the Makefile's demo-plugins target.
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-s",
			"-o", out, "./plugins/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building plugins/%s: %v\n%s", name, err, msg)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/demo/plugins/%s.wasm (%d bytes) differs from plugins/%s built now (%d bytes): run `make demo-plugins` and commit the result", name, len(got), name, len(want))
		}
	}
}

// TestEngineFixturesMatchSources runs the engine's testdata/gen.sh on a
// copy of its sources and compares every module with the committed one:
// the .wat files and gen_hostile.py are the sources, the .wasm files what
// the engine's tests read. Needs wat2wasm (Debian's wabt, in make
// toolchains) and python3.
func TestEngineFixturesMatchSources(t *testing.T) {
	root := moduleRoot(t)
	src := filepath.Join(root, "host/internal/engine/testdata")
	for _, tool := range []string{"wat2wasm", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: it checks the engine's test modules against their sources; install it (`make toolchains`: Debian packages wabt, python3)", tool)
		}
	}
	dir := t.TempDir()
	var inputs []string
	for _, pat := range []string{"*.wat", "*.py", "*.sh"} {
		m, err := filepath.Glob(filepath.Join(src, pat))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, m...)
	}
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(in)), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "gen.sh")
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testdata/gen.sh: %v\n%s", err, msg)
	}
	built, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
	committed, _ := filepath.Glob(filepath.Join(src, "*.wasm"))
	names := map[string]bool{}
	for _, b := range built {
		names[filepath.Base(b)] = true
	}
	for _, c := range committed {
		names[filepath.Base(c)] = true
	}
	const fix = "run host/internal/engine/testdata/gen.sh and commit the .wat and .wasm files together"
	for name := range names {
		got, errGot := os.ReadFile(filepath.Join(src, name))
		want, errWant := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errWant != nil:
			t.Errorf("testdata/%s is committed but gen.sh does not build it from a source: add its source or remove it", name)
		case errGot != nil:
			t.Errorf("gen.sh builds %s, which is not committed: %s", name, fix)
		case !bytes.Equal(got, want):
			t.Errorf("testdata/%s differs from what gen.sh builds from its source: %s", name, fix)
		}
	}
}

// TestConformanceFixturesMatchSources compiles each .wat of the conformance
// suite's testdata (the hand-written floors of BenchmarkPolyglot) with
// wat2wasm and compares it with the committed .wasm of the same name, which
// the suite reads; a .wasm without its .wat fails too. Needs wat2wasm
// (Debian's wabt, in make toolchains).
func TestConformanceFixturesMatchSources(t *testing.T) {
	root := moduleRoot(t)
	src := filepath.Join(root, "host/internal/conformance/testdata")
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm not found: it checks the conformance suite's modules against their sources; install it (`make toolchains`: Debian package wabt)")
	}
	wats, _ := filepath.Glob(filepath.Join(src, "*.wat"))
	committed, _ := filepath.Glob(filepath.Join(src, "*.wasm"))
	if len(committed) == 0 {
		t.Fatalf("no host/internal/conformance/testdata/*.wasm: the fixture entry is stale")
	}
	names := map[string]bool{}
	for _, f := range append(wats, committed...) {
		names[strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".wat"), ".wasm")] = true
	}
	dir := t.TempDir()
	for name := range names {
		fix := "run `wat2wasm host/internal/conformance/testdata/" + name + ".wat -o host/internal/conformance/testdata/" + name + ".wasm` and commit both (testdata/README.md)"
		got, err := os.ReadFile(filepath.Join(src, name+".wasm"))
		if err != nil {
			t.Errorf("testdata/%s.wat has no committed .wasm: %s", name, fix)
			continue
		}
		if _, err := os.Stat(filepath.Join(src, name+".wat")); err != nil {
			t.Errorf("testdata/%s.wasm is committed without its source %s.wat: add the source or remove the module", name, name)
			continue
		}
		out := filepath.Join(dir, name+".wasm")
		cmd := exec.Command("wat2wasm", filepath.Join(src, name+".wat"), "-o", out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm testdata/%s.wat: %v\n%s", name, err, msg)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s.wasm differs from what wat2wasm builds from %s.wat: %s", name, name, fix)
		}
	}
}
