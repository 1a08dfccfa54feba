package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report prints the results grouped by layout and guarantee: every run,
// the medians when there are several rounds, and the ratios wasmstream /
// Kafka Streams of the medians.
func Report(w io.Writer, results []Result, layouts []Layout, guarantees []string, cfgs []Config) {
	for _, l := range layouts {
		for _, g := range guarantees {
			var rs []Result
			for _, r := range results {
				if r.Layout == l && r.Guarantee == g {
					rs = append(rs, r)
				}
			}
			if len(rs) > 0 {
				reportGroup(w, l, g, rs, cfgs)
			}
		}
	}
}

var layoutDesc = map[Layout]string{
	LayoutKeyed: "each word in one partition",
	LayoutAny:   "any word on any partition",
}

func reportGroup(w io.Writer, l Layout, g string, rs []Result, cfgs []Config) {
	fmt.Fprintf(w, "\n== layout %s (%s), %s ==\n", l, layoutDesc[l], g)
	width := len("config")
	for _, c := range cfgs {
		width = max(width, len(c.Name))
	}
	// The medians first: every row's "x floor" needs its floor's.
	med := map[string]Result{}
	runs := map[string]int{}
	for _, c := range cfgs {
		var measured []Result
		for _, r := range rs {
			if r.Config.Name == c.Name && r.Measured() {
				measured = append(measured, r)
			}
		}
		if len(measured) > 0 {
			med[c.Name], runs[c.Name] = median(measured), len(measured)
		}
	}
	floors := floorsOf(med, cfgs)
	// Right-aligned figures; names padded here so they read left-aligned.
	name := func(n string) string { return fmt.Sprintf("%-*s", width, n) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tround\twall s\t1st commit s\tlines/s\tsteady lines/s\tCPU s\tCPU µs/line\tx floor\tbroker CPU s\t+broker x floor\tpeak RSS MiB\tdrain s\toutputs\tcheck\t\n", name("config"))
	dashes := strings.Repeat("-\t", 14)
	var failures []string
	for _, c := range cfgs {
		pending := ""
		floor, hasFloor := floors[c.EmitsPerCommit]
		for _, r := range rs {
			if r.Config.Name != c.Name {
				continue
			}
			switch {
			case r.Pending != "":
				pending = r.Pending
				continue
			case r.Err != nil:
				fmt.Fprintf(tw, "%s\t%d\t%sERROR\t\n", name(c.Name), r.Round, strings.Repeat("-\t", 13))
				failures = append(failures, fmt.Sprintf("%s round %d: %v", c.Name, r.Round, r.Err))
				continue
			}
			check := "PASS"
			if r.Check != nil {
				check = "FAIL"
				failures = append(failures, fmt.Sprintf("%s round %d: %v", c.Name, r.Round, r.Check))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t\n", name(c.Name), r.Round, figures(r, floor, hasFloor, check))
			if r.Note != "" {
				failures = append(failures, fmt.Sprintf("%s round %d (note): %s", c.Name, r.Round, r.Note))
			}
		}
		if pending != "" {
			// Every column a cell, so the row keeps the table's
			// alignment; the reason trails, not a cell, so it widens none.
			fmt.Fprintf(tw, "%s\t%s  not run: %s\n", name(c.Name), dashes, pending)
		}
		if m, ok := med[c.Name]; ok && runs[c.Name] > 1 {
			fmt.Fprintf(tw, "%s\tmedian\t%s\t\n", name(c.Name), figures(m, floor, hasFloor, fmt.Sprintf("%d runs", runs[c.Name])))
		}
	}
	tw.Flush()
	for _, f := range failures {
		fmt.Fprintf(w, "  %s\n", f)
	}
	reportFloors(w, floors)
	reportRatios(w, med, cfgs)
	reportBaselines(w, rs, med, cfgs)
}

// reportBaselines prints, for each configuration run by the -baseline
// binary too, the ratios of the session's binary to the baseline's: of the
// medians, and of lines/s round by round (the two ran next to each other in
// each round, so a round's ratio is the least disturbed by what the
// machine or the broker did meanwhile).
func reportBaselines(w io.Writer, rs []Result, med map[string]Result, cfgs []Config) {
	var lines []string
	for _, base := range cfgs {
		if base.BaselineOf == "" {
			continue
		}
		a, okA := med[base.BaselineOf]
		b, okB := med[base.Name]
		if !okA || !okB {
			continue
		}
		perRound := map[int][2]float64{}
		for _, r := range rs {
			if !r.Measured() {
				continue
			}
			v := perRound[r.Round]
			switch r.Config.Name {
			case base.BaselineOf:
				v[0] = r.LinesPerSec()
			case base.Name:
				v[1] = r.LinesPerSec()
			default:
				continue
			}
			perRound[r.Round] = v
		}
		var rounds []string
		for _, round := range slices.Sorted(maps.Keys(perRound)) {
			if v := perRound[round]; v[0] > 0 && v[1] > 0 {
				rounds = append(rounds, ratio(v[0], v[1]))
			}
		}
		lines = append(lines, base.BaselineOf+" / "+base.Name+"\t"+pairRatios(a, b)+"\t"+strings.Join(rounds, " "))
	}
	printRatios(w, "ratios of this binary to the baseline's (-baseline; of the medians, lines/s above 1 and CPU s, broker CPU s, peak RSS below 1 favour this binary; lines/s of each round, the pair run next to each other):",
		"lines/s by round", lines)
}

// pairRatios is the tab-separated ratios a/b of lines/s, steady lines/s,
// CPU s, broker CPU s and peak RSS.
func pairRatios(a, b Result) string {
	return strings.Join([]string{ratio(a.LinesPerSec(), b.LinesPerSec()), ratio(a.SteadyLinesPerSec(), b.SteadyLinesPerSec()),
		ratio(a.CPU.Seconds(), b.CPU.Seconds()), ratio(a.BrokerCPU.Seconds(), b.BrokerCPU.Seconds()),
		ratio(float64(a.PeakRSS), float64(b.PeakRSS))}, "\t")
}

// printRatios prints title and a table of ratio lines (pair, pairRatios,
// then the columns named in more), or nothing when there are none.
func printRatios(w io.Writer, title, more string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  pair\tlines/s\tsteady\tCPU s\tbroker CPU s\tpeak RSS\t"+more)
	for _, l := range lines {
		fmt.Fprintln(tw, "  "+l)
	}
	tw.Flush()
}

// floorsOf returns the median of the floor configuration of each emit
// mode (EmitsPerCommit) that was measured.
func floorsOf(med map[string]Result, cfgs []Config) map[bool]Result {
	floors := map[bool]Result{}
	for _, c := range cfgs {
		if m, ok := med[c.Name]; ok && c.System == SystemFloor {
			if _, seen := floors[c.EmitsPerCommit]; !seen {
				floors[c.EmitsPerCommit] = m
			}
		}
	}
	return floors
}

// reportFloors says what the "x floor" columns are relative to.
func reportFloors(w io.Writer, floors map[bool]Result) {
	for _, perCommit := range []bool{false, true} {
		f, ok := floors[perCommit]
		if !ok {
			continue
		}
		mode := "one output per update"
		if perCommit {
			mode = "the latest per word per commit"
		}
		fmt.Fprintf(w, "x floor: CPU per line over %s's (%.1f µs/line, %.1f with the broker's), the I/O floor of the configurations that emit %s\n",
			f.Config.Name, perLine(f.CPU, f.Lines), perLine(f.CPU+f.BrokerCPU, f.Lines), mode)
	}
}

// perLine is a CPU time per input line, in microseconds.
func perLine(cpu time.Duration, lines int) float64 {
	if lines <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(lines)
}

func figures(r Result, floor Result, hasFloor bool, check string) string {
	broker, xFloor, xAll, drain, steady := "-", "-", "-", "-", "-"
	if v := r.SteadyLinesPerSec(); v > 0 {
		steady = fmt.Sprintf("%.0f", v)
	}
	if r.Drain > 0 {
		drain = fmt.Sprintf("%.1f", r.Drain.Seconds())
	}
	if r.BrokerCPU > 0 {
		broker = fmt.Sprintf("%.1f", r.BrokerCPU.Seconds())
	}
	if hasFloor {
		xFloor = ratio(perLine(r.CPU, r.Lines), perLine(floor.CPU, floor.Lines))
		if r.BrokerCPU > 0 && floor.BrokerCPU > 0 {
			xAll = ratio(perLine(r.CPU+r.BrokerCPU, r.Lines), perLine(floor.CPU+floor.BrokerCPU, floor.Lines))
		}
	}
	return fmt.Sprintf("%.1f\t%.1f\t%.0f\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%.0f\t%s\t%d\t%s", r.Wall.Seconds(), r.FirstCommit.Seconds(), r.LinesPerSec(), steady, r.CPU.Seconds(),
		perLine(r.CPU, r.Lines), xFloor, broker, xAll, float64(r.PeakRSS)/(1<<20), drain, r.Outputs, check)
}

// median is the median of each figure separately (over the rounds of one
// configuration), as a Result. An even count takes the mean of the middle two.
func median(rs []Result) Result {
	m := rs[0]
	m.Round = 0
	dur := func(get func(Result) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		n := len(v)
		return (v[(n-1)/2] + v[n/2]) / 2
	}
	num := func(get func(Result) int64) int64 {
		v := make([]int64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		n := len(v)
		return (v[(n-1)/2] + v[n/2]) / 2
	}
	m.Wall = dur(func(r Result) time.Duration { return r.Wall })
	m.FirstCommit = dur(func(r Result) time.Duration { return r.FirstCommit })
	m.FirstLines = num(func(r Result) int64 { return r.FirstLines })
	m.CPU = dur(func(r Result) time.Duration { return r.CPU })
	m.BrokerCPU = dur(func(r Result) time.Duration { return r.BrokerCPU })
	m.Drain = dur(func(r Result) time.Duration { return r.Drain })
	m.PeakRSS = num(func(r Result) int64 { return r.PeakRSS })
	m.Outputs = num(func(r Result) int64 { return r.Outputs })
	return m
}

// reportRatios prints wasmstream / Kafka Streams for every measured
// wasmstream configuration against every measured Kafka Streams one. The
// matched pair is the one that emits alike (cache off: one output per
// update; cache on: the latest per word per commit); the other pair is
// printed too, with a note, because cache on is how most users run Kafka
// Streams.
func reportRatios(w io.Writer, med map[string]Result, cfgs []Config) {
	var lines []string
	for _, ws := range cfgs {
		a, ok := med[ws.Name]
		if ws.System != SystemWasmstream || !ok {
			continue
		}
		for _, ks := range cfgs {
			b, ok := med[ks.Name]
			if ks.System != SystemKafkaStreams || !ok {
				continue
			}
			note := "matched: both emit one record per update"
			if ws.EmitsPerCommit && ks.EmitsPerCommit {
				note = "matched: both emit the latest count per word per commit"
			} else if ws.EmitsPerCommit != ks.EmitsPerCommit {
				if ks.EmitsPerCommit {
					note = "not matched: " + ws.Name + " emits one record per update, Kafka Streams' cache the latest per word per commit"
				} else {
					note = "not matched: " + ws.Name + " emits the latest per word per commit, Kafka Streams without cache one record per update"
				}
			}
			lines = append(lines, ws.Name+" / "+ks.Name+"\t"+pairRatios(a, b)+"\t"+ratio(float64(a.Outputs), float64(b.Outputs))+"\t"+note)
		}
	}
	printRatios(w, "ratios wasmstream / Kafka Streams (of the medians; lines/s above 1 and CPU s, broker CPU s, peak RSS below 1 favour wasmstream):",
		"outputs\tnote", lines)
}

// ratio is a/b, or "-" when either is unknown (0).
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// Header describes the session: the input and the settings every run shares.
func Header(o Options, extra []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wasmstream vs Kafka Streams word count, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "input: %d lines of %d words (Zipf s=%g over %d words, seed %d), %d partitions\n",
		o.Spec.Lines, o.Spec.Words, o.Spec.ZipfS, o.Spec.Vocab, o.Spec.Seed, o.Spec.Partitions)
	rate := "as fast as the harness's producer goes"
	if o.InputRate > 0 {
		rate = fmt.Sprintf("at %.0f lines/s", o.InputRate)
	}
	if o.Live {
		fmt.Fprintf(&b, "input mode: live: each run's input is written to a topic of its own during the run, from the process's start, %s; drain s: the last line written to done\n", rate)
	} else {
		fmt.Fprintf(&b, "input mode: backlog: the input is written once before the runs, %s, and each run reads it from its start\n", rate)
	}
	fmt.Fprintf(&b, "commit interval %s for both; broker %s (one node, same machine); rounds %d, configurations alternate within a round\n",
		o.CommitInterval, strings.Join(o.Brokers, ","), o.Rounds)
	fmt.Fprintf(&b, "Kafka Streams: num.stream.threads=%d, JVM flags %q\n", o.KSThreads, strings.Join(o.JavaOpts, " "))
	for _, c := range o.Configs {
		if c.BaselineOf != "" {
			fmt.Fprintf(&b, "wasmstream: %s; the configurations named NAME%s run %s (-baseline)\n", o.Wasmstream, baselineSuffix, c.Binary)
			break
		}
	}
	if o.WarmupLines > 0 {
		fmt.Fprintf(&b, "warm-up: one unmeasured run of each system on %d lines before round 1 (a fresh broker's JIT and caches)\n", o.WarmupLines)
	}
	for _, s := range extra {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(&b, "wall: process start to done (input committed, nothing left in internal topics, no topic or offset of the app moved for %s; resolution %s)\n",
		o.Quiet, o.Poll)
	b.WriteString("1st commit: process start to the first input offset committed (start-up: JVM or Wasm load, group join, internal topics)\n")
	b.WriteString("steady lines/s: the lines committed after the 1st commit over the time from it to done: the throughput without start-up, which a long-running deployment does not pay\n")
	b.WriteString("CPU s: utime+stime of the process; broker CPU s: the broker's, process start to done (- when its pid is unknown); peak RSS: VmHWM; outputs: records in the output topic read with read_committed\n")
	b.WriteString("x floor: the process's CPU per input line over that of the I/O floor of the same emit mode (floor, floor-commit: the same topology and transactions as a plain franz-go loop, no Wasm, no state store); +broker: the process's and the broker's CPU together\n")
	b.WriteString("check: PASS when the latest count of every word in the output equals its count in the generated input\n")
	return b.String()
}
