package conformance

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// TestRustSDKNative runs the Rust SDK's own tests (cargo test in sdk/rust:
// the SDK against its fake host, and the shared record vectors).
func TestRustSDKNative(t *testing.T) {
	polybuild.RustTest(t, "sdk/rust")
}

// TestCSDKNative builds the C SDK's test harness natively against the fake
// host (under AddressSanitizer and UBSan) and runs it on the shared record
// vectors.
func TestCSDKNative(t *testing.T) {
	bin := polybuild.CNative(t, "sdk/c/test/sdk_test.c")
	vectors, err := filepath.Abs(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, vectors).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}
