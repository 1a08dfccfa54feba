package main

import (
	"testing"
	"time"
)

func TestDoneDetector(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms                 int
		lag, backlog, prog int64
		done               bool
		doneMs             int
	}
	for name, steps := range map[string][]step{
		// Input committed at 300 ms, the last output at 400 ms: done at 400
		// once 1 s passed without a change.
		"done at the last change": {
			{ms: 0, lag: 100, prog: 0},
			{ms: 100, lag: 60, prog: 50},
			{ms: 200, lag: 20, prog: 120},
			{ms: 300, lag: 0, prog: 200},
			{ms: 400, lag: 0, prog: 230},
			{ms: 900, lag: 0, prog: 230},
			{ms: 1400, lag: 0, prog: 230, done: true, doneMs: 400},
		},
		// A stall with input left is never done, however long.
		"input left": {
			{ms: 0, lag: 10, prog: 5},
			{ms: 5000, lag: 10, prog: 5},
			{ms: 60000, lag: 10, prog: 5},
		},
		// Input committed but records left in the repartition topic.
		"backlog left": {
			{ms: 0, lag: 0, backlog: 7, prog: 5},
			{ms: 5000, lag: 0, backlog: 7, prog: 5},
		},
		// A change inside the quiet period restarts it.
		"quiet restarts": {
			{ms: 0, lag: 0, prog: 5},
			{ms: 900, lag: 0, prog: 6},
			{ms: 1500, lag: 0, prog: 6},
			{ms: 1900, lag: 0, prog: 6, done: true, doneMs: 900},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := DoneDetector{Quiet: time.Second}
			for _, s := range steps {
				done, when := d.Observe(Sample{At: at(s.ms), InputLag: s.lag, Backlog: s.backlog, Progress: s.prog})
				if done != s.done {
					t.Fatalf("at %d ms: done = %v, want %v", s.ms, done, s.done)
				}
				if done && !when.Equal(at(s.doneMs)) {
					t.Fatalf("done at %v, want %d ms", when.Sub(t0), s.doneMs)
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	w := &Watch{Group: "app", Input: "in", InputEnds: map[int32]int64{0: 100, 1: 50}, Output: "out", Prefix: "app-"}
	ends := map[string]map[int32]int64{
		"in":                   {0: 100, 1: 50},
		"out":                  {0: 30, 1: 40},
		"app-counts-changelog": {0: 7},
		"app-x-repartition":    {0: 20, 1: 10},
		"other-app-out":        {0: 1000}, // another run's topic: not ours
	}
	committed := map[string]map[int32]int64{
		"in":                {0: 100}, // partition 1 not committed yet: lag 50
		"app-x-repartition": {0: 19, 1: 5},
	}
	s := summarize(time.Time{}, w, ends, committed)
	if s.InputLag != 50 {
		t.Errorf("InputLag = %d, want 50", s.InputLag)
	}
	// Partition 0 is one short (a marker is allowed), partition 1 five
	// short: 4 records left.
	if s.Backlog != 4 {
		t.Errorf("Backlog = %d, want 4", s.Backlog)
	}
	// Ends of out and app-* (30+40+7+20+10) plus every commit (100+19+5).
	if s.Progress != 107+124 {
		t.Errorf("Progress = %d, want %d", s.Progress, 107+124)
	}
}
