//go:build !invariants && !race

package invariants

// Enabled is false: this build leaves the invariant checks out (build with
// -tags invariants or -race to run them).
const Enabled = false
