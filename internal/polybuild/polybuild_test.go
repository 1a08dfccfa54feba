package polybuild

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A machine without the C toolchain gets an error that says what to run,
// which is what the suites that use this package fail with.
func TestMissingToolchainNamesMakeToolchains(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no clang-19 there
	err := CheckC()
	if err == nil || !strings.Contains(err.Error(), "make toolchains") || !strings.Contains(err.Error(), Clang) {
		t.Fatalf("CheckC with no clang on PATH: %v; want an error naming %s and make toolchains", err, Clang)
	}
}

func TestToolchainsPresent(t *testing.T) {
	if err := CheckC(); err != nil {
		t.Fatal(err)
	}
	if err := CheckRust(); err != nil {
		t.Fatal(err)
	}
}

// The tests optimize Rust and C modules as make does (the Makefile's
// WASM_OPT_FLAGS): the tests run what ships.
func TestOptFlagsMatchMakefile(t *testing.T) {
	if inMake := makefileVar(t, "WASM_OPT_FLAGS"); !slices.Equal(OptFlags, inMake) {
		t.Fatalf("wasm-opt flags: %q here, %q in the Makefile's WASM_OPT_FLAGS", OptFlags, inMake)
	}
}

// The C plugins linked with the SDK's time here are those make c-plugins
// links it into (the Makefile's C_TIME_PLUGINS): a plugin built one way in
// the tests and another by make would import what its build lacks.
func TestCTimePluginsMatchMakefile(t *testing.T) {
	inMake := makefileVar(t, "C_TIME_PLUGINS")
	slices.Sort(inMake)
	if here := slices.Sorted(maps.Keys(cTimePlugins)); !slices.Equal(here, inMake) {
		t.Fatalf("C plugins linked with wasmstream_time.c: %q here, %q in the Makefile's C_TIME_PLUGINS", here, inMake)
	}
	if srcs := CPluginSources("wordcount"); len(srcs) != 2 || srcs[1] != "sdk/c/wasmstream_time.c" {
		t.Fatalf("CPluginSources(wordcount) = %q, want the plugin and sdk/c/wasmstream_time.c", srcs)
	}
}

// makefileVar is the words of the repository Makefile's "NAME = ..." line.
func makefileVar(t *testing.T, name string) []string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(Root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, name+" ="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatalf("the Makefile has no line %q", name+" = ...")
	return nil
}
