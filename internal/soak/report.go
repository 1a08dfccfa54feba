package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// report prints the soak's figures and verdict to s.out and to
// <work>/report.txt, and the samples and events to <work>/samples.csv and
// <work>/events.txt.
func (s *soakRun) report(r Report, end time.Duration, lines, words, records int64) error {
	f, err := os.Create(filepath.Join(s.o.Work, "report.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := io.MultiWriter(s.out, f)
	s.writeReport(w, r, end, lines, words, records)
	if err := s.writeSamples(filepath.Join(s.o.Work, "samples.csv")); err != nil {
		return err
	}
	ev, err := os.Create(filepath.Join(s.o.Work, "events.txt"))
	if err != nil {
		return err
	}
	defer ev.Close()
	for _, e := range s.events {
		fmt.Fprintf(ev, "%s\t%s\t%s\n", clock(e.At), e.Kind, e.Detail)
	}
	return nil
}

func (s *soakRun) writeReport(w io.Writer, r Report, end time.Duration, lines, words, records int64) {
	kinds := map[string]int{}
	for _, e := range s.events {
		kinds[e.Kind]++
	}
	fmt.Fprintf(w, "\n=== soak %s: %s of load, %s builds ===\n", s.app, clock(end), s.o.Builds)
	fmt.Fprintf(w, "input: %d lines (%d words), %d passthrough records; %d deploys, %d rollbacks, %d joins of a second process\n",
		lines, words, records, kinds[EventDeploy], kinds[EventRollback], kinds[EventJoin])
	var maxLag Sample
	for _, x := range s.samples {
		if x.Proc == "main" && x.Lag > maxLag.Lag {
			maxLag = x
		}
	}
	fmt.Fprintf(w, "lag: at most %d records (at %s); the samples are in samples.csv\n", maxLag.Lag, clock(maxLag.At))

	fmt.Fprintf(w, "\ngrowth of the main process after the %s warm-up (least squares; settled samples):\n", r.Warmup)
	fmt.Fprintf(w, "  %-11s %16s %6s %5s   %16s %6s %5s\n", "measure", "per minute", "R²", "n", "per swap", "R²", "n")
	for _, m := range []struct{ name, unit string }{{"host", "bytes"}, {"heap", "bytes"}, {"plugins", "bytes"}, {"rss", "bytes"}, {"goroutines", ""}, {"fds", ""}, {"threads", ""}, {"state", "bytes"}} {
		pm := r.PerMinute[m.name]
		ps, ok := r.PerSwap[m.name]
		swap := fmt.Sprintf("%16s %6s %5s", "-", "", "")
		if ok {
			swap = fmt.Sprintf("%16s %6.2f %5d", amount(ps.Slope, m.unit), ps.R2, ps.N)
		}
		fmt.Fprintf(w, "  %-11s %16s %6.2f %5d   %s\n", m.name, amount(pm.Slope, m.unit), pm.R2, pm.N, swap)
	}

	fmt.Fprintf(w, "\nthe main process after each swap's canary window (of its settled samples before the next swap, the one of median host heap):\n")
	fmt.Fprintf(w, "  %4s %-8s %6s %7s %11s %11s %11s %11s %5s %4s %7s %4s %5s %8s\n", "swap", "kind", "at", "sample", "host heap", "live heap", "plugins", "RSS", "gorts", "fds", "threads", "mods", "insts", "versions")
	for _, p := range r.Points {
		if p.Sample == nil {
			fmt.Fprintf(w, "  %4d %-8s %6s %7s (no settled sample)\n", p.Swap, p.Event.Kind, clock(p.Event.At), "-")
			continue
		}
		x := p.Sample
		fmt.Fprintf(w, "  %4d %-8s %6s %7s %11s %11s %11s %11s %5d %4d %7d %4d %5d %8d\n", p.Swap, p.Event.Kind, clock(p.Event.At), clock(x.At),
			amount(x.hostHeap(), "bytes"), amount(float64(x.HeapLive), "bytes"), amount(float64(x.PluginMemory), "bytes"), amount(float64(x.RSS), "bytes"),
			x.Goroutines, x.FDs, x.Threads, x.Modules, x.Instances, x.Versions)
	}

	var xs, host, heap, rss, lag []float64
	var marks []float64
	for _, smp := range s.samples {
		if smp.Proc != "main" {
			continue
		}
		xs = append(xs, smp.At.Minutes())
		host = append(host, smp.hostHeap())
		heap = append(heap, float64(smp.HeapLive))
		rss = append(rss, float64(smp.RSS))
		lag = append(lag, float64(smp.Lag))
	}
	for _, e := range s.events {
		if e.swap() {
			marks = append(marks, e.At.Minutes())
		}
	}
	fmt.Fprintln(w)
	Chart(w, "host heap of the main process after a GC: the live heap without the plugins' memory (| under the axis: a swap)", xs, host, marks, 72, 10, "bytes")
	fmt.Fprintln(w)
	Chart(w, "live heap of the main process after a GC", xs, heap, marks, 72, 8, "bytes")
	fmt.Fprintln(w)
	Chart(w, "RSS of the main process", xs, rss, marks, 72, 8, "bytes")
	fmt.Fprintln(w)
	Chart(w, "lag of the group (records)", xs, lag, marks, 72, 5, "")

	fmt.Fprintln(w)
	if r.OK() {
		fmt.Fprintf(w, "PASS: within every bound (%s)\n", boundsText())
		return
	}
	fmt.Fprintf(w, "FAIL (%d):\n", len(r.Failures))
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

func boundsText() string {
	b := DefaultBounds
	return fmt.Sprintf("host heap %s/min and %s/swap, live heap %s/swap, RSS %s/min and %s/swap, each swap's host heap within %s of swap 2's, goroutines, fds and threads %.1f/swap",
		amount(b.HostHeapPerMinute, "bytes"), amount(b.HostHeapPerSwap, "bytes"), amount(b.HeapPerSwap, "bytes"), amount(b.RSSPerMinute, "bytes"),
		amount(b.RSSPerSwap, "bytes"), amount(b.AfterSwap, "bytes"), b.GoroutinesPerSwap)
}

func (s *soakRun) writeSamples(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	fmt.Fprintln(bw, "seconds,process,heap_live,plugin_memory,rss,goroutines,fds,threads,tasks,instances,modules,versions,state_bytes,lag,settled")
	samples := append([]Sample(nil), s.samples...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].At < samples[j].At })
	for _, x := range samples {
		fmt.Fprintf(bw, "%.1f,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%t\n", x.At.Seconds(), x.Proc, x.HeapLive, x.PluginMemory, x.RSS, x.Goroutines,
			x.FDs, x.Threads, x.Tasks, x.Instances, x.Modules, x.Versions, x.StateBytes, x.Lag, x.Settled)
	}
	return bw.Flush()
}
