// Package invariants holds checks of the host's internal invariants that
// run in tests and cost nothing in a production build (Pebble's
// internal/invariants): Enabled is a constant, true under the race detector
// (`go test -race`, which `make test` runs) or the `invariants` build tag
// (`go test -tags invariants`), false otherwise, so a check written as
//
//	if invariants.Enabled {
//		invariants.Assertf(slices.IsSorted(keys), "store %q: keys out of order", name)
//	}
//
// is removed by the compiler from a normal build, however costly its
// condition. A broken invariant is a bug in the host, never bad input: the
// check panics, so the test that reached it fails where it happened.
//
// Bad input (a hostile plugin, a bad config, a broker error) is never an
// invariant: it gets an error in every build.
package invariants

import "fmt"

// Violation is the value an Assertf panics with.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return "wasmstream: invariant violated: " + v.Msg }

// Assertf panics with a *Violation built from format and args when
// invariants are enabled and cond is false; otherwise it does nothing. Wrap
// the call in `if Enabled` when cond or args cost anything to compute.
func Assertf(cond bool, format string, args ...any) {
	if Enabled && !cond {
		panic(&Violation{Msg: fmt.Sprintf(format, args...)})
	}
}
