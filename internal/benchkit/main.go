// Command benchkit is the harness of the side-by-side word count benchmark
// of wasmstream against Kafka Streams (make bench-kstreams,
// scripts/bench/kstreams.sh, which also starts and stops the broker).
//
// It generates the input (lines of words from a Zipf-like vocabulary,
// seeded, so every run reads the same records), writes it once per layout
// to a topic of the broker it is given, then runs each configuration in
// turn as a separate process: the Kafka Streams word count
// (scripts/bench/kstreams), wasmstream (plugins/wordcount alone, and
// plugins/split -> repartition topic -> plugins/wordcount, in Go, Rust
// and C) and the I/O floor (`benchkit floor`, floor.go: the same topology
// and transactions as a plain franz-go loop). For each run it measures
// the wall time until all input is processed, the process's and the
// broker's CPU time, its peak RSS from /proc, and the output records, and
// checks the latest count of every word in the output against the true
// counts. It prints a table with the ratios and writes it to a file.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := doMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quickLines is the input size of -quick.
const quickLines = 20000

func doMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "floor" {
		return floorMain(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("benchkit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		brokers    = fs.String("brokers", "127.0.0.1:19192", "the broker, host:port (comma-separated for several)")
		brokerPID  = fs.String("broker-pid-file", "", "the pid file of the broker, on this machine, whose CPU time each run reports (default none)")
		lines      = fs.Int("lines", 500000, "input lines (records)")
		words      = fs.Int("words", 8, "words per line")
		partitions = fs.Int("partitions", 4, "partitions of the input and output topics")
		vocab      = fs.Int("vocab", 10000, "distinct words in the vocabulary")
		zipfS      = fs.Float64("zipf", 1.0, "Zipf exponent s: the word of rank k has weight 1/(k+1)^s")
		seed       = fs.Uint64("seed", 1, "seed of the vocabulary and the draws")
		layouts    = fs.String("layouts", "keyed,any", "input layouts: keyed (each word in one partition), any (any word anywhere)")
		guarantees = fs.String("guarantees", "at_least_once,exactly_once", "processing guarantees")
		cfgList    = fs.String("configs", "all", "configurations to run, comma-separated: "+configNames())
		rounds     = fs.Int("repeats", 1, "rounds; each round runs every configuration once, alternating")
		commit     = fs.Duration("commit-interval", 100*time.Millisecond, "commit interval of both systems")
		poll       = fs.Duration("poll", 100*time.Millisecond, "progress sampling interval (the resolution of wall times)")
		quiet      = fs.Duration("quiet", 2*time.Second, "a run is done once its input is committed and nothing of it moved for this long")
		runTimeout = fs.Duration("run-timeout", 0, "bound of one run (default 10m, 3m with -quick)")
		warmup     = fs.Int("warmup-lines", 50000, "lines of the unmeasured warm-up run of each system before round 1 (0: none; -quick: none unless given)")
		quick      = fs.Bool("quick", false, fmt.Sprintf("%d lines unless -lines is given", quickLines))
		inputMode  = fs.String("input", "backlog", "backlog: the input is written once before the runs and each run reads it from its start; live: each run's input is written while it runs, from the process's start, at -input-rate")
		inputRate  = fs.Float64("input-rate", 0, "lines per second the input is written at (0: as fast as the harness's producer goes)")
		ksJar      = fs.String("ks-jar", "scripts/bench/kstreams/target/wordcount-kstreams.jar", "the Kafka Streams word count jar")
		java       = fs.String("java", "java", "the java binary")
		javaOpts   = fs.String("ks-java-opts", "", "JVM flags for Kafka Streams, space-separated (default none: the JVM's own defaults)")
		ksThreads  = fs.Int("ks-threads", 1, "Kafka Streams num.stream.threads (1 is its default)")
		wsBin      = fs.String("wasmstream", "bin/wasmstream", "the wasmstream binary")
		baseline   = fs.String("baseline", "", "a second wasmstream binary: each wasmstream configuration also runs with it, as NAME"+baselineSuffix+", next to NAME in every round, and the table adds their ratios (an A/B of two builds on one broker)")
		plugins    = fs.String("plugins", "bin/plugins", "directory of the built plugins")
		templates  = fs.String("templates", "scripts/bench", "directory of the wasmstream pipeline templates")
		work       = fs.String("work", ".cache/bench", "run directories, logs and results")
		out        = fs.String("out", "", "file for the table (default <work>/kstreams-<UTC time>.txt)")
		keep       = fs.Bool("keep", false, "keep each run's topics and state directories")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "benchkit: "+format+"\n", a...)
		return 1
	}
	if fs.NArg() > 0 {
		return fail("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick && !set["lines"] {
		*lines = quickLines
	}
	if *quick && !set["warmup-lines"] {
		*warmup = 0
	}
	if *runTimeout == 0 {
		*runTimeout = 10 * time.Minute
		if *quick {
			*runTimeout = 3 * time.Minute
		}
	}

	o := Options{
		Brokers:        strings.Split(*brokers, ","),
		Spec:           InputSpec{Lines: *lines, Words: *words, Partitions: *partitions, Vocab: *vocab, ZipfS: *zipfS, Seed: *seed, Layout: LayoutKeyed},
		Rounds:         *rounds,
		CommitInterval: *commit,
		Poll:           *poll,
		Quiet:          *quiet,
		RunTimeout:     *runTimeout,
		StopGrace:      20 * time.Second,
		Java:           *java,
		JavaOpts:       strings.Fields(*javaOpts),
		KSThreads:      *ksThreads,
		Keep:           *keep,
		WarmupLines:    *warmup,
		Live:           *inputMode == "live",
		InputRate:      *inputRate,
	}
	var err error
	if *brokerPID != "" {
		if o.BrokerPID, err = readPIDFile(*brokerPID); err != nil {
			return fail("-broker-pid-file: %v", err)
		}
	}
	if err := o.Spec.Validate(); err != nil {
		return fail("%v", err)
	}
	if o.Layouts, err = parseList(*layouts, "-layouts", ParseLayout); err != nil {
		return fail("%v", err)
	}
	if o.Guarantees, err = parseList(*guarantees, "-guarantees", parseGuarantee); err != nil {
		return fail("%v", err)
	}
	if o.Configs, err = selectConfigs(*cfgList); err != nil {
		return fail("-configs: %v", err)
	}
	if *baseline != "" {
		if !usesSystem(o.Configs, SystemWasmstream) {
			return fail("-baseline: no wasmstream configuration selected to compare")
		}
		abs, err := filepath.Abs(*baseline)
		if err != nil {
			return fail("-baseline: %v", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fail("-baseline: %v", err)
		}
		o.Configs = withBaseline(o.Configs, abs)
	}
	if usesSystem(o.Configs, SystemFloor) {
		if o.Self, err = os.Executable(); err != nil {
			return fail("the floor runs this binary, whose path is unknown: %v", err)
		}
	}
	switch {
	case o.Rounds < 1:
		return fail("-repeats %d: want at least 1", o.Rounds)
	case o.CommitInterval < time.Millisecond:
		return fail("-commit-interval %s: want at least 1ms", o.CommitInterval)
	case o.Poll <= 0 || o.Quiet < o.Poll:
		return fail("-poll %s, -quiet %s: want 0 < poll <= quiet", o.Poll, o.Quiet)
	case o.WarmupLines < 0:
		return fail("-warmup-lines %d: want 0 or more", o.WarmupLines)
	case o.KSThreads < 1:
		return fail("-ks-threads %d: want at least 1", o.KSThreads)
	case *inputMode != "backlog" && *inputMode != "live":
		return fail("-input %q: want backlog or live", *inputMode)
	case o.InputRate < 0:
		return fail("-input-rate %g: want 0 (as fast as possible) or more", o.InputRate)
	}
	// Absolute paths: each process runs in its own run directory.
	for _, p := range []struct {
		dst  *string
		src  string
		need bool
	}{
		{&o.KSJar, *ksJar, usesSystem(o.Configs, SystemKafkaStreams)},
		{&o.Wasmstream, *wsBin, usesSystem(o.Configs, SystemWasmstream)},
		{&o.Plugins, *plugins, usesSystem(o.Configs, SystemWasmstream)},
		{&o.Templates, *templates, usesSystem(o.Configs, SystemWasmstream)},
		{&o.Work, *work, false},
	} {
		if *p.dst, err = filepath.Abs(p.src); err != nil {
			return fail("%v", err)
		}
		if _, err := os.Stat(*p.dst); p.need && err != nil {
			return fail("%v (make bench-kstreams builds it)", err)
		}
	}
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		return fail("%v", err)
	}
	if *out == "" {
		*out = filepath.Join(o.Work, "kstreams-"+time.Now().UTC().Format("20060102-150405")+".txt")
	}
	var extra []string
	if usesSystem(o.Configs, SystemKafkaStreams) {
		extra = append(extra, "java: "+javaVersion(ctx, o.Java))
	}
	extra = append(extra, fmt.Sprintf("machine: %d CPUs (runtime.NumCPU), %s; the broker, the measured process and this harness share them", runtime.NumCPU(), kernel()))
	return run(ctx, o, *out, extra, stdout, stderr)
}

// loadAvg is the first three fields of /proc/loadavg: what else ran on the
// machine, which the figures depend on.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// busyWarning is a line for the table's header when the 1-minute load
// average at the start or the end of the session was above the CPU count:
// other processes then competed for the CPUs, and on this 2-core machine
// that inflated wasmstream's CPU per line more than Kafka Streams' (at a
// load of 20-40, 2.0-2.2x against 1.6-1.7x that of a quiet machine), so
// every ratio fell by about a quarter (RATIONALE, "Benchmark against
// Kafka Streams"). "" when neither was, or neither could be read.
func busyWarning(cpus int, loads ...string) string {
	for _, l := range loads {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > float64(cpus) {
			return fmt.Sprintf("WARNING: a 1-minute load average above the %d CPUs: other processes competed for them, which costs wasmstream more than Kafka Streams (its CPU per line grows more); compare ratios only with tables taken at a similar load", cpus)
		}
	}
	return ""
}

func run(ctx context.Context, o Options, out string, extra []string, stdout, stderr io.Writer) int {
	b, err := NewBench(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "benchkit: %v\n", err)
		return 1
	}
	defer b.Close()
	loadStart := loadAvg()
	if usesSystem(o.Configs, SystemWasmstream) {
		if err := b.WarmWasmstream(ctx); err != nil {
			fmt.Fprintf(stderr, "benchkit: %v\n", err)
			return 1
		}
	}
	if err := b.Warmup(ctx); err != nil {
		fmt.Fprintf(stderr, "benchkit: %v\n", err)
		return 1
	}
	inputs := map[Layout]*Input{}
	for _, l := range o.Layouts {
		if inputs[l], err = b.PrepareInput(ctx, l); err != nil {
			fmt.Fprintf(stderr, "benchkit: input %s: %v\n", l, err)
			return 1
		}
	}
	var results []Result
	status := 0
	for round := 1; round <= o.Rounds; round++ {
		for _, l := range o.Layouts {
			for _, g := range o.Guarantees {
				for _, c := range roundOrder(o.Configs, round) {
					if ctx.Err() != nil {
						fmt.Fprintf(stderr, "benchkit: interrupted\n")
						return 1
					}
					r := b.Run(ctx, inputs[l], g, c, round)
					results = append(results, r)
					fmt.Fprintln(stderr, progressLine(r))
					if r.Err != nil || r.Check != nil {
						status = 1
					}
				}
			}
		}
	}
	loadEnd := loadAvg()
	extra = append(extra, fmt.Sprintf("load average (1, 5, 15 min): %s at the start, %s at the end", loadStart, loadEnd))
	if w := busyWarning(runtime.NumCPU(), loadStart, loadEnd); w != "" {
		extra = append(extra, w)
	}
	var table strings.Builder
	table.WriteString(Header(o, extra))
	Report(&table, results, o.Layouts, o.Guarantees, o.Configs)
	fmt.Fprint(stdout, table.String())
	if err := os.WriteFile(out, []byte(table.String()), 0o644); err != nil {
		fmt.Fprintf(stderr, "benchkit: writing the table: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\ntable written to %s; logs of every run under %s\n", out, filepath.Join(o.Work, "runs"))
	if status != 0 {
		fmt.Fprintln(stderr, "benchkit: some runs failed or counted wrong (see the table)")
	}
	return status
}

// progressLine is one line per finished run, on stderr while the session goes.
func progressLine(r Result) string {
	head := fmt.Sprintf("benchkit: round %d %s %s %s:", r.Round, r.Layout, r.Guarantee, r.Config.Name)
	switch {
	case r.Pending != "":
		return head + " skipped: " + r.Pending
	case r.Err != nil:
		return head + " ERROR: " + r.Err.Error()
	}
	check := "PASS"
	if r.Check != nil {
		check = "FAIL: " + r.Check.Error()
	}
	broker := ""
	if r.BrokerCPU > 0 {
		broker = fmt.Sprintf(" (broker %.1f)", r.BrokerCPU.Seconds())
	}
	return fmt.Sprintf("%s %.1fs, %.0f lines/s (%.0f once started), %.1f CPU s%s, %.0f MiB peak RSS, %d outputs, %s",
		head, r.Wall.Seconds(), r.LinesPerSec(), r.SteadyLinesPerSec(), r.CPU.Seconds(), broker, float64(r.PeakRSS)/(1<<20), r.Outputs, check)
}

func usesSystem(cs []Config, s System) bool {
	for _, c := range cs {
		if c.System == s {
			return true
		}
	}
	return false
}

func configNames() string {
	var n []string
	for _, c := range configs {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",") + " or all"
}

func javaVersion(ctx context.Context, java string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(%s -version: %v)", java, err)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "; ")
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return "Linux " + strings.TrimSpace(string(b))
}

// readPIDFile reads a pid file and checks that its process's CPU time can be
// read.
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: %q is not a pid", path, strings.TrimSpace(string(b)))
	}
	if _, err := ReadProcStats(pid); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}
