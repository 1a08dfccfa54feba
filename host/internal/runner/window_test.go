package runner

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// windowWant is what a window must say after a sequence of transitions:
// through its methods where it has one, its fields otherwise.
type windowWant struct {
	start, next int64
	commit      *kgo.EpochOffset // nil: nothing to commit
	failedAt    int64
	stoppedAt   int64
}

func TestWindowTransitions(t *testing.T) {
	at := func(off int64, epoch int32) *kgo.EpochOffset { return &kgo.EpochOffset{Epoch: epoch, Offset: off} }
	cases := []struct {
		name string
		ops  func(w *cursor)
		want windowWant
	}{
		{"empty", func(*cursor) {},
			windowWant{start: -1, next: -1, failedAt: -1, stoppedAt: -1}},
		{"processed records open the window and move next", func(w *cursor) {
			for o := int64(10); o < 13; o++ {
				w.take(o)
				w.processed(o, 3)
			}
		}, windowWant{start: 10, next: 13, commit: at(13, 3), failedAt: -1, stoppedAt: -1}},
		{"a taken record that failed opens the window but does not move next", func(w *cursor) {
			w.take(5)
			w.processed(5, 0)
			w.take(6)
			w.failed(6)
		}, windowWant{start: 5, next: 6, commit: at(6, 0), failedAt: 6, stoppedAt: 6}},
		{"committed closes the window and keeps next", func(w *cursor) {
			w.take(5)
			w.processed(5, 1)
			w.committed()
		}, windowWant{start: -1, next: 6, failedAt: -1, stoppedAt: -1}},
		{"the next window starts at its own first record", func(w *cursor) {
			w.take(5)
			w.processed(5, 1)
			w.committed()
			w.take(6)
			w.processed(6, 2)
		}, windowWant{start: 6, next: 7, commit: at(7, 2), failedAt: -1, stoppedAt: -1}},
		{"aborted forgets next: the re-delivered records run again", func(w *cursor) {
			w.take(5)
			w.processed(5, 1)
			w.aborted()
		}, windowWant{start: -1, next: -1, failedAt: -1, stoppedAt: -1}},
		{"rewound forgets the window", func(w *cursor) {
			w.take(5)
			w.processed(5, 1)
			w.rewound()
		}, windowWant{start: -1, next: -1, failedAt: -1, stoppedAt: -1}},
		{"stopAtFailure stops the batch at the failed record", func(w *cursor) {
			w.take(3)
			w.failed(3)
			w.takeStop()
			w.stopAtFailure()
		}, windowWant{start: 3, next: -1, failedAt: 3, stoppedAt: 3}},
		{"takeStop clears the stop", func(w *cursor) {
			w.stopAt(8)
			w.takeStop()
		}, windowWant{start: -1, next: -1, failedAt: -1, stoppedAt: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newCursor()
			c.ops(&w)
			got := windowWant{start: w.start, next: w.next, failedAt: w.failedAt, stoppedAt: w.stoppedAt}
			if off, ok := w.commitOffset(); ok {
				got.commit = &off
			}
			if got.start != c.want.start || got.next != c.want.next || got.failedAt != c.want.failedAt ||
				got.stoppedAt != c.want.stoppedAt || (got.commit == nil) != (c.want.commit == nil) ||
				(got.commit != nil && *got.commit != *c.want.commit) {
				t.Fatalf("got %+v commit %v, want %+v commit %v", got, got.commit, c.want, c.want.commit)
			}
		})
	}
}

// take skips what the window already processed: a re-fetch after a rewind
// of the consumer must not run a record twice (I5), and after an abort
// everything runs again.
func TestWindowTakeSkipsProcessed(t *testing.T) {
	w := newCursor()
	for o := int64(0); o < 4; o++ {
		if !w.take(o) {
			t.Fatalf("fresh record %d skipped", o)
		}
		w.processed(o, 0)
	}
	for o := int64(0); o < 4; o++ {
		if w.take(o) {
			t.Fatalf("processed record %d taken again", o)
		}
	}
	if !w.take(4) {
		t.Fatal("the record after next skipped")
	}
	w.aborted()
	if !w.take(0) {
		t.Fatal("after an abort the re-delivered record 0 is skipped")
	}
}

// takeStop and rewound hand out an offset the loop rewinds the consumer to,
// once: a second call has none.
func TestWindowRewindOffsets(t *testing.T) {
	stop := func(w *cursor) (int64, bool) { return w.takeStop() }
	rewound := func(w *cursor) (int64, bool) { return w.rewound() }
	cases := []struct {
		name  string
		setup func(w *cursor)
		take  func(w *cursor) (int64, bool)
		want  int64
		ok    bool
	}{
		{"no stop", func(*cursor) {}, stop, 0, false},
		{"stop", func(w *cursor) { w.stopAt(7) }, stop, 7, true},
		{"stop at the failed record", func(w *cursor) { w.take(3); w.failed(3) }, stop, 3, true},
		{"empty window", func(*cursor) {}, rewound, 0, false},
		{"window of two", func(w *cursor) {
			w.take(20)
			w.processed(20, 0)
			w.take(21)
			w.processed(21, 0)
		}, rewound, 20, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newCursor()
			c.setup(&w)
			if at, ok := c.take(&w); ok != c.ok || at != c.want {
				t.Fatalf("got %d, %v; want %d, %v", at, ok, c.want, c.ok)
			}
			if at, ok := c.take(&w); ok {
				t.Fatalf("taken twice: the second time %d", at)
			}
			// No case processed a record it keeps: a rewound window in
			// particular has nothing left to commit.
			if off, ok := w.commitOffset(); ok {
				t.Fatalf("offset %d left to commit", off.Offset)
			}
		})
	}
}

// A commit point that fails to commit (a retriable group error) leaves the
// window as it was: its offset goes with the next commit point.
func TestWindowCommitOffsetWithoutCommit(t *testing.T) {
	w := newCursor()
	w.take(0)
	w.processed(0, 4)
	for range 2 {
		if off, ok := w.commitOffset(); !ok || off != (kgo.EpochOffset{Epoch: 4, Offset: 1}) {
			t.Fatalf("commitOffset = %+v, %v", off, ok)
		}
	}
	w.committed()
	if _, ok := w.commitOffset(); ok {
		t.Fatal("committed window still has an offset to commit")
	}
}

func TestWindowCheckpoints(t *testing.T) {
	w := newWindow(1, 3)
	if got := w.takeCheckpoints(); len(got) != 0 {
		t.Fatalf("checkpoints of an empty window %v", got)
	}
	// Acknowledgements arrive out of order: the checkpoint is after the
	// highest one.
	w.changelogAcked(0, 9)
	w.changelogAcked(0, 4)
	w.changelogAcked(2, 0)
	if got, want := w.takeCheckpoints(), map[int]int64{0: 10, 2: 1}; !maps.Equal(got, want) {
		t.Fatalf("checkpoints %v, want %v", got, want)
	}
	if got := w.takeCheckpoints(); len(got) != 0 {
		t.Fatalf("checkpoints taken twice: %v", got)
	}
	w.changelogAcked(1, 5)
	w.aborted()
	if got := w.takeCheckpoints(); len(got) != 0 {
		t.Fatalf("an aborted window keeps checkpoints %v", got)
	}
}

func TestWindowLag(t *testing.T) {
	cases := []struct {
		name         string
		next         int64 // -1: nothing processed
		end, fetched int64
		lag          int64
		ok           bool
	}{
		{"end unknown", -1, -1, -1, 0, false},
		{"nothing processed: from the fetched end", -1, 100, 40, 60, true},
		{"from the commit position", 30, 100, 40, 70, true},
		{"fetched past the end seen", 30, 20, 40, 10, true},
		{"never negative", 50, 40, -1, 0, true},
		{"empty partition", -1, 0, -1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newCursor()
			if c.next >= 0 {
				w.take(c.next - 1)
				w.processed(c.next-1, 0)
			}
			lag, ok := w.lag(c.end, c.fetched)
			if lag != c.lag || ok != c.ok {
				t.Fatalf("lag = %d, %v; want %d, %v", lag, ok, c.lag, c.ok)
			}
		})
	}
}
