package sdk_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// Directive arguments must be literals, so the import and export names in
// imports_wasm.go (and wasmstream_process in sdk.go) cannot use the abi
// constants; this keeps them equal.
func TestWasmDirectivesMatchABI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(src), "\n")...)
	}
	var imports, exports []string
	for _, line := range lines {
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
	wantImports := []string{abi.ImportEmit, abi.ImportOutputIndex, abi.ImportStoreIndex, abi.ImportConfig,
		abi.ImportLog, abi.ImportSetError, abi.ImportStateGet, abi.ImportStatePut, abi.ImportStateDelete,
		abi.ImportScanOpen, abi.ImportScanNext, abi.ImportScanClose}
	wantExports := []string{abi.VersionMarker, abi.VersionMarkerBatch, abi.ExportBatch, abi.ExportInput, abi.ExportProcess, abi.ExportInit}
	slices.Sort(imports)
	slices.Sort(exports)
	slices.Sort(wantImports)
	slices.Sort(wantExports)
	if !slices.Equal(imports, wantImports) {
		t.Errorf("wasmimport names %v, want %v", imports, wantImports)
	}
	if !slices.Equal(exports, wantExports) {
		t.Errorf("wasmexport names %v, want %v", exports, wantExports)
	}
}
