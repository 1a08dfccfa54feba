// Package testutil holds small helpers shared by tests and benchmarks:
// waiting for a condition instead of sleeping for one, measuring CPU time,
// and running a test's dangerous part in a child process under an
// address-space cap (child.go).
package testutil

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually and Consistently check their
// condition.
const pollEvery = 10 * time.Millisecond

// Eventually checks cond until it returns nil and fails t if it has not
// within timeout. cond's last error says what was still missing, and is in
// the failure message.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
			return
		}
		time.Sleep(pollEvery)
	}
}

// Consistently checks cond for the whole of d and fails t the first time it
// returns an error: for what must not happen, such as a stopped task moving
// on, checked for as long as a wrong implementation would need to show it.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			t.Fatalf("within %s: %v", d, err)
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(pollEvery)
	}
}
