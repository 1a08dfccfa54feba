// Command soak is the driver of make soak (scripts/soak.sh, which starts a
// broker of its own and stops it after): it shows that a wasmstream
// process can run for weeks of hot swaps without its memory growing.
//
// It runs `wasmstream run` on two processors — plugins/wordcount (stateful,
// exactly_once) and plugins/passthrough — under steady load (by default
// 2,000 lines/s of 8 words from a 5,000-word vocabulary, and 200 records/s),
// deploys a new build of the word count every 2 minutes (a distinct build
// each time, made with internal/wasmvariant, or two builds in turn), rolls
// back now and then (to the version before, which the process holds, and
// once more, to one it released and compiles again), and starts a second
// process of the app that joins the group and leaves again every few
// minutes. Every 10 s it samples each process (/debug/snapshot?gc=1 on the
// admin endpoint: live heap, RSS, goroutines, threads, fds, modules,
// instances and versions held), the size of its state directory and the
// group's lag.
//
// At the end it stops the load, waits for the lag to reach 0, stops the
// processes, and checks the counts exactly: the word count's store against
// the words the brokers acknowledged, and the passthrough's committed
// output against its input. It then fits the main process's growth per
// minute and per swap after the warm-up (analyze.go), draws the host heap
// (the live heap without the plugins' linear memory, which the engine
// counts: it grows with each instance's work and starts small in a new
// one, so it differs between two swaps by how old the instances are), the
// live heap and RSS, and fails when a bound of DefaultBounds is exceeded,
// a count is off, or a process failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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

// Options are the soak's settings (the flags).
type Options struct {
	Brokers        []string
	Duration       time.Duration
	Wasmstream     string // the binary
	Plugins        string // directory of wordcount.wasm and passthrough.wasm
	Work           string // run directory: configs, state, logs, builds, results
	Partitions     int
	LinesPerSec    int
	Words          int
	Vocab          int
	RecordsPerSec  int
	CommitInterval time.Duration
	Canary         time.Duration
	FirstDeploy    time.Duration
	DeployEvery    time.Duration
	RollbackEvery  int    // every n-th swap is a rollback (0: none)
	Builds         string // "distinct" or "alternate"
	JoinFirst      time.Duration
	JoinEvery      time.Duration // 0: no second process
	JoinFor        time.Duration
	Warmup         time.Duration
	SampleEvery    time.Duration
	CacheDir       string // runtime.cache_dir of the processes ("off": none)
	VariantData    int    // bytes of data each distinct build adds
}

func doMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	brokers := fs.String("brokers", "127.0.0.1:19392", "the broker, host:port (comma-separated for several)")
	fs.DurationVar(&o.Duration, "duration", 30*time.Minute, "how long the load runs")
	fs.StringVar(&o.Wasmstream, "wasmstream", "bin/wasmstream", "the wasmstream binary")
	fs.StringVar(&o.Plugins, "plugins", "bin/plugins", "directory of wordcount.wasm and passthrough.wasm")
	fs.StringVar(&o.Work, "work", ".cache/soak/run", "run directory (emptied first): configs, state, logs, builds, results")
	fs.IntVar(&o.Partitions, "partitions", 4, "partitions of every topic")
	fs.IntVar(&o.LinesPerSec, "lines-per-sec", 2000, "lines per second into the word count")
	fs.IntVar(&o.Words, "words", 8, "words per line")
	fs.IntVar(&o.Vocab, "vocab", 5000, "distinct words")
	fs.IntVar(&o.RecordsPerSec, "records-per-sec", 200, "records per second into the passthrough")
	fs.DurationVar(&o.CommitInterval, "commit-interval", 100*time.Millisecond, "kafka.commit_interval of the processes")
	fs.DurationVar(&o.Canary, "canary", time.Minute, "swap.canary_window of the processes")
	fs.DurationVar(&o.FirstDeploy, "first-deploy", 4*time.Minute, "when the first deploy happens")
	fs.DurationVar(&o.DeployEvery, "deploy-every", 2*time.Minute, "time between two swaps (deploys or rollbacks)")
	fs.IntVar(&o.RollbackEvery, "rollback-every", 6, "every n-th swap is a rollback to the version before, and every other time the swap after it rolls back once more, to a version the process released (0: no rollback)")
	fs.StringVar(&o.Builds, "builds", "distinct", "what a deploy deploys: distinct (a new build every time) or alternate (two builds in turn)")
	fs.DurationVar(&o.JoinFirst, "join-first", 5*time.Minute+25*time.Second, "when the second process first joins")
	fs.DurationVar(&o.JoinEvery, "join-every", 6*time.Minute, "time between two joins of the second process (0: no second process)")
	fs.DurationVar(&o.JoinFor, "join-for", 2*time.Minute, "how long the second process stays")
	fs.DurationVar(&o.Warmup, "warmup", 8*time.Minute, "growth is fitted after this")
	fs.DurationVar(&o.SampleEvery, "sample-every", 10*time.Second, "time between two samples")
	fs.StringVar(&o.CacheDir, "cache-dir", "", "runtime.cache_dir of the processes (default <work>/cache; off: none)")
	fs.IntVar(&o.VariantData, "variant-data", 64<<10, "bytes of data each distinct build adds (code: 16 KiB)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "soak: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o.Brokers = strings.Split(*brokers, ",")
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(o.Work, "cache")
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	ok, err := run(ctx, o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

func (o Options) validate() error {
	switch {
	case o.Builds != "distinct" && o.Builds != "alternate":
		return fmt.Errorf("-builds %q: want distinct or alternate", o.Builds)
	case o.Duration < o.FirstDeploy+2*o.DeployEvery:
		return fmt.Errorf("-duration %s leaves room for fewer than 3 swaps after -first-deploy %s every %s", o.Duration, o.FirstDeploy, o.DeployEvery)
	case o.DeployEvery < o.Canary+30*time.Second:
		return fmt.Errorf("-deploy-every %s: want at least the canary window (%s) and 30 s more, to measure after it", o.DeployEvery, o.Canary)
	case o.Partitions < 1 || o.LinesPerSec < 1 || o.Words < 1 || o.RecordsPerSec < 1 || o.SampleEvery <= 0:
		return fmt.Errorf("-partitions, -lines-per-sec, -words, -records-per-sec and -sample-every must be positive")
	}
	// Fail now, not at the end, when too few swaps come after the warm-up
	// to judge a growth per swap by (analyze.go).
	judged := 0
	for _, a := range o.schedule() {
		if (a.kind == EventDeploy || a.kind == EventRollback) && a.at >= o.Warmup {
			judged++
		}
	}
	if need := minPoints("per swap"); judged < need {
		return fmt.Errorf("-duration %s, -first-deploy %s, -deploy-every %s and -warmup %s leave %d swaps after the warm-up, want %d to judge a growth per swap by: run longer or warm up shorter",
			o.Duration, o.FirstDeploy, o.DeployEvery, o.Warmup, judged, need)
	}
	return nil
}
