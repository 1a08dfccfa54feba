package engine

import (
	"context"
	"os"
	"testing"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// BenchmarkCompileGoSDK compiles the Go SDK plugins from scratch (no
// compilation cache): validation, the pre-parse with its shape limits, the
// instrumentation and wazero's compilation, as Runtime.Compile does for
// `wasmstream run`, `validate` and `deploy`. Compare with the same benchmark
// on an older engine for the cost of the compile budget.
func BenchmarkCompileGoSDK(b *testing.B) {
	for _, p := range []string{"passthrough", "mask", "wordcount"} {
		wasm, err := os.ReadFile(wasmbuild.Build(b, "./plugins/"+p))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p, func(b *testing.B) {
			b.SetBytes(int64(len(wasm)))
			for b.Loop() {
				r, err := NewRuntime(context.Background(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Compile(context.Background(), p, wasm); err != nil {
					b.Fatal(err)
				}
				_ = r.Close(context.Background())
			}
		})
	}
}

// BenchmarkInstrumentGoSDK is the engine's own share of a compilation: the
// pre-parse with its shape limits and the rewrite, on a Go SDK plugin.
func BenchmarkInstrumentGoSDK(b *testing.B) {
	wasm, err := os.ReadFile(wasmbuild.Build(b, "./plugins/passthrough"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}
