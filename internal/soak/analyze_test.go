package main

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestLinearFit(t *testing.T) {
	f := LinearFit([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7})
	if math.Abs(f.Slope-2) > 1e-9 || math.Abs(f.Intercept-1) > 1e-9 || math.Abs(f.R2-1) > 1e-9 || f.N != 4 {
		t.Fatalf("fit of y = 1 + 2x: %+v", f)
	}
	if f := LinearFit([]float64{0, 1, 2}, []float64{5, 5, 5}); f.Slope != 0 || f.Intercept != 5 || f.R2 != 0 {
		t.Fatalf("flat: %+v", f)
	}
	if f := LinearFit([]float64{2}, []float64{7}); f.Slope != 0 || f.N != 1 {
		t.Fatalf("one point: %+v", f)
	}
	if f := LinearFit(nil, nil); f.N != 0 || f.Slope != 0 {
		t.Fatalf("no point: %+v", f)
	}
	// Noise around a slope: the fit finds it.
	var xs, ys []float64
	for i := 0; i < 100; i++ {
		xs = append(xs, float64(i))
		ys = append(ys, 10+0.5*float64(i)+float64(i%3)-1)
	}
	if f := LinearFit(xs, ys); math.Abs(f.Slope-0.5) > 0.01 || f.R2 < 0.99 {
		t.Fatalf("noisy line: %+v", f)
	}
}

// soak makes the samples and events of a synthetic 30-minute soak: a
// sample every 10 s, a deploy every 2 minutes from minute 4 (every 7th a
// rollback), a second process present from 9:15 to 11:20; the main
// process's live heap is base plus perSwap for every swap so far plus
// perMinute per minute, with a wobble.
func soak(perSwap, perMinute float64) ([]Sample, []Event) {
	var events []Event
	for i, m := 0, 4; m < 30; i, m = i+1, m+2 {
		kind := EventDeploy
		if i%7 == 6 {
			kind = EventRollback
		}
		events = append(events, Event{At: time.Duration(m) * time.Minute, Kind: kind})
	}
	events = append(events, Event{At: 9*time.Minute + 15*time.Second, Kind: EventJoin}, Event{At: 11 * time.Minute, Kind: EventLeave})
	var samples []Sample
	for at := time.Duration(0); at < 30*time.Minute; at += 10 * time.Second {
		swaps := 0
		for _, e := range events {
			if e.swap() && e.At <= at {
				swaps++
			}
		}
		second := at >= 9*time.Minute+15*time.Second && at < 11*time.Minute+20*time.Second
		wobble := float64(int(at/(10*time.Second))%5) * 50_000
		s := Sample{At: at, Proc: "main", HeapLive: uint64(60<<20 + float64(swaps)*perSwap + at.Minutes()*perMinute + wobble),
			RSS: 200 << 20, Goroutines: 80, FDs: 40, Threads: 12, Tasks: 8, Instances: 8, Modules: 3, Versions: 3,
			StateBytes: 10 << 20, Settled: !second}
		if second {
			s.Tasks, s.Instances = 4, 4
			samples = append(samples, Sample{At: at, Proc: "second", HeapLive: 40 << 20, Tasks: 4, Instances: 4})
		}
		samples = append(samples, s)
	}
	return samples, events
}

func TestAnalyzeFlatPasses(t *testing.T) {
	samples, events := soak(0, 0)
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	if !r.OK() {
		t.Fatalf("a flat soak failed: %v", r.Failures)
	}
	if len(r.Points) != 13 {
		t.Fatalf("%d swap points, want 13", len(r.Points))
	}
	for _, p := range r.Points {
		if p.Sample == nil || p.Sample.Proc != "main" || !p.Sample.Settled || p.Sample.At < p.Event.At+70*time.Second {
			t.Fatalf("swap %d: point %+v", p.Swap, p.Sample)
		}
	}
	// The swap at minute 10 falls while the second process is there: its
	// point is among the settled samples after it left, before minute 12.
	if p := r.Points[3]; p.Sample.At < 11*time.Minute+20*time.Second || p.Sample.At >= 12*time.Minute {
		t.Fatalf("swap 4's point at %v", p.Sample.At)
	}
	if f := r.PerMinute["heap"]; math.Abs(f.Slope) > 10_000 {
		t.Fatalf("flat heap fitted at %v bytes/min", f.Slope)
	}
}

// The plugins' own memory differs from swap to swap (instances of other
// ages when measured) by far more than a MiB: the host heap, without it,
// is what must stay flat.
func TestAnalyzePluginMemoryVaries(t *testing.T) {
	samples, events := soak(0, 0)
	for i := range samples {
		extra := int64(int(samples[i].At/time.Minute)%3) * (6 << 20)
		samples[i].HeapLive += uint64(extra)
		samples[i].PluginMemory = 20<<20 + extra
	}
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	if !r.OK() {
		t.Fatalf("a soak whose host heap is flat failed: %v", r.Failures)
	}
	if f := r.PerMinute["plugins"]; f.N == 0 {
		t.Fatal("no fit of the plugins' memory")
	}
}

// A 35-minute soak before versions were released: 4.3 MiB of live heap kept per swap.
func TestAnalyzeLeakPerSwapFails(t *testing.T) {
	samples, events := soak(4.3*(1<<20), 0)
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	if r.OK() {
		t.Fatal("a soak that keeps 4.3 MiB per swap passed")
	}
	f := r.PerSwap["heap"]
	if math.Abs(f.Slope-4.3*(1<<20)) > 100_000 || f.R2 < 0.99 {
		t.Fatalf("per-swap fit %+v, want 4.3 MiB", f)
	}
	joined := strings.Join(r.Failures, "\n")
	for _, want := range []string{"host heap per swap: 4.3", "live heap per swap: 4.3", "host heap per minute", "more than 1.00 MiB above its level after swap 2"} {
		if !strings.Contains(joined, want) {
			t.Errorf("failures lack %q:\n%s", want, joined)
		}
	}
}

// A slow leak with time, not with swaps (a cache that only grows).
func TestAnalyzeLeakPerMinuteFails(t *testing.T) {
	samples, events := soak(0, 512<<10)
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	if r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "host heap per minute: 512.0 KiB") {
		t.Fatalf("failures %v, want the per-minute growth", r.Failures)
	}
}

// A swap that leaves an instance or a module behind fails, as does a swap
// with no settled sample after it, and too short a soak.
func TestAnalyzeCountsAndMissingPoints(t *testing.T) {
	samples, events := soak(0, 0)
	for i := range samples {
		if samples[i].Proc == "main" && samples[i].At > 20*time.Minute {
			samples[i].Modules = 4 // a fourth module from minute 20 on
		}
		if samples[i].At > 27*time.Minute {
			samples[i].Settled = false
		}
	}
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	joined := strings.Join(r.Failures, "\n")
	for _, want := range []string{"4 modules for 3 versions held", "swap 12 (deploy at 26:00): no settled sample"} {
		if !strings.Contains(joined, want) {
			t.Errorf("failures lack %q:\n%s", want, joined)
		}
	}
	r = Analyze(samples[:30], events[:1], time.Minute, time.Minute, DefaultBounds)
	if !strings.Contains(strings.Join(r.Failures, "\n"), "too few to judge") {
		t.Errorf("a 5-minute soak: %v", r.Failures)
	}
}

func TestChart(t *testing.T) {
	var sb strings.Builder
	xs := []float64{0, 1, 2, 3, 4}
	ys := []float64{10 << 20, 10 << 20, 11 << 20, 12 << 20, 12 << 20}
	Chart(&sb, "heap", xs, ys, []float64{2}, 20, 5, "bytes")
	lines := strings.Split(strings.TrimRight(sb.String(), "\n"), "\n")
	if len(lines) != 1+5+2 || lines[0] != "heap" {
		t.Fatalf("chart:\n%s", sb.String())
	}
	if !strings.HasPrefix(lines[1], "12.00 MiB |") || !strings.HasPrefix(lines[5], "10.00 MiB |") {
		t.Fatalf("y labels:\n%s", sb.String())
	}
	if !strings.HasSuffix(lines[1], "*") || lines[5][len("10.00 MiB |")] != '*' {
		t.Fatalf("points:\n%s", sb.String())
	}
	axis := lines[6]
	if strings.Count(axis, "|") != 1 || axis[strings.Index(axis, "+")+1+10] != '|' {
		t.Fatalf("mark at minute 2 not in the middle of the axis:\n%s", sb.String())
	}
	sb.Reset()
	Chart(&sb, "empty", nil, nil, nil, 20, 5, "")
	if !strings.Contains(sb.String(), "(no data)") {
		t.Fatalf("empty chart: %q", sb.String())
	}
}

// Every word lives in one partition and a line holds words of one
// partition: the word count's tasks never share a word.
func TestVocabKeyed(t *testing.T) {
	v, err := NewVocab(5000, 4)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for p, ws := range v.byPartition {
		total += len(ws)
		for _, w := range ws {
			if wordPartition(w, 4) != p {
				t.Fatalf("word %s in partition %d, hashes to %d", w, p, wordPartition(w, 4))
			}
		}
	}
	if total != 5000 {
		t.Fatalf("%d words, want 5000", total)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for p := 0; p < 4; p++ {
		for _, w := range v.Line(rng, p, 8) {
			if wordPartition(w, 4) != p {
				t.Fatalf("a line of partition %d holds %s", p, w)
			}
		}
	}
	if _, err := NewVocab(2, 4); err == nil {
		t.Fatal("a vocabulary leaving partitions empty was accepted")
	}
}

// The default schedule of a 30-minute soak: a swap every 2 minutes from
// minute 4 to 28, three of them rollbacks (the second right after the
// first: to a version the process released), and the second process
// joining four times, each time 85 s after a swap and leaving 2 minutes
// later, so that every swap has settled samples after its canary window.
func TestSchedule(t *testing.T) {
	o := Options{Duration: 30 * time.Minute, FirstDeploy: 4 * time.Minute, DeployEvery: 2 * time.Minute, RollbackEvery: 6,
		JoinFirst: 5*time.Minute + 25*time.Second, JoinEvery: 6 * time.Minute, JoinFor: 2 * time.Minute}
	var swaps, kinds []string
	joins := 0
	for _, a := range o.schedule() {
		switch a.kind {
		case EventDeploy, EventRollback:
			swaps = append(swaps, clock(a.at))
			kinds = append(kinds, a.kind[:1])
		case EventJoin:
			joins++
			if (a.at-o.FirstDeploy)%o.DeployEvery != 85*time.Second {
				t.Errorf("join at %s, want 85 s after a swap", clock(a.at))
			}
		}
	}
	if len(swaps) != 13 || swaps[0] != "4:00" || swaps[12] != "28:00" {
		t.Fatalf("swaps at %v", swaps)
	}
	if got := strings.Join(kinds, ""); got != "dddddrrddddrd" {
		t.Fatalf("kinds %s, want rollbacks at the 6th, 7th and 12th swap", got)
	}
	if joins != 4 {
		t.Fatalf("%d joins, want 4", joins)
	}
	o.Builds, o.Canary, o.Partitions, o.LinesPerSec, o.Words, o.RecordsPerSec, o.SampleEvery = "distinct", time.Minute, 4, 1, 1, 1, time.Second
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	bad := o
	bad.DeployEvery = 70 * time.Second
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "-deploy-every") {
		t.Fatalf("a deploy interval too short to measure after the canary window: %v", err)
	}
	short := o
	short.Duration, short.Warmup = 18*time.Minute, 8*time.Minute // swaps at 8, 10, 12, 14 and 16 minutes: 5
	if err := short.validate(); err != nil {
		t.Fatalf("five swaps after the warm-up: %v", err)
	}
	short.Duration = 17 * time.Minute // the swap at 16 minutes has no room before the end
	if err := short.validate(); err == nil || !strings.Contains(err.Error(), "4 swaps after the warm-up") {
		t.Fatalf("four swaps after the warm-up: %v", err)
	}
}

// Noise is not growth: RSS jumping up and down around a level fits a line
// over the bound that explains nothing (R² near 0), and passes; a steady
// climb at the same slope fails.
func TestAnalyzeNoiseIsNotGrowth(t *testing.T) {
	samples, events := soak(0, 0)
	for i := range samples {
		if samples[i].Proc == "main" && samples[i].At > 20*time.Minute && int(samples[i].At/(10*time.Second))%4 == 0 {
			samples[i].RSS += 90 << 20 // a spike now and then, late in the run
		}
	}
	r := Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	f := r.PerMinute["rss"]
	if f.Slope <= DefaultBounds.RSSPerMinute || f.R2 >= minR2 || !r.OK() {
		t.Fatalf("spiky RSS: fit %+v, failures %v; want a slope over the bound with a low R², passing", f, r.Failures)
	}
	for i := range samples {
		if samples[i].Proc == "main" {
			samples[i].RSS = 200<<20 + int64(samples[i].At.Minutes()*f.Slope)
		}
	}
	r = Analyze(samples, events, 8*time.Minute, time.Minute, DefaultBounds)
	if r.OK() {
		t.Fatalf("a steady RSS climb of %.0f bytes/min passed", f.Slope)
	}
}
