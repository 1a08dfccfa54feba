package polybuild

import (
	"strings"
	"testing"
)

// A machine without node, or without the SDK's compiler, gets an error that
// says what to run.
func TestMissingTSToolchainNamesMakeToolchains(t *testing.T) {
	root := Root(t)
	t.Setenv("PATH", t.TempDir()) // no node there
	if err := CheckTS(root); err == nil || !strings.Contains(err.Error(), "make toolchains") || !strings.Contains(err.Error(), Node) {
		t.Fatalf("CheckTS with no node on PATH: %v; want an error naming node and make toolchains", err)
	}
}

func TestMissingTSCompilerNamesMakeToolchains(t *testing.T) {
	if err := CheckTS(t.TempDir()); err == nil || !strings.Contains(err.Error(), "make toolchains") ||
		!strings.Contains(err.Error(), "AssemblyScript") {
		t.Fatalf("CheckTS in a tree without sdk/ts/node_modules: %v", err)
	}
}

func TestTSToolchainPresent(t *testing.T) {
	if err := CheckTS(Root(t)); err != nil {
		t.Fatal(err)
	}
}
