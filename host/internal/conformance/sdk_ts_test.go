package conformance

import (
	"testing"

	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// TestTSSDKNative runs the TypeScript SDK's own tests under node
// (sdk/ts/test: the SDK's modules against its fake host, sdk/ts/fake.mjs:
// records and the shared record vectors, outputs, stores, scans, errors,
// traps, batches against single calls, time and the shared trigger
// vectors, store expiry, the window and join helpers, and the velocity
// processor written with the SDK's time helpers).
func TestTSSDKNative(t *testing.T) {
	polybuild.TSTest(t, "sdk/ts/test")
}

// TestTSPluginsNative runs the TypeScript plugins' native tests
// (plugins/ts/*/*.test.mjs) against the SDK's fake host.
func TestTSPluginsNative(t *testing.T) {
	polybuild.TSTest(t, "plugins/ts")
}
