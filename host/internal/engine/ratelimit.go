package engine

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// logLimiter rate-limits one instance's log lines (the log import and its
// stdout and stderr) with two token buckets, lines and bytes (LogLimits).
// Two records that log 290 MB would otherwise cost the host that much
// logging. Everything but dropped runs on the instance's goroutine.
type logLimiter struct {
	lim   LogLimits
	log   *slog.Logger
	now   func() time.Time
	lines float64 // tokens
	bytes float64
	last  time.Time // of the last refill

	dropped     atomic.Uint64 // lines dropped since the instance was created
	pending     uint64        // dropped since the last summary line
	lastSummary time.Time
}

func newLogLimiter(lim LogLimits, log *slog.Logger, now func() time.Time) *logLimiter {
	t := now()
	return &logLimiter{lim: lim, log: log, now: now,
		lines: float64(lim.BurstLines), bytes: float64(lim.BurstBytes), last: t, lastSummary: t}
}

// allow reports whether a line of n bytes may be logged now, taking its
// tokens; a refused line is counted as dropped.
func (l *logLimiter) allow(n int) bool {
	t := l.now()
	if dt := t.Sub(l.last).Seconds(); dt > 0 {
		l.lines = min(l.lines+dt*l.lim.LinesPerSecond, float64(l.lim.BurstLines))
		l.bytes = min(l.bytes+dt*l.lim.BytesPerSecond, float64(l.lim.BurstBytes))
		l.last = t
	}
	cost := float64(min(n, l.lim.BurstBytes))
	if l.lines >= 1 && l.bytes >= cost {
		l.lines--
		l.bytes -= cost
		return true
	}
	l.dropped.Add(1)
	l.pending++
	l.summarize(t, false)
	return false
}

// summarize logs how many lines were dropped since the last summary, at most
// once per SummaryInterval unless final.
func (l *logLimiter) summarize(t time.Time, final bool) {
	if l.pending == 0 || (!final && t.Sub(l.lastSummary) < l.lim.SummaryInterval) {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "plugin log lines dropped by the rate limit",
		slog.Uint64("dropped", l.pending), slog.Uint64("dropped_total", l.dropped.Load()),
		slog.Duration("since", t.Sub(l.lastSummary)),
		slog.Float64("lines_per_second", l.lim.LinesPerSecond), slog.Float64("bytes_per_second", l.lim.BytesPerSecond))
	l.pending = 0
	l.lastSummary = t
}

// DroppedLogLines is how many log, stdout and stderr lines of this
// instance the log rate limit (Options.Log) has dropped since it was
// created, for a metric. Safe to call from any goroutine.
func (i *Instance) DroppedLogLines() uint64 { return i.logs.dropped.Load() }
