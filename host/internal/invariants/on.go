//go:build invariants || race

package invariants

// Enabled is true: this build runs the invariant checks (the invariants
// build tag or the race detector).
const Enabled = true
