package wasmvariant

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// compile validates wasm with wazero, as the host's engine does.
func compile(t *testing.T, wasm []byte) wazero.CompiledModule {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	c, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("variant does not compile: %v", err)
	}
	return c
}

// Variants of a hand-written module and of a Go plugin compile, keep
// their exports and imports, differ from each other and from the
// original, and are the same for the same number.
func TestVariants(t *testing.T) {
	wat, err := os.ReadFile(filepath.Join("..", "..", "host", "internal", "engine", "testdata", "passthrough.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	goPlugin, err := os.ReadFile(wasmbuild.Build(t, "./plugins/passthrough"))
	if err != nil {
		t.Fatal(err)
	}
	for name, orig := range map[string][]byte{"wat": wat, "go": goPlugin} {
		t.Run(name, func(t *testing.T) {
			base := compile(t, orig)
			o := Options{CodeBytes: 2000, DataBytes: 100_000}
			a, err := Make(orig, 1, o)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Make(orig, 2, o)
			a2, _ := Make(orig, 1, o)
			if bytes.Equal(a, b) || bytes.Equal(a, orig) || !bytes.Equal(a, a2) {
				t.Fatal("variants are not distinct per number, or not stable for one")
			}
			// (Sizes written anew take their shortest form: Go's linker pads
			// them to 5 bytes, so a few bytes per section may go.)
			if len(a) < len(orig)+o.CodeBytes+o.DataBytes-64 {
				t.Fatalf("variant is %d bytes, want at least %d more than %d", len(a), o.CodeBytes+o.DataBytes, len(orig))
			}
			for _, v := range [][]byte{a, b} {
				c := compile(t, v)
				if len(c.ExportedFunctions()) != len(base.ExportedFunctions()) || len(c.ImportedFunctions()) != len(base.ImportedFunctions()) {
					t.Fatalf("exports %d imports %d, want %d %d", len(c.ExportedFunctions()), len(c.ImportedFunctions()),
						len(base.ExportedFunctions()), len(base.ImportedFunctions()))
				}
			}
			// A variant of a variant is a module too.
			if _, err := Make(a, 3, Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Make([]byte("not wasm"), 1, Options{}); err == nil {
		t.Fatal("Make accepted something that is not a module")
	}
	if _, err := Make(append(append([]byte(nil), wat[:8]...), 1, 0xff), 1, Options{}); err == nil {
		t.Fatal("Make accepted a truncated section")
	}
}
