//go:build !race

package testutil

// Race says the test binary runs under the race detector (race.go).
const Race = false
