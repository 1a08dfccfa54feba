package engine

import (
	"strings"
	"testing"
	"time"
)

// The input buffer's growth is a call made on a record's behalf: it runs
// under the record's time budget, not under init's. With an init budget of
// an hour, a wasmstream_input that spins would hold the record for an hour
// if it ran under init's; it fails the record within its own budget.
func TestInputBufferCallUnderRecordBudget(t *testing.T) {
	r, _ := newRuntime(t, Options{RecordTimeout: 200 * time.Millisecond, InitTimeout: time.Hour})
	i, _ := instantiate(t, compileFile(t, r, "slowinput"), Binding{})
	if err := i.Process(bg, rec("k", "small")); err != nil {
		t.Fatalf("a record that fits: %v", err)
	}
	err := i.Process(bg, rec("k", strings.Repeat("v", 10000)))
	if KindOf(err) != Timeout || !strings.Contains(err.Error(), "200ms") {
		t.Fatalf("a record whose buffer call spins: %v, want a timeout after the record's 200ms", err)
	}
	// The instance is replaced; the next small record goes through.
	if err := i.Process(bg, rec("k", "small")); err != nil {
		t.Fatalf("after the timeout: %v", err)
	}
}
