package sdktest_test

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// Handles that are package variables (ttl_test.go's ttlStore and ttlOut)
// are resolved when the instance starts: a host that does not declare one
// fails the start with a message naming every missing name, before the
// OnInit hook runs; handles the hook makes are resolved after it; handles
// made in a record handler are resolved on first use.
func TestDeclaredHandlesResolvedAtStart(t *testing.T) {
	sdk.Handle(func(*sdk.Record) error { return nil })
	hookRan := false
	sdk.OnInit(func() error {
		hookRan = true
		return ttlOut.Check()
	})
	t.Cleanup(func() { sdk.OnInit(nil) })
	_, err := sdktest.Start(t, sdktest.Stores("other"))
	want := `sdk: not declared by the processor (add to its outputs or stores in the pipeline config): output "out", store "s"`
	if err == nil || err.Error() != want {
		t.Fatalf("start: %v\nwant %s", err, want)
	}
	if hookRan {
		t.Fatal("the OnInit hook ran though declared handles were missing")
	}

	// Made by the hook: resolved after it, for this instance.
	sdk.OnInit(func() error {
		sdk.Output("from-hook")
		return nil
	})
	_, err = sdktest.Start(t, sdktest.Outputs("out"), sdktest.Stores("s"))
	if err == nil || err.Error() != `sdk: not declared by the processor (add to its outputs or stores in the pipeline config): output "from-hook"` {
		t.Fatalf("a hook's handle: %v", err)
	}
	// The next instance's hook makes none: the earlier instance's handle
	// is not resolved again.
	sdk.OnInit(nil)
	sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("s"))

	// Made in a handler: resolved on first use, failing that record.
	sdk.Handle(func(*sdk.Record) error { return sdk.Output("lazy").Emit(sdk.Out{}) })
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("s"))
	if res := h.Process(sdktest.Record{}); res.Err == nil {
		t.Fatal("an emit to an undeclared output made in the handler succeeded")
	}
}
