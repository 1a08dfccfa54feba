package conformance

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// TestRustSDKNative runs the Rust SDK's own tests (cargo test in sdk/rust:
// the SDK against its fake host, one call at a time and in batches, and
// the shared record, trigger and batch vectors).
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

// TestCSDKMigrateNative runs the C SDK's state migration (WS_MIGRATE)
// against the fake host, natively (under AddressSanitizer and UBSan).
func TestCSDKMigrateNative(t *testing.T) {
	bin := polybuild.CNative(t, "sdk/c/test/migrate_test.c", "sdk/c/wasmstream_time.c")
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestCSDKTimeNative runs the C SDK's time tests natively (under
// AddressSanitizer and UBSan): timers, clocks, commit marks, callbacks,
// store expiry and the window and join helpers against the fake host, and
// the shared trigger vectors.
func TestCSDKTimeNative(t *testing.T) {
	bin := polybuild.CNative(t, "sdk/c/test/time_test.c", "sdk/c/wasmstream_time.c", "sdk/c/wasmstream_window.c")
	triggers, err := filepath.Abs(abitest.TriggersPath())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, triggers).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestCSDKVelocityNative runs the velocity processor written with the C
// SDK's time helpers (sdk/c/test/velocity_test.c) against the fake host.
func TestCSDKVelocityNative(t *testing.T) {
	bin := polybuild.CNative(t, "sdk/c/test/velocity_test.c", "sdk/c/wasmstream_time.c")
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestCSDKBatchNative runs the C SDK's batch tests natively (under
// AddressSanitizer and UBSan): the shared batch and emit-entry vectors,
// through the SDK's wasmstream_batch too, and records in batches against
// one at a time through the fake host (sdk/c/test/batch_test.c).
func TestCSDKBatchNative(t *testing.T) {
	bin := polybuild.CNative(t, "sdk/c/test/batch_test.c", "sdk/c/wasmstream_time.c")
	var args []string
	for _, p := range []string{abitest.BatchesPath(), abitest.Path(), abitest.TriggersPath()} {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, a)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}
