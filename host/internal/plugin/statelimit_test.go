package plugin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// The store's disk budget error reaches the engine as ErrStateLimit (the
// plugin gets ELIMIT), keeping the store's message; other errors pass
// through as they are.
func TestStateLimitReachesTheEngine(t *testing.T) {
	be := &state.DiskBudgetError{Task: "p/in/0", Store: "s", Used: 10, Size: 5, Budget: 12}
	err := stateLimit(fmt.Errorf("timer: %w", be))
	if !errors.Is(err, engine.ErrStateLimit) || !errors.Is(err, state.ErrDiskBudget) {
		t.Fatalf("%v: not ErrStateLimit and ErrDiskBudget", err)
	}
	other := errors.New("disk on fire")
	if got := stateLimit(other); got != other {
		t.Fatalf("another error became %v", got)
	}
	if stateLimit(nil) != nil {
		t.Fatal("nil became an error")
	}
}
