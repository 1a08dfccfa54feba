package polybuild

import (
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
