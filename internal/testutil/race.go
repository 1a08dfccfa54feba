//go:build race

package testutil

// Race says the test binary runs under the race detector, whose
// instrumentation multiplies memory and CPU time: tests that measure a
// process's growth or time against an estimate skip themselves under it
// (make test runs them without it as well).
const Race = true
