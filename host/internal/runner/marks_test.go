package runner

import (
	"errors"
	"fmt"
	"testing"
)

// Keys carried past commit points that ran out of time count against the
// next windows' marks: a slow on_commit cannot make the carried set grow
// without end. A carried key marked again is no new key.
func TestCarriedMarksCountAgainstTheLimit(t *testing.T) {
	k := newTimekeeper(nil, 0, TimeLimits{CommitMarks: 10})
	mark := func(key string) error {
		k.beginCall(1)
		_, err := k.Mark([]byte(key), 1)
		k.endCall(err == nil)
		return err
	}
	for i := range 10 {
		if err := mark(fmt.Sprintf("a%d", i)); err != nil {
			t.Fatalf("mark %d: %v", i, err)
		}
	}
	if err := mark("over"); !errors.Is(err, ErrMarkLimit) {
		t.Fatalf("the 11th key of a window: %v, want the mark limit", err)
	}
	// A commit point with time for none of them: all ten are carried.
	k.carryMarks(k.takeMarks())
	k.committed()
	if len(k.carried) != 10 || k.carriedBytes != 20 {
		t.Fatalf("carried %d keys of %d bytes, want 10 of 20", len(k.carried), k.carriedBytes)
	}
	if err := mark("b0"); !errors.Is(err, ErrMarkLimit) {
		t.Fatalf("a new key while ten are carried: %v, want the mark limit", err)
	}
	if err := mark("a3"); err != nil {
		t.Fatalf("a carried key marked again: %v", err)
	}
	// The next commit point calls them all: the window is free again.
	ms := k.takeMarks()
	if len(ms) != 10 {
		t.Fatalf("%d keys to call, want the 10 carried (a3 once)", len(ms))
	}
	k.carryMarks(nil)
	k.committed()
	if len(k.carried) != 0 || k.carriedBytes != 0 {
		t.Fatalf("carried %d keys of %d bytes after a commit point called them all", len(k.carried), k.carriedBytes)
	}
	if err := mark("b0"); err != nil {
		t.Fatalf("a new key once nothing is carried: %v", err)
	}
}
