package main

import (
	"fmt"
	"time"
)

// Sample is one look at a run's progress, taken every poll interval.
type Sample struct {
	At time.Time
	// InputLag is the sum over the input partitions of end offset minus
	// the group's committed offset (a partition with no commit counts from
	// 0). The input is written before the run starts and without
	// transactions, so its end offsets are fixed and 0 is exact.
	InputLag int64
	// Backlog is the sum over the group's other committed partitions (Kafka
	// Streams' repartition topic) of end offset minus committed offset minus
	// one, never below 0. One is allowed per partition: under exactly-once
	// the last offset of such a topic is a transaction marker, which a
	// consumer may not have fetched when it last committed.
	Backlog int64
	// Progress is the sum of the end offsets of every topic the app writes
	// (its output topic and every topic named <app id>-...: changelogs,
	// repartition topics) plus the sum of the group's committed offsets.
	// Any record produced, transaction marker written or offset committed
	// changes it.
	Progress int64
}

// DoneDetector decides when a run has processed all of its input.
//
// A run is done at the first sample that shows the app's final state: all
// input committed (InputLag 0), nothing left in its internal topics
// (Backlog 0), and Progress unchanged for Quiet since. The time it reports
// is that first sample's, not the end of the quiet period: the quiet period
// only confirms that nothing moved any more. The check of the output
// against the true counts that follows is what proves the run complete; a
// stall longer than Quiet with input still unprocessed could not pass it.
type DoneDetector struct {
	Quiet time.Duration

	started  bool
	progress int64
	since    time.Time // when Progress took its current value
}

// Observe takes the next sample. It returns done and the time the run
// finished once the rule above holds.
func (d *DoneDetector) Observe(s Sample) (done bool, at time.Time) {
	if !d.started || s.Progress != d.progress {
		d.started, d.progress, d.since = true, s.Progress, s.At
	}
	if s.InputLag == 0 && s.Backlog == 0 && s.At.Sub(d.since) >= d.Quiet {
		return true, d.since
	}
	return false, time.Time{}
}

// String describes the state for a timeout message.
func (s Sample) String() string {
	return fmt.Sprintf("input lag %d, internal backlog %d, progress %d", s.InputLag, s.Backlog, s.Progress)
}
