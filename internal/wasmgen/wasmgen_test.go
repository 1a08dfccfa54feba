package wasmgen

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestModulesAreValid: every kind of shape builds a module wazero accepts
// (a shape that built an invalid one would test wazero's validator, not
// the cost of compiling).
func TestModulesAreValid(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	defer rt.Close(ctx)
	shapes := []Shape{
		{},
		{Plugin: true},
		{Funcs: 3, Params: 2, Locals: 5, Live: true, Ops: 10, Nesting: 3, Loops: 2, BrTable: 7},
		{Types: 5, TypeParams: 3, TypeResults: 2, Exports: 4, Imports: 3, Globals: 2, Names: 3, Funcs: 2},
		{DataSegments: 3, DataBytes: 5, ElemSegments: 2, ElemEntries: 4, Funcs: 1},
	}
	for k := OpConst; k <= OpBrIf; k++ {
		shapes = append(shapes, Shape{Funcs: 2, Locals: 3, Ops: 20, OpKind: k, Plugin: true, Nesting: 2})
	}
	for _, s := range shapes {
		wasm := Module(s)
		if _, err := rt.CompileModule(ctx, wasm); err != nil {
			t.Errorf("%v: %v", s, err)
		}
	}
}
