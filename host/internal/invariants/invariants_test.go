package invariants

import (
	"errors"
	"testing"
)

// Assertf panics with a *Violation exactly when invariants are enabled and
// the condition is false. Run under both builds: `go test` and
// `go test -tags invariants` (or -race).
func TestAssertf(t *testing.T) {
	panicked := func(cond bool) (v *Violation) {
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); !ok || !errors.As(err, &v) {
					t.Fatalf("Assertf panicked with %v, want a *Violation", r)
				}
			}
		}()
		Assertf(cond, "checked %d", 42)
		return nil
	}
	if v := panicked(true); v != nil {
		t.Fatalf("Assertf(true) panicked: %v", v)
	}
	v := panicked(false)
	switch {
	case Enabled && v == nil:
		t.Fatal("invariants enabled, and Assertf(false) did not panic")
	case Enabled && v.Error() != "wasmstream: invariant violated: checked 42":
		t.Fatalf("violation says %q", v.Error())
	case !Enabled && v != nil:
		t.Fatalf("invariants disabled, and Assertf(false) panicked: %v", v)
	}
	t.Logf("invariants enabled: %v", Enabled)
}
