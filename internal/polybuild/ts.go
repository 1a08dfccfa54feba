package polybuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TypeScript plugins are AssemblyScript, compiled by the SDK's own build
// script (sdk/ts/build.mjs: the SDK's compiler flags) with the compiler
// that sdk/ts/package-lock.json pins, installed into sdk/ts/node_modules
// by `make toolchains` (npm ci). Node runs the compiler and the SDK's
// native tests.

// Node is the JavaScript runtime (Debian package nodejs, 20 or later).
const Node = "node"

const tsHint = "run `make toolchains` (as root it apt-get installs nodejs and npm when missing; then it runs npm ci in sdk/ts, " +
	"which installs the AssemblyScript compiler that sdk/ts/package-lock.json pins)"

// TSSDK is the TypeScript SDK's directory in the repository.
func TSSDK(tb testing.TB) string {
	return filepath.Join(Root(tb), "sdk", "ts")
}

// CheckTS reports whether node (20 or later) and the SDK's compiler (in
// sdk/ts/node_modules) are there. root is the repository's root.
func CheckTS(root string) error {
	if _, err := exec.LookPath(Node); err != nil {
		return fmt.Errorf("polybuild: %s not found: %s", Node, tsHint)
	}
	out, err := exec.Command(Node, "--version").Output()
	if err != nil {
		return fmt.Errorf("polybuild: %s --version: %v: %s", Node, err, tsHint)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 20 {
		return fmt.Errorf("polybuild: node %s is too old (the AssemblyScript compiler needs 20 or later): %s", v, tsHint)
	}
	asc := filepath.Join(root, "sdk", "ts", "node_modules", "assemblyscript", "package.json")
	if _, err := os.Stat(asc); err != nil {
		return fmt.Errorf("polybuild: the AssemblyScript compiler is not installed (%s): %s", asc, tsHint)
	}
	return nil
}

// TS compiles the AssemblyScript entry file (absolute, or relative to
// the module root) with the SDK's build script and returns the module's
// path. The first call per entry builds.
func TS(tb testing.TB, entry string) string {
	tb.Helper()
	file := abs(tb, entry)
	root := Root(tb)
	p, err := cached("ts:"+file, func() (string, error) { return BuildTS(root, file) })
	if err != nil {
		tb.Fatal(err)
	}
	consultTS(root, filepath.Dir(file))
	return p
}

// BuildTS is TS without the cache and the testing.TB; root is the
// repository's root.
func BuildTS(root, file string) (string, error) {
	if err := CheckTS(root); err != nil {
		return "", err
	}
	dir, err := workDir("ts", file)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(file), ".ts")+".wasm")
	tmp := out + ".tmp" + strconv.Itoa(os.Getpid())
	if err := run(filepath.Dir(file), nil, Node, filepath.Join(root, "sdk", "ts", "build.mjs"), file, "-o", tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("polybuild: %w", err)
	}
	return out, nil
}

// TSTest runs node's test runner on the test files (absolute, or relative
// to the module root) and fails tb with their output if they fail.
func TSTest(tb testing.TB, files ...string) {
	tb.Helper()
	root := Root(tb)
	if err := CheckTS(root); err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatal(errors.New("polybuild: no test files"))
	}
	args := []string{"--test", "--test-reporter=spec"}
	var dirs []string
	for _, f := range files {
		f = abs(tb, f)
		args = append(args, f)
		dirs = append(dirs, filepath.Dir(f))
	}
	if err := run(root, nil, Node, args...); err != nil {
		tb.Fatal(err)
	}
	consultTS(root, dirs...)
}

// consultTS is consult for the TypeScript SDK and the given directories,
// without the compiler's node_modules and the tests' build outputs.
func consultTS(root string, dirs ...string) {
	sdk := filepath.Join(root, "sdk", "ts")
	for _, d := range append([]string{sdk}, dirs...) {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.IsDir() && (e.Name() == "node_modules" || e.Name() == "build") {
				return filepath.SkipDir
			}
			os.Stat(p)
			return nil
		})
	}
}
