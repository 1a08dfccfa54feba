package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	calls := 0
	rec := &recorder{TB: t}
	Eventually(rec, 5*time.Second, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if rec.failed != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls; want success on the third", rec.failed, calls)
	}

	rec = &recorder{TB: t}
	start := time.Now()
	Eventually(rec, 50*time.Millisecond, func() error { return errors.New("still 7") })
	if !strings.Contains(rec.failed, "still 7") || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("failed %q after %s; want the last error after the timeout", rec.failed, time.Since(start))
	}
}

func TestConsistently(t *testing.T) {
	rec := &recorder{TB: t}
	calls := 0
	start := time.Now()
	Consistently(rec, 50*time.Millisecond, func() error { calls++; return nil })
	if rec.failed != "" || calls < 2 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("failed %q, %d calls in %s; want no failure, checked for the whole window", rec.failed, calls, time.Since(start))
	}

	rec = &recorder{TB: t}
	calls = 0
	Consistently(rec, 5*time.Second, func() error {
		calls++
		if calls == 2 {
			return errors.New("moved on")
		}
		return nil
	})
	if !strings.Contains(rec.failed, "moved on") || calls != 2 {
		t.Fatalf("failed %q after %d calls; want a failure at the second", rec.failed, calls)
	}
}
