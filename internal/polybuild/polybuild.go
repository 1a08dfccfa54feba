// Package polybuild builds Rust and C plugins to WebAssembly from tests and
// tools, with the toolchains `make toolchains` installs (Debian packages):
//
//	Rust: RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-wasi
//	      (Debian's rustc 1.63 and libstd-rust-dev-wasm32)
//	C:    clang-19 --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi
//	      -L/usr/lib/wasm32-wasi -mexec-model=reactor (wasi-libc, lld-19,
//	      libclang-rt-19-dev-wasm32)
//
// A missing toolchain fails the test with a message naming `make
// toolchains`: the suites that use this package skip nothing.
//
// Like internal/wasmbuild, builds are cached for the life of the test
// process, and the sources are consulted from the test process so that go
// test's result cache notices a changed plugin.
package polybuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// Toolchain paths. Debian's cargo and rustc are called by full path: a
// rustup toolchain first on PATH usually has no wasm32-wasi target.
const (
	Cargo = "/usr/bin/cargo"
	Rustc = "/usr/bin/rustc"
	// Rustdoc runs the doc tests of cargo test; it must be the same
	// release as Rustc (it reads the crates Rustc compiled).
	Rustdoc = "/usr/bin/rustdoc"
	Clang   = "clang-19"
	// RustTarget is the target Debian's Rust 1.63 knows; rustup toolchains
	// from 1.78 on call it wasm32-wasip1.
	RustTarget = "wasm32-wasi"
	// WasiSysroot is where Debian's wasi-libc lives.
	WasiSysroot = "/usr"
)

// CFlags are the clang flags of a C plugin (before sources and -o).
var CFlags = []string{
	"--target=wasm32-wasi", "--sysroot=" + WasiSysroot, "-isystem", "/usr/include/wasm32-wasi",
	"-L/usr/lib/wasm32-wasi", "-mexec-model=reactor", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
	// A 64 KiB stack (wasm-ld's default is 64 KiB too; stated so it stays),
	// no symbols: the module's size and memory are user-visible.
	"-Wl,-z,stack-size=65536", "-Wl,--strip-all",
}

// OptFlags are the flags of binaryen's wasm-opt for the Rust and C
// modules, as make rust-plugins and make c-plugins run it (the
// Makefile's WASM_OPT_FLAGS): RATIONALE.md, "Rust and C modules go
// through wasm-opt".
var OptFlags = []string{"-O3"}

// WasmOpt is the path of binaryen's wasm-opt in a checkout whose root is
// root: the npm package sdk/ts/package-lock.json pins (AssemblyScript's
// optimizer), which make toolchains installs.
func WasmOpt(root string) string {
	return filepath.Join(root, "sdk", "ts", "node_modules", ".bin", "wasm-opt")
}

// Optimize writes the module at in, optimized by wasm-opt with OptFlags,
// to out (which may be in).
func Optimize(in, out string) error {
	root, err := wasmbuild.ModuleRoot(context.Background())
	if err != nil {
		return fmt.Errorf("polybuild: %w", err)
	}
	opt := WasmOpt(root)
	if _, err := os.Stat(opt); err != nil {
		return fmt.Errorf("polybuild: binaryen's wasm-opt is not installed (%s): %s", opt, tsHint)
	}
	tmp := out + ".opt" + strconv.Itoa(os.Getpid())
	args := append(append([]string{}, OptFlags...), in, "-o", tmp)
	if err := run(filepath.Dir(in), nil, opt, args...); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("polybuild: %w", err)
	}
	return nil
}

// buildTimeout bounds one compiler run.
const buildTimeout = 5 * time.Minute

const hint = "run `make toolchains` (as root: apt-get installs clang-19 lld-19 wasi-libc " +
	"libclang-rt-19-dev-wasm32 rustc cargo libstd-rust-dev-wasm32)"

// CheckRust reports whether the Rust toolchain for wasm32-wasi is there.
func CheckRust() error {
	for _, p := range []string{Cargo, Rustc} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("polybuild: %s not found: %s", p, hint)
		}
	}
	out, err := exec.Command(Rustc, "--print", "sysroot").Output()
	if err != nil {
		return fmt.Errorf("polybuild: %s --print sysroot: %v: %s", Rustc, err, hint)
	}
	lib := filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", RustTarget)
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("polybuild: no Rust standard library for %s (%s): %s", RustTarget, lib, hint)
	}
	return nil
}

// CheckC reports whether clang-19 with wasi-libc is there.
func CheckC() error {
	if _, err := exec.LookPath(Clang); err != nil {
		return fmt.Errorf("polybuild: %s not found: %s", Clang, hint)
	}
	for _, p := range []string{"/usr/include/wasm32-wasi/stdlib.h", "/usr/lib/wasm32-wasi/crt1-reactor.o"} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("polybuild: wasi-libc not found (%s): %s", p, hint)
		}
	}
	return nil
}

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	mu    sync.Mutex
	cache = map[string]*result{}
)

func cached(key string, build func() (string, error)) (string, error) {
	mu.Lock()
	r := cache[key]
	if r == nil {
		r = &result{}
		cache[key] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.path, r.err = build() })
	return r.path, r.err
}

// Root is the module root (the directory of go.mod).
func Root(tb testing.TB) string {
	tb.Helper()
	root, err := wasmbuild.ModuleRoot(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// abs resolves a path relative to the module root.
func abs(tb testing.TB, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(Root(tb), p)
}

// workDir is a directory under the checkout's own .cache/polybuild for
// build outputs, keyed by what is built: it goes with the checkout (under
// the system temp directory every fresh clone's cargo targets, 300 MiB a
// crate, stayed behind).
func workDir(kind, key string) (string, error) {
	root, err := wasmbuild.ModuleRoot(context.Background())
	if err != nil {
		return "", fmt.Errorf("polybuild: %w", err)
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(root, ".cache", "polybuild", kind+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("polybuild: %w", err)
	}
	return dir, nil
}

func run(dir string, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("polybuild: %s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err,
			strings.TrimSpace(out.String()))
	}
	return nil
}

// consult stats every file under dirs (but build outputs), for go test's
// cache: the compilers read them in subprocesses.
func consult(dirs ...string) {
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.IsDir() && e.Name() == "target" {
				return filepath.SkipDir
			}
			os.Stat(p)
			return nil
		})
	}
}

// cargoEnv is the environment of cargo runs: Debian's rustc, a target
// directory of its own per crate (crates built in parallel test processes
// never share one), no network.
func cargoEnv(crate string) ([]string, error) {
	target, err := workDir("cargo", crate)
	if err != nil {
		return nil, err
	}
	return []string{"RUSTC=" + Rustc, "CARGO_TARGET_DIR=" + target, "CARGO_NET_OFFLINE=true", "RUSTDOC=" + Rustdoc}, nil
}

// Rust builds the cdylib crate in crateDir (absolute, or relative to the
// module root) for wasm32-wasi in release mode, optimizes it (Optimize)
// and returns the .wasm path; the crate's [lib] name names the file. The
// first call per crate builds.
func Rust(tb testing.TB, crateDir string) string {
	tb.Helper()
	dir := abs(tb, crateDir)
	p, err := cached("rust:"+dir, func() (string, error) { return BuildRust(dir) })
	if err != nil {
		tb.Fatal(err)
	}
	consult(dir, filepath.Join(Root(tb), "sdk", "rust"))
	return p
}

// BuildRust is Rust without the cache and the testing.TB.
func BuildRust(dir string) (string, error) {
	if err := CheckRust(); err != nil {
		return "", err
	}
	env, err := cargoEnv(dir)
	if err != nil {
		return "", err
	}
	if err := run(dir, env, Cargo, "build", "--offline", "--release", "--target", RustTarget); err != nil {
		return "", err
	}
	target := strings.TrimPrefix(env[1], "CARGO_TARGET_DIR=")
	matches, _ := filepath.Glob(filepath.Join(target, RustTarget, "release", "*.wasm"))
	if len(matches) != 1 {
		return "", fmt.Errorf("polybuild: cargo build in %s: want one .wasm in %s, found %q", dir, target, matches)
	}
	// The optimized module goes beside cargo's directories, not into
	// release/ (whose one .wasm is cargo's).
	out := filepath.Join(target, filepath.Base(matches[0]))
	if err := Optimize(matches[0], out); err != nil {
		return "", err
	}
	return out, nil
}

// RustTest runs the crate's native tests (cargo test, Debian's toolchain)
// and fails tb with their output if they fail.
func RustTest(tb testing.TB, crateDir string) {
	tb.Helper()
	dir := abs(tb, crateDir)
	if err := CheckRust(); err != nil {
		tb.Fatal(err)
	}
	env, err := cargoEnv(dir)
	if err == nil {
		err = run(dir, env, Cargo, "test", "--offline")
	}
	if err != nil {
		tb.Fatal(err)
	}
	consult(dir, filepath.Join(Root(tb), "sdk", "rust"))
}

// C compiles the C sources (absolute, or relative to the module root) with
// the C SDK (sdk/c/wasmstream.c, added here) into a reactor module,
// optimizes it (Optimize) and returns its path. The first call per source
// list builds.
func C(tb testing.TB, srcs ...string) string {
	tb.Helper()
	var files []string
	for _, s := range srcs {
		files = append(files, abs(tb, s))
	}
	sdk := filepath.Join(Root(tb), "sdk", "c")
	p, err := cached("c:"+strings.Join(files, "\x00"), func() (string, error) { return BuildC(sdk, files) })
	if err != nil {
		tb.Fatal(err)
	}
	dirs := []string{sdk}
	for _, f := range files {
		dirs = append(dirs, filepath.Dir(f))
	}
	consult(dirs...)
	return p
}

// BuildC is C without the cache and the testing.TB; sdk is the C SDK's
// directory.
func BuildC(sdk string, files []string) (string, error) {
	if err := CheckC(); err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", errors.New("polybuild: no C sources")
	}
	dir, err := workDir("c", strings.Join(files, "\x00"))
	if err != nil {
		return "", err
	}
	name := strings.TrimSuffix(filepath.Base(files[0]), ".c")
	out := filepath.Join(dir, name+".wasm")
	tmp := out + ".tmp" + strconv.Itoa(os.Getpid())
	args := append(append([]string{}, CFlags...), "-I", sdk, "-o", tmp)
	args = append(append(args, files...), filepath.Join(sdk, "wasmstream.c"))
	if err := run(filepath.Dir(files[0]), nil, Clang, args...); err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if err := Optimize(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// CNative compiles the C sources natively with the SDK and its fake host
// (sdk/c/wasmstream_fake.c), under AddressSanitizer and UBSan, and returns
// the executable's path.
func CNative(tb testing.TB, srcs ...string) string {
	tb.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		tb.Fatalf("polybuild: no native C compiler (cc): %v", err)
	}
	var files []string
	for _, s := range srcs {
		files = append(files, abs(tb, s))
	}
	sdk := filepath.Join(Root(tb), "sdk", "c")
	dir, err := workDir("cnative", strings.Join(files, "\x00"))
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(files[0]), ".c"))
	args := []string{"-std=c11", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
		"-fno-sanitize-recover=all", "-I", sdk, "-o", out}
	args = append(append(args, files...), filepath.Join(sdk, "wasmstream.c"), filepath.Join(sdk, "wasmstream_fake.c"))
	if err := run(filepath.Dir(files[0]), nil, cc, args...); err != nil {
		tb.Fatal(err)
	}
	dirs := []string{sdk}
	for _, f := range files {
		dirs = append(dirs, filepath.Dir(f))
	}
	consult(dirs...)
	return out
}

// Plugin builds the bundled plugin name (plugins/<name> in Go,
// plugins/rust/<name>, plugins/c/<name>/<name>.c, plugins/ts/<name>/<name>.ts)
// in lang ("go", "rust", "c" or "ts") and returns the module's path.
func Plugin(tb testing.TB, lang, name string) string {
	tb.Helper()
	switch lang {
	case "go":
		return wasmbuild.Build(tb, "./plugins/"+name)
	case "rust":
		return Rust(tb, "plugins/rust/"+name)
	case "c":
		return C(tb, CPluginSources(name)...)
	case "ts":
		return TS(tb, "plugins/ts/"+name+"/"+name+".ts")
	}
	tb.Fatalf("polybuild: no language %q (go, rust, c, ts)", lang)
	return ""
}

// cTimePlugins are the C plugins that link the SDK's time
// (sdk/c/wasmstream_time.c: commit marks, timers and their callbacks), as
// the Makefile's C_TIME_PLUGINS says for make c-plugins.
var cTimePlugins = map[string]bool{"wordcount": true}

// CPluginSources are the sources of the bundled C plugin name besides the
// SDK's wasmstream.c (which C and CNative add), relative to the module
// root: plugins/c/<name>/<name>.c, and sdk/c/wasmstream_time.c for the
// plugins that use time.
func CPluginSources(name string) []string {
	srcs := []string{"plugins/c/" + name + "/" + name + ".c"}
	if cTimePlugins[name] {
		srcs = append(srcs, "sdk/c/wasmstream_time.c")
	}
	return srcs
}
