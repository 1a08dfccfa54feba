package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/polybuild"
	"github.com/wasmstream/wasmstream/internal/scaffold"
)

// installedBinary builds this command as a user installs it, into a
// directory of the test's own (go's build cache makes a second build
// cheap).
func installedBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wasmstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wasmstream: %v\n%s", err, out)
	}
	return bin
}

// offlineEnv is the environment of a user's machine with the toolchains
// and nothing else: no network for Go (GOPROXY=off, the local toolchain
// only), cargo or npm (which installs the compiler a TypeScript project
// pins from npm's cache, npmCache: the repository's, which make
// toolchains fills), and no wasmstream checkout to find.
func offlineEnv(npmCache string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WASMSTREAM_") && !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "npm_config_") {
			env = append(env, kv)
		}
	}
	return append(env, "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=", "CARGO_NET_OFFLINE=true",
		"npm_config_offline=true", "npm_config_cache="+npmCache)
}

// run runs name in dir and fails the test with its output if it fails.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, offlineEnv(filepath.Join(polybuild.Root(t), ".cache", "npm"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitFromInstalledBinary is a newcomer's first steps with only the
// installed binary, in an empty directory outside the repository, in
// every language: init, then the project is moved elsewhere (a teammate's
// clone, a CI checkout) and its native test, its Wasm build, validate and
// its pipeline's cases (wasmstream test) run there with the network off.
// Nothing in the project may name the repository or the directory it was
// written in.
func TestInitFromInstalledBinary(t *testing.T) {
	bin := installedBinary(t)
	repo := polybuild.Root(t)
	for _, l := range scaffold.Langs {
		t.Run(l.Name, func(t *testing.T) {
			checkToolchain(t, l.Name, repo)
			work := t.TempDir()
			if strings.HasPrefix(work, repo+string(filepath.Separator)) {
				t.Fatalf("the temporary directory %s is inside the repository", work)
			}
			name := "my-" + l.Name + "-proc"
			out := run(t, work, bin, "init", name, "--lang", l.Name)
			if !strings.Contains(out, "wrote "+name+" ("+l.Name+"; the SDK of wasmstream ") {
				t.Fatalf("init said:\n%s", out)
			}
			moved := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(filepath.Join(work, name), moved); err != nil {
				t.Fatal(err)
			}
			noPathsTo(t, moved, repo, work)

			run(t, moved, "make", "test")
			run(t, moved, "make")
			wasm := filepath.Join(moved, strings.ReplaceAll(name, "-", "_")+".wasm")
			plain, err := os.ReadFile(wasm)
			if err != nil {
				t.Fatalf("make built no module: %v", err)
			}
			if l.Name == "rust" || l.Name == "c" {
				// The optional optimizer (binaryen's wasm-opt, here the
				// one make toolchains installed): the module it makes is
				// the one validated and tested below.
				if out := run(t, moved, "make", "-B", "WASM_OPT="+polybuild.WasmOpt(repo)); !strings.Contains(out, "-O3") {
					t.Fatalf("make WASM_OPT=... did not run wasm-opt:\n%s", out)
				}
				if opt, err := os.ReadFile(wasm); err != nil || bytes.Equal(opt, plain) {
					t.Fatalf("make WASM_OPT=... left the module as it was (err %v)", err)
				}
			}
			if out := run(t, moved, bin, "validate", "-c", "pipeline.yaml"); !strings.Contains(out, "ok (1 processor)") {
				t.Fatalf("validate said:\n%s", out)
			}
			if out := run(t, moved, bin, "test", "pipeline.yaml", "cases.yaml"); !strings.Contains(out, "ok: 2 cases") {
				t.Fatalf("test said:\n%s", out)
			}
			// A config that lacks the processor's store: validate names it
			// and the field to add it to, in every language (Rust through
			// its store! declaration, the others resolving it at start).
			cfg, err := os.ReadFile(filepath.Join(moved, "pipeline.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			lacking := strings.Replace(string(cfg), "    stores: [seen]\n", "", 1)
			if lacking == string(cfg) {
				t.Fatalf("pipeline.yaml has no line \"    stores: [seen]\":\n%s", cfg)
			}
			if err := os.WriteFile(filepath.Join(moved, "lacking.yaml"), []byte(lacking), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "validate", "-c", "lacking.yaml")
			// Without WASMSTREAM_TEST_*: the binary reads WASMSTREAM_* as config.
			cmd.Dir, cmd.Env = moved, offlineEnv(filepath.Join(repo, ".cache", "npm"))
			out, err = func() (string, error) { b, err := cmd.CombinedOutput(); return string(b), err }()
			if err == nil || !strings.Contains(out, `add store "seen" to processors[0].stores`) {
				t.Fatalf("validate of a config without the store: %v\n%s\nwant it refused, naming the store", err, out)
			}
		})
	}
}

// noPathsTo fails if a file under dir names any of paths.
func noPathsTo(t *testing.T, dir string, paths ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, abs := range paths {
			if bytes.Contains(b, []byte(abs)) {
				t.Errorf("%s names %s: a generated project must not name a path outside itself", p, abs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInitErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"init"}, "usage: wasmstream init NAME --lang go|rust|c|ts"},
		{[]string{"init", "x"}, "--lang is required: go, rust, c or ts"},
		{[]string{"init", "x", "--lang", "java"}, `unknown --lang "java": the languages are go, rust, c or ts`},
		{[]string{"init", "Bad Name", "--lang", "c"}, `name "Bad Name"`},
		{[]string{"init", "x", "--lang", "c", "--update-sdk"}, "takes no NAME and no --lang"},
	} {
		if code, _, errs := runCLI(t, c.args...); code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want a usage error saying %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := runCLI(t, "init", "p", "--lang", "c", "--dir", filepath.Join(dir, "p"), "--sdk", dir); code != exitError ||
		!strings.Contains(errs, dir+" is neither a wasmstream checkout nor its sdk/ directory") {
		t.Errorf("bad --sdk: exit %d, %s", code, errs)
	}
	target := filepath.Join(dir, "q")
	if code, out, errs := runCLI(t, "init", "q", "--lang", "c", "--dir", target); code != exitOK {
		t.Fatalf("init: exit %d: %s %s", code, out, errs)
	}
	// Never over an existing project.
	if code, _, errs := runCLI(t, "init", "q", "--lang", "c", "--dir", target); code != exitError || !strings.Contains(errs, "not empty") {
		t.Errorf("second init into %s: exit %d, %s", target, code, errs)
	}
	if code, _, errs := runCLI(t, "init", "--update-sdk", "--dir", dir); code != exitError ||
		!strings.Contains(errs, dir+" is not a project wasmstream init wrote") {
		t.Errorf("--update-sdk outside a project: exit %d, %s", code, errs)
	}
}

// --sdk takes a checkout's root or its sdk/ directory; either way the
// project gets the same files as from the SDK built into the binary (the
// checkout is the tree this binary was built from).
func TestInitSDKFromCheckout(t *testing.T) {
	root := polybuild.Root(t)
	for _, l := range scaffold.Langs {
		var trees []map[string]string
		for _, sdk := range []string{"", root, filepath.Join(root, "sdk")} {
			dir := filepath.Join(t.TempDir(), "p")
			args := []string{"init", "p", "--lang", l.Name, "--dir", dir}
			if sdk != "" {
				args = append(args, "--sdk", sdk)
			}
			code, out, errs := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("%q: exit %d: %s %s", args, code, out, errs)
			}
			if sdk != "" && !strings.Contains(out, "the SDK of the checkout "+root) {
				t.Errorf("%q said %q", args, out)
			}
			tree := readTree(t, dir)
			delete(tree, scaffold.SDKDir+"/README.md") // names where the SDK came from
			trees = append(trees, tree)
		}
		for i := 1; i < len(trees); i++ {
			if !equalTrees(trees[0], trees[i]) {
				t.Errorf("%s: the project from --sdk differs from the one from the embedded SDK", l.Name)
			}
		}
	}
}

// --update-sdk replaces the project's SDK, and nothing else.
func TestInitUpdateSDK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if code, out, errs := runCLI(t, "init", "p", "--lang", "c", "--dir", dir); code != exitOK {
		t.Fatalf("init: exit %d: %s %s", code, out, errs)
	}
	want := readTree(t, dir)
	// An old SDK: a file changed, one the new SDK no longer has; and the
	// user's own change to the processor.
	writeFile(t, filepath.Join(dir, scaffold.SDKDir), "wasmstream.h", "/* an old SDK */")
	writeFile(t, filepath.Join(dir, scaffold.SDKDir), "gone.c", "/* dropped since */")
	mine := "/* my processor */\n"
	writeFile(t, dir, "p.c", mine)
	want["p.c"] = mine

	code, out, errs := runCLI(t, "init", "--update-sdk", "--dir", dir)
	if code != exitOK || !strings.Contains(out, "replaced "+filepath.Join(dir, scaffold.SDKDir)+" with the C SDK of wasmstream ") {
		t.Fatalf("--update-sdk: exit %d: %s %s", code, out, errs)
	}
	if got := readTree(t, dir); !equalTrees(got, want) {
		t.Errorf("after --update-sdk the project has %d files; want the SDK replaced and p.c kept", len(got))
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		tree[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
