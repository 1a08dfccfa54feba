package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Sample is one measure of one wasmstream process of the soak.
type Sample struct {
	At   time.Duration // since the soak started
	Proc string        // "main" or "second"
	// From the process's /debug/snapshot?gc=1: the live heap just after a
	// garbage collection, and /proc's resident set, threads and fds.
	HeapLive   uint64
	RSS        int64
	Goroutines int
	FDs        int
	Threads    int
	// Summed over the process's processors. PluginMemory is the linear
	// memory of the plugin instances (part of HeapLive): the plugins' own
	// memory, which grows with an instance's work and starts small again
	// in a new one, so it differs from one swap to the next by how old
	// the instances are when measured.
	Tasks, Instances, Modules, Versions int
	PluginMemory                        int64
	// StateBytes is the size of the process's state directory.
	StateBytes int64
	// Lag is the group's lag over both inputs, in records (the same for
	// both processes; measured with the main process's samples).
	Lag int64
	// Settled: the process holds every task of the app, each with one
	// instance (no swap in the making, no canary window open), and none
	// restoring: the state in which samples of different times compare.
	Settled bool
}

// Event is something the soak did.
type Event struct {
	At     time.Duration
	Kind   string // EventDeploy, EventRollback, EventJoin, EventLeave
	Detail string
}

// Kinds of Event.
const (
	EventDeploy   = "deploy"
	EventRollback = "rollback"
	EventJoin     = "join"
	EventLeave    = "leave"
)

func (e Event) swap() bool { return e.Kind == EventDeploy || e.Kind == EventRollback }

// Fit is the least-squares line y = Intercept + Slope*x through N points,
// with its coefficient of determination R2 (0 when y does not vary).
type Fit struct {
	Slope, Intercept, R2 float64
	N                    int
}

// LinearFit fits a line through (xs[i], ys[i]). With fewer than two
// points, or all x equal, the slope is 0.
func LinearFit(xs, ys []float64) Fit {
	n := len(xs)
	f := Fit{N: n}
	if n == 0 {
		return f
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	f.Intercept = my
	if n < 2 || sxx == 0 {
		return f
	}
	f.Slope = sxy / sxx
	f.Intercept = my - f.Slope*mx
	if syy > 0 {
		f.R2 = sxy * sxy / (sxx * syy)
	}
	return f
}

// hostHeap is the live heap without the plugins' linear memory: what the
// host itself keeps.
func (s Sample) hostHeap() float64 { return float64(s.HeapLive) - float64(s.PluginMemory) }

// Bounds are what the soak fails above. Growth is in bytes (heap, RSS,
// state) or counts per minute after the warm-up, or per swap. The host
// heap is the live heap without the plugins' linear memory.
type Bounds struct {
	HostHeapPerMinute float64
	HostHeapPerSwap   float64
	HeapPerSwap       float64 // the whole live heap, plugins' memory included
	RSSPerMinute      float64
	RSSPerSwap        float64
	// AfterSwap bounds how far the host heap after each swap's canary
	// window may be above its level after the second swap.
	AfterSwap float64
	// GoroutinesPerSwap, FDsPerSwap and ThreadsPerSwap bound the fitted
	// growth of those counts per swap.
	GoroutinesPerSwap, FDsPerSwap, ThreadsPerSwap float64
}

// DefaultBounds are the soak's: a process that kept every replaced
// version (a 35-minute soak before versions were released: 4.3 MiB of live heap
// and 9.3 MiB of RSS per swap, 2.1 MiB of heap per minute) is far above
// each; a flat one is well below, whatever a busy shared machine adds.
var DefaultBounds = Bounds{
	HostHeapPerMinute: 128 << 10,
	HostHeapPerSwap:   256 << 10,
	HeapPerSwap:       1 << 20,
	RSSPerMinute:      1 << 20,
	RSSPerSwap:        2 << 20,
	AfterSwap:         1 << 20,
	GoroutinesPerSwap: 0.5,
	FDsPerSwap:        0.5,
	ThreadsPerSwap:    0.5,
}

// minPoints is how many points a fit needs to be judged: a line through
// three swaps' points "explains" them by chance (one soak of 14 minutes
// fitted RSS at 4.7 MiB per swap, R² 0.93, through 200, 207 and 210 MiB).
func minPoints(name string) int {
	if strings.HasSuffix(name, "per swap") {
		return 5
	}
	return 10
}

// minR2 is how much of the samples' variance a fitted growth over its
// bound must explain to fail the soak (unless it is 4 times the bound).
const minR2 = 0.3

// SwapPoint is the main process after one swap's canary window: of its
// settled samples from then until the next swap, the one with the median
// host heap (a garbage collection at a random point of a commit window
// finds a MiB or two more or less in flight; the median of a few is
// steadier than any one).
type SwapPoint struct {
	Swap   int // 1 for the first swap
	Event  Event
	Sample *Sample // nil when no settled sample fell in the window
}

// Report is the soak's verdict.
type Report struct {
	Warmup    time.Duration
	PerMinute map[string]Fit // host, heap, plugins, rss, goroutines, fds, threads, state (main, settled samples after the warm-up; state: every main sample)
	PerSwap   map[string]Fit // the same but state (after-swap points after the warm-up)
	Points    []SwapPoint
	Failures  []string
}

// OK reports whether the soak passed.
func (r Report) OK() bool { return len(r.Failures) == 0 }

// Analyze measures the main process's growth after warmup, per minute and
// per swap, and checks it against b. A swap's point is the median (by host
// heap) of the settled main samples at least canary+settle after it and
// before the next swap.
func Analyze(samples []Sample, events []Event, warmup, canary time.Duration, b Bounds) Report {
	const settle = 10 * time.Second
	r := Report{Warmup: warmup, PerMinute: map[string]Fit{}, PerSwap: map[string]Fit{}}
	var main []Sample
	for _, s := range samples {
		if s.Proc == "main" {
			main = append(main, s)
		}
	}
	sort.Slice(main, func(i, j int) bool { return main[i].At < main[j].At })
	var swaps []Event
	for _, e := range events {
		if e.swap() {
			swaps = append(swaps, e)
		}
	}
	sort.Slice(swaps, func(i, j int) bool { return swaps[i].At < swaps[j].At })
	for i, e := range swaps {
		p := SwapPoint{Swap: i + 1, Event: e}
		end := time.Duration(math.MaxInt64)
		if i+1 < len(swaps) {
			end = swaps[i+1].At
		}
		var window []*Sample
		for j := range main {
			s := &main[j]
			if s.Settled && s.At >= e.At+canary+settle && s.At < end {
				window = append(window, s)
			}
		}
		if len(window) > 0 {
			sort.SliceStable(window, func(a, b int) bool { return window[a].hostHeap() < window[b].hostHeap() })
			p.Sample = window[(len(window)-1)/2]
		}
		r.Points = append(r.Points, p)
	}

	measures := map[string]func(Sample) float64{
		"host":       Sample.hostHeap,
		"plugins":    func(s Sample) float64 { return float64(s.PluginMemory) },
		"heap":       func(s Sample) float64 { return float64(s.HeapLive) },
		"rss":        func(s Sample) float64 { return float64(s.RSS) },
		"goroutines": func(s Sample) float64 { return float64(s.Goroutines) },
		"fds":        func(s Sample) float64 { return float64(s.FDs) },
		"threads":    func(s Sample) float64 { return float64(s.Threads) },
	}
	for name, m := range measures {
		var xs, ys []float64
		for _, s := range main {
			if s.Settled && s.At >= warmup {
				xs, ys = append(xs, s.At.Minutes()), append(ys, m(s))
			}
		}
		r.PerMinute[name] = LinearFit(xs, ys)
		xs, ys = nil, nil
		for _, p := range r.Points {
			if p.Sample != nil && p.Event.At >= warmup {
				xs, ys = append(xs, float64(p.Swap)), append(ys, m(*p.Sample))
			}
		}
		r.PerSwap[name] = LinearFit(xs, ys)
	}
	var xs, ys []float64
	for _, s := range main {
		if s.At >= warmup {
			xs, ys = append(xs, s.At.Minutes()), append(ys, float64(s.StateBytes))
		}
	}
	r.PerMinute["state"] = LinearFit(xs, ys)

	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	for _, c := range []struct {
		name  string
		fit   Fit
		bound float64
		unit  string
	}{
		{"host heap per minute", r.PerMinute["host"], b.HostHeapPerMinute, "bytes"},
		{"RSS per minute", r.PerMinute["rss"], b.RSSPerMinute, "bytes"},
		{"host heap per swap", r.PerSwap["host"], b.HostHeapPerSwap, "bytes"},
		{"live heap per swap", r.PerSwap["heap"], b.HeapPerSwap, "bytes"},
		{"RSS per swap", r.PerSwap["rss"], b.RSSPerSwap, "bytes"},
		{"goroutines per swap", r.PerSwap["goroutines"], b.GoroutinesPerSwap, ""},
		{"fds per swap", r.PerSwap["fds"], b.FDsPerSwap, ""},
		{"threads per swap", r.PerSwap["threads"], b.ThreadsPerSwap, ""},
	} {
		if need := minPoints(c.name); c.fit.N < need {
			fail("%s: %d points after the warm-up, too few to judge a growth by (%d at least: run longer, or with a shorter warm-up)", c.name, c.fit.N, need)
			continue
		}
		// A leak grows steadily: its line explains the samples. A steep
		// line that explains nothing (R² near 0) is noise, which a short
		// or disturbed run has (RSS jumps as the runtime returns memory
		// and takes it again); only far over the bound does it fail.
		if c.fit.Slope > c.bound && (c.fit.R2 >= minR2 || c.fit.Slope > 4*c.bound) {
			fail("%s: %s, over the bound of %s (fit over %d points, R² %.2f)", c.name, amount(c.fit.Slope, c.unit), amount(c.bound, c.unit), c.fit.N, c.fit.R2)
		}
	}
	var ref *Sample
	for _, p := range r.Points {
		switch {
		case p.Sample == nil:
			fail("swap %d (%s at %s): no settled sample of the main process after its canary window", p.Swap, p.Event.Kind, clock(p.Event.At))
			continue
		case p.Swap == 2:
			ref = p.Sample
		}
		s := p.Sample
		if s.Instances != s.Tasks || s.Modules != s.Versions {
			fail("swap %d (%s at %s): %d instances for %d tasks, %d modules for %d versions held", p.Swap, p.Event.Kind, clock(p.Event.At),
				s.Instances, s.Tasks, s.Modules, s.Versions)
		}
		if ref != nil && p.Swap > 2 && s.hostHeap() > ref.hostHeap()+b.AfterSwap {
			fail("swap %d (%s at %s): host heap %s, more than %s above its level after swap 2 (%s)", p.Swap, p.Event.Kind, clock(p.Event.At),
				amount(s.hostHeap(), "bytes"), amount(b.AfterSwap, "bytes"), amount(ref.hostHeap(), "bytes"))
		}
	}
	if len(r.Points) < 3 {
		fail("%d swaps, want at least 3 (the level after the second is the reference)", len(r.Points))
	}
	return r
}

// amount formats v: bytes in KiB or MiB, counts with two decimals.
func amount(v float64, unit string) string {
	if unit != "bytes" {
		return fmt.Sprintf("%.2f", v)
	}
	if math.Abs(v) >= 1<<20 {
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", v/(1<<10))
}

// clock formats a time of the soak as minutes:seconds.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
