package wasmbuild_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

func TestBuildMinimalPlugin(t *testing.T) {
	p := wasmbuild.Build(t, "./internal/wasmbuild/testdata/minimal")
	if filepath.Base(p)[:len("minimal-")] != "minimal-" || filepath.Ext(p) != ".wasm" {
		t.Errorf("path %s: want minimal-<hash>.wasm", p)
	}
	wasm, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("%s is not a Wasm v1 module", p)
	}
	exports, err := exportNames(wasm)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's exports come from a non-main package; the toolchain adds
	// _initialize for a c-shared (reactor) build.
	for _, want := range []string{abi.ExportMemory, abi.ExportInitialize, abi.VersionMarker,
		abi.ExportInput, abi.ExportProcess, abi.ExportInit} {
		if !slices.Contains(exports, want) {
			t.Errorf("export %q missing; exports: %v", want, exports)
		}
	}
	t.Logf("minimal plugin: %d bytes, exports %v", len(wasm), exports)

	// Cached: the same file, not rebuilt.
	st, _ := os.Stat(p)
	if q := wasmbuild.Build(t, "./internal/wasmbuild/testdata/minimal"); q != p {
		t.Fatalf("second Build = %s, want %s", q, p)
	}
	if st2, _ := os.Stat(p); !st2.ModTime().Equal(st.ModTime()) {
		t.Fatal("second Build rebuilt the module")
	}
}

func TestBuildErrorCarriesCompilerOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "broken.wasm")
	err := wasmbuild.BuildTo(context.Background(), "./internal/wasmbuild/testdata/broken", out)
	if err == nil {
		t.Fatal("broken package built")
	}
	if !strings.Contains(err.Error(), "main.go:6") || !strings.Contains(err.Error(), "cannot use") {
		t.Fatalf("error lacks the compiler's message:\n%v", err)
	}
	if _, statErr := os.Stat(out); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("a failed build left %s (%v)", out, statErr)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"./plugins/filter": "filter", "github.com/x/y/plugins/route/": "route", "wordcount": "wordcount",
	} {
		if got := wasmbuild.Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// exportNames reads the names in a module's export section (section 7).
func exportNames(wasm []byte) ([]string, error) {
	r := wasm[8:]
	for len(r) > 0 {
		id := r[0]
		size, n := binary.Uvarint(r[1:])
		if n <= 0 || uint64(len(r)-1-n) < size {
			return nil, errors.New("bad section header")
		}
		body := r[1+n : 1+n+int(size)]
		r = r[1+n+int(size):]
		if id != 7 {
			continue
		}
		count, n := binary.Uvarint(body)
		body = body[n:]
		var names []string
		for range count {
			l, n := binary.Uvarint(body)
			names = append(names, string(body[n:n+int(l)]))
			body = body[n+int(l)+1:]    // name, kind byte
			_, n = binary.Uvarint(body) // index
			body = body[n:]
		}
		return names, nil
	}
	return nil, errors.New("no export section")
}
