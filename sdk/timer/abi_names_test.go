package timer_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// Directive arguments must be literals; this keeps the names in
// imports_wasm.go equal to the abi constants, as sdk's test does for its
// own.
func TestWasmDirectivesMatchABI(t *testing.T) {
	src, err := os.ReadFile("imports_wasm.go")
	if err != nil {
		t.Fatal(err)
	}
	var imports, exports []string
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "//go:wasmimport":
			if f[1] != abi.ImportModule {
				t.Errorf("import %s from module %q, want %q", f[2], f[1], abi.ImportModule)
			}
			imports = append(imports, f[2])
		case len(f) == 2 && f[0] == "//go:wasmexport":
			exports = append(exports, f[1])
		}
	}
	wantImports := []string{abi.ImportTimerSet, abi.ImportTimerCancel, abi.ImportTimeNow, abi.ImportCommitMark}
	wantExports := []string{abi.ExportOnTimer, abi.ExportOnCommit}
	for _, l := range [][]string{imports, exports, wantImports, wantExports} {
		slices.Sort(l)
	}
	if !slices.Equal(imports, wantImports) {
		t.Errorf("wasmimport names %v, want %v", imports, wantImports)
	}
	if !slices.Equal(exports, wantExports) {
		t.Errorf("wasmexport names %v, want %v", exports, wantExports)
	}
}
