package plugin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// The store's disk budget error reaches the engine as ErrStateLimit (the
// plugin gets ELIMIT), an entry its changelog would refuse as
// ErrStateTooLarge (ETOOLARGE), keeping the store's message; other errors pass
// through as they are.
func TestStateLimitReachesTheEngine(t *testing.T) {
	be := &state.DiskBudgetError{Task: "p/in/0", Store: "s", Used: 10, Size: 5, Budget: 12}
	err := stateLimit(fmt.Errorf("timer: %w", be))
	if !errors.Is(err, engine.ErrStateLimit) || !errors.Is(err, state.ErrDiskBudget) {
		t.Fatalf("%v: not ErrStateLimit and ErrDiskBudget", err)
	}
	se := &state.SizeError{What: "entry", Store: "s", Size: 11, Max: 10}
	if err := stateLimit(fmt.Errorf("timer: %w", se)); !errors.Is(err, engine.ErrStateTooLarge) || errors.Is(err, engine.ErrStateLimit) || !errors.Is(err, state.ErrEntryTooLarge) {
		t.Fatalf("%v: not ErrStateTooLarge and ErrEntryTooLarge", err)
	}
	other := errors.New("disk on fire")
	if got := stateLimit(other); got != other {
		t.Fatalf("another error became %v", got)
	}
	if stateLimit(nil) != nil {
		t.Fatal("nil became an error")
	}
}
