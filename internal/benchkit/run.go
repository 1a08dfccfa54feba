package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options are the harness's settings (flags in main.go).
type Options struct {
	Brokers        []string
	Spec           InputSpec // Layout is set per input
	Layouts        []Layout
	Guarantees     []string
	Configs        []Config
	Rounds         int
	CommitInterval time.Duration
	Poll           time.Duration // progress sampling interval: the resolution of wall times
	Quiet          time.Duration // DoneDetector.Quiet
	RunTimeout     time.Duration // bound of one run, start to done
	StopGrace      time.Duration // SIGTERM to SIGKILL

	KSJar      string   // wordcount-kstreams.jar
	Java       string   // the java binary
	JavaOpts   []string // JVM flags for Kafka Streams (none: the JVM's defaults)
	KSThreads  int      // num.stream.threads
	Wasmstream string   // the wasmstream binary
	Self       string   // this harness's binary, which runs the floor (benchkit floor)
	Plugins    string   // directory of the built plugins (bin/plugins)
	Templates  string   // directory of the pipeline templates (scripts/bench)
	Work       string   // run directories, logs, the compiled-module cache
	Keep       bool     // keep each run's topics and state (debugging)

	// BrokerPID is the broker's process, on this machine, whose CPU time
	// each run also reports (its share of the work: every record goes
	// through it); 0 when unknown.
	BrokerPID int

	// WarmupLines is the input of the warm-up runs (Bench.Warmup); 0
	// runs none.
	WarmupLines int

	// Live: each run's input is written while the run goes, from the
	// process's start, to a topic of its own, instead of once before the
	// runs (a backlog every run reads from its start).
	Live bool
	// InputRate is the rate the input is written at, lines per second
	// (0: as fast as the harness's producer goes): during each run when
	// Live, before the runs otherwise.
	InputRate float64
}

// Input is one layout's input: written once and read by every run, or
// (Live) written again by every run to a topic of its own.
type Input struct {
	Layout Layout
	Lines  int
	Spec   InputSpec // what generates it again, for a live run
	Live   bool
	Topic  string // backlog only: the topic every run reads
	Ends   map[int32]int64
	Truth  map[string]uint64
}

// Result is one run, or one configuration that could not run.
type Result struct {
	Layout    Layout
	Guarantee string
	Config    Config
	Round     int

	Pending string // set: not run, because of this
	Err     error  // set: the run failed before it could be measured

	Wall time.Duration // start of the process to done (DoneDetector)
	// FirstCommit is the start of the process to the first sample that saw
	// an input offset committed: start-up (JVM or Wasm load, group join,
	// internal topics) plus the first commit interval.
	FirstCommit time.Duration
	// FirstLines are the input lines committed at that sample.
	FirstLines int64
	Lines      int
	CPU        time.Duration
	// BrokerCPU is the broker's CPU time from the process's start to done;
	// 0 when Options.BrokerPID is unknown.
	BrokerCPU time.Duration
	PeakRSS   int64
	// Live: the run's input was written while it ran (Options.Live).
	Live bool
	// Drain is, in a live run, the time from the last input line written
	// (acknowledged) to done: how far behind its input the app ended.
	Drain   time.Duration
	Outputs int64 // records in the output topic, read_committed
	Check   error // nil: the latest count of every word is its true count
	Note    string
}

// LinesPerSec is the run's throughput, start-up included.
func (r Result) LinesPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Lines) / r.Wall.Seconds()
}

// SteadyLinesPerSec is the run's throughput once started: the lines
// committed after its first commit over the time from then to done. It
// leaves out what a long-running deployment does not pay per record (the
// JVM's or the Wasm module's start, the group join, the first interval);
// 0 when the first commit already had all input, and in a live run, whose
// pace is its input's (a slow start only leaves it a backlog to catch up
// on, which would read as a faster steady rate).
func (r Result) SteadyLinesPerSec() float64 {
	d := r.Wall - r.FirstCommit
	n := int64(r.Lines) - r.FirstLines
	if d <= 0 || n <= 0 || r.Live {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Measured reports whether the run has figures that count: it ran to the
// end and its output was right.
func (r Result) Measured() bool { return r.Pending == "" && r.Err == nil && r.Check == nil }

// Bench runs the configurations of one session against one broker.
type Bench struct {
	opt     Options
	session string // names this session's topics and groups
	cl      *kgo.Client
	adm     *kadm.Client
	log     io.Writer

	// unsupported holds, by configuration name, why this wasmstream
	// binary cannot run it (a config feature it refuses); its runs are
	// not made (WarmWasmstream).
	unsupported map[string]string
}

// NewBench connects to the broker.
func NewBench(opt Options, log io.Writer) (*Bench, error) {
	// Every sample lists the end offsets of all topics. franz-go routes a
	// ListOffsets by its cached metadata and refreshes it at most every
	// MetadataMinAge (5s by default), so a topic the app created during
	// the run had no end offsets for up to 5s and then appeared with all
	// of its records at once: Progress moved seconds after the app had
	// stopped, and the run's wall time grew by that much (seen as 2.0s
	// more in about half of the runs). At the poll interval the listing
	// is at most one sample late.
	cl, err := newClient(opt.Brokers, kgo.MetadataMinAge(opt.Poll))
	if err != nil {
		return nil, err
	}
	return &Bench{
		opt:     opt,
		session: strconv.FormatInt(time.Now().Unix(), 36),
		cl:      cl,
		adm:     kadm.NewClient(cl),
		log:     log,

		unsupported: map[string]string{},
	}, nil
}

// Close releases the broker connection.
func (b *Bench) Close() { b.cl.Close() }

// PrepareInput generates the input of layout and writes it to a new topic,
// or, when the runs write their own (Options.Live), only works out what
// they will write.
func (b *Bench) PrepareInput(ctx context.Context, layout Layout) (*Input, error) {
	if b.opt.Live {
		return b.liveInput(layout)
	}
	return b.prepareInput(ctx, layout, b.opt.Spec.Lines, "lines", b.opt.InputRate)
}

// liveInput is the input of layout for live runs: its true counts and the
// end offsets a run's input topic has once the run has written it.
func (b *Bench) liveInput(layout Layout) (*Input, error) {
	spec := b.opt.Spec
	spec.Layout = layout
	g, err := NewGenerator(spec)
	if err != nil {
		return nil, err
	}
	in := &Input{Layout: layout, Lines: spec.Lines, Spec: spec, Live: true, Ends: map[int32]int64{}}
	for {
		l, ok := g.Next()
		if !ok {
			break
		}
		in.Ends[l.Partition]++
	}
	in.Truth = g.Truth()
	rate := "as fast as the harness writes"
	if b.opt.InputRate > 0 {
		rate = fmt.Sprintf("at %.0f lines/s", b.opt.InputRate)
	}
	fmt.Fprintf(b.log, "benchkit: input %s: %d lines of %d words (%d distinct) on %d partitions, written by each run %s from its start\n",
		layout, spec.Lines, spec.Words, len(in.Truth), spec.Partitions, rate)
	return in, nil
}

// prepareInput writes lines lines of layout to a new topic named after
// what (the measured input, or the warm-up's), at rate lines/s (0: as fast
// as it goes).
func (b *Bench) prepareInput(ctx context.Context, layout Layout, lines int, what string, rate float64) (*Input, error) {
	spec := b.opt.Spec
	spec.Layout, spec.Lines = layout, lines
	g, err := NewGenerator(spec)
	if err != nil {
		return nil, err
	}
	in := &Input{Layout: layout, Lines: lines, Spec: spec, Topic: fmt.Sprintf("bench-%s-%s-%s", b.session, what, layout)}
	if err := createTopic(ctx, b.adm, in.Topic, spec.Partitions); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if in.Ends, _, err = produceInput(ctx, b.opt.Brokers, in.Topic, g, rate, inputBound(lines, rate)); err != nil {
		return nil, err
	}
	in.Truth = g.Truth()
	var total int64
	for _, e := range in.Ends {
		total += e
	}
	if total != int64(spec.Lines) {
		return nil, fmt.Errorf("input topic %s holds %d records after writing %d lines", in.Topic, total, spec.Lines)
	}
	fmt.Fprintf(b.log, "benchkit: input %s: %d lines of %d words (%d distinct) on %d partitions, written in %.1fs\n",
		in.Topic, spec.Lines, spec.Words, len(in.Truth), spec.Partitions, time.Since(t0).Seconds())
	return in, nil
}

// Warmup runs the first configuration of each system once on an input of
// WarmupLines lines, unmeasured, before the first round: the first runs
// on a fresh broker paid for its JIT compiling and cold caches (broker CPU
// 17-30 s in round 1 against 7-11 s in rounds 2 and 3, the same
// configurations), which fell on whichever configuration a round starts
// with. A failed warm-up fails the session: the measured runs would fail
// alike.
func (b *Bench) Warmup(ctx context.Context) error {
	if b.opt.WarmupLines <= 0 {
		return nil
	}
	layout, guarantee := b.opt.Layouts[0], b.opt.Guarantees[0]
	var in *Input
	done := map[System]bool{}
	for _, c := range b.opt.Configs {
		if done[c.System] || c.Pending[layout] != "" || b.unsupported[c.Name] != "" {
			continue
		}
		done[c.System] = true
		if in == nil {
			var err error
			// A backlog, whatever the runs' input mode: the warm-up is
			// the broker's.
			if in, err = b.prepareInput(ctx, layout, b.opt.WarmupLines, "warmup", 0); err != nil {
				return fmt.Errorf("warm-up input: %w", err)
			}
		}
		r := b.Run(ctx, in, guarantee, c, 0)
		if r.Err != nil || r.Check != nil {
			return fmt.Errorf("warm-up run of %s: %v", c.Name, errors.Join(r.Err, r.Check))
		}
		fmt.Fprintf(b.log, "benchkit: warm-up %s (%s, %s, %d lines, not measured): %.1fs\n", c.Name, layout, guarantee, in.Lines, r.Wall.Seconds())
	}
	return nil
}

// PipelineVars are the fields a wasmstream pipeline template can use.
type PipelineVars struct {
	AppID          string
	Brokers        string // comma-separated host:port
	Guarantee      string // at_least_once or exactly_once
	CommitInterval string // e.g. 100ms
	Input          string
	Output         string
	Partitions     int
	Plugins        string // absolute path of the built plugins directory
	// PluginDir is the absolute directory of the configuration's plugins:
	// Plugins for Go, its subdirectory of the language's name otherwise.
	PluginDir string
	// Emit, OutputEmit and StoreCache are the Config fields of those
	// names: wordcount's emit config, the counts output's emit option,
	// the counts store's record cache ("" for none).
	Emit, OutputEmit, StoreCache string
	StateDir                     string
	CacheDir                     string // compiled-module cache, shared by all runs
}

// renderPipeline renders the template file name with v.
func renderPipeline(dir, name string, v PipelineVars) ([]byte, error) {
	path := filepath.Join(dir, name)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline template: %w", err)
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("pipeline template %s: %w", path, err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, v); err != nil {
		return nil, fmt.Errorf("pipeline template %s: %w", path, err)
	}
	return out.Bytes(), nil
}

// WarmWasmstream compiles each wasmstream configuration's plugins into the
// shared compiled-module cache (wasmstream validate), so that no measured
// run pays the one-time compile a deployed pipeline pays only once either.
// It is also where a configuration that needs a config feature this
// binary does not have is found: validate refuses its config at the
// feature's path, and the configuration is marked unsupported (its rows
// say why) instead of failing the session. Any other refusal fails it.
func (b *Bench) WarmWasmstream(ctx context.Context) error {
	for _, c := range b.opt.Configs {
		if c.System != SystemWasmstream {
			continue
		}
		dir := filepath.Join(b.opt.Work, "warm-"+c.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		v := b.opt.pipelineVars(c, "bench-warm", "bench-warm-in", "bench-warm-out", AtLeastOnce, dir)
		src, err := renderPipeline(b.opt.Templates, c.Pipeline, v)
		if err != nil {
			return err
		}
		cfg := filepath.Join(dir, "pipeline.yaml")
		if err := os.WriteFile(cfg, src, 0o644); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cmd := exec.CommandContext(cctx, b.opt.binary(c), "validate", "-c", cfg)
		cmd.Env = childEnv(os.Environ())
		out, err := cmd.CombinedOutput()
		timedOut := cctx.Err() != nil
		cancel()
		if err == nil {
			continue
		}
		if why := refusedFeature(c, string(out)); why != "" && !timedOut {
			b.unsupported[c.Name] = why
			fmt.Fprintf(b.log, "benchkit: %s not run: %s\n", c.Name, why)
			continue
		}
		return fmt.Errorf("wasmstream validate -c %s (%s): %w\n%s", cfg, c.Name, err, out)
	}
	return nil
}

// refusedFeature says which of c's required features a failed `wasmstream
// validate` refused, from its output: each feature whose config path the
// output names, with the line that names it; "" if none is (the failure
// is something else).
func refusedFeature(c Config, out string) string {
	var refused []string
	for _, f := range c.Requires {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, f.Path) {
				refused = append(refused, fmt.Sprintf("%s (%s)", f.What, strings.TrimSpace(line)))
				break
			}
		}
	}
	if len(refused) == 0 {
		return ""
	}
	return "this wasmstream does not accept " + strings.Join(refused, "; nor ")
}

// pipelineVars are the template fields of configuration c's run appID.
func (o Options) pipelineVars(c Config, appID, input, output, guarantee, runDir string) PipelineVars {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	plugins := abs(o.Plugins)
	dir := plugins
	if c.Lang != "go" {
		dir = filepath.Join(plugins, c.Lang)
	}
	return PipelineVars{
		AppID:          appID,
		Brokers:        strings.Join(o.Brokers, ","),
		Guarantee:      guarantee,
		CommitInterval: o.CommitInterval.String(),
		Input:          input,
		Output:         output,
		Partitions:     o.Spec.Partitions,
		Plugins:        plugins,
		PluginDir:      dir,
		Emit:           c.Emit,
		OutputEmit:     c.OutputEmit,
		StoreCache:     c.StoreCache,
		StateDir:       abs(filepath.Join(runDir, "state")),
		CacheDir:       abs(filepath.Join(o.Work, "wasm-cache")),
	}
}

// Run runs configuration c once on in and measures it.
func (b *Bench) Run(ctx context.Context, in *Input, guarantee string, c Config, round int) Result {
	r := Result{Layout: in.Layout, Guarantee: guarantee, Config: c, Round: round, Lines: in.Lines, Live: in.Live}
	if why := c.Pending[in.Layout]; why != "" {
		r.Pending = why
		return r
	}
	if why := b.unsupported[c.Name]; why != "" {
		r.Pending = why
		return r
	}
	g := "alo"
	if guarantee == ExactlyOnce {
		g = "eos"
	}
	appID := fmt.Sprintf("bench-%s-%s-%s-%s-r%d", b.session, in.Layout, g, c.Name, round)
	output := "out-" + appID
	input := in.Topic
	if in.Live {
		// Not under the app's prefix: the input's end offsets are not
		// the app's progress.
		input = "in-" + appID
	}
	runDir := filepath.Join(b.opt.Work, "runs", appID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		r.Err = err
		return r
	}
	logPath := filepath.Join(runDir, c.Name+".log")
	defer func() {
		if b.opt.Keep {
			return
		}
		// A failed cleanup costs disk, not the results: say so and go on.
		topics := []string{output}
		if in.Live {
			topics = append(topics, input)
		}
		if err := deleteTopics(context.WithoutCancel(ctx), b.adm, appID+"-", topics...); err != nil {
			fmt.Fprintf(b.log, "benchkit: cleanup: %v\n", err)
		}
		if err := os.RemoveAll(filepath.Join(runDir, "state")); err != nil {
			fmt.Fprintf(b.log, "benchkit: cleanup: %v\n", err)
		}
	}()
	for _, t := range []string{output, input} {
		if t == in.Topic && !in.Live {
			continue
		}
		if err := createTopic(ctx, b.adm, t, b.opt.Spec.Partitions); err != nil {
			r.Err = err
			return r
		}
	}

	argv, err := b.command(c, appID, input, output, guarantee, runDir)
	if err != nil {
		r.Err = err
		return r
	}
	if err := os.WriteFile(filepath.Join(runDir, "command"), []byte(strings.Join(argv, " ")+"\n"), 0o644); err != nil {
		r.Err = err
		return r
	}
	brokerFrom, err := b.brokerCPU()
	if err != nil {
		r.Err = err
		return r
	}
	p, err := StartProc(argv, runDir, logPath, childEnv(os.Environ()))
	if err != nil {
		r.Err = err
		return r
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := p.Stop(b.opt.StopGrace); err != nil {
			r.Note = err.Error()
		}
	}
	defer stop()

	// A live run's input is written from the process's start; the
	// writer's error ends the run.
	var writer *liveWriter
	if in.Live {
		writer = b.startWriter(ctx, in, input)
		defer writer.stop()
	}
	w := &Watch{Adm: b.adm, Group: appID, Input: input, InputEnds: in.Ends, Output: output, Prefix: appID + "-"}
	d, err := b.waitDone(ctx, p, w, logPath, writer.failed)
	if err != nil {
		r.Err = err
		return r
	}
	if writer != nil {
		last, err := writer.wait()
		if err != nil {
			r.Err = err
			return r
		}
		r.Drain = max(d.At.Sub(last), 0)
	}
	brokerTo, err := b.brokerCPU()
	if err != nil {
		r.Err = err
		return r
	}
	r.BrokerCPU = brokerTo - brokerFrom
	stop()
	r.Wall, r.FirstCommit, r.FirstLines, r.CPU, r.PeakRSS = d.At.Sub(p.Start), d.FirstAt.Sub(p.Start), d.FirstLines, d.Stats.CPU, d.Stats.PeakRSS

	// Bounded by the output's size: 1 minute plus 1 ms per 100 words.
	readBound := time.Minute + time.Duration(in.Lines*b.opt.Spec.Words/100)*time.Millisecond
	out, err := readOutput(ctx, b.opt.Brokers, output, readBound)
	if err != nil {
		r.Err = err
		return r
	}
	r.Outputs = out.Records
	r.Check = out.Check(in.Truth)
	return r
}

// doneInfo is what waitDone saw of a run.
type doneInfo struct {
	At         time.Time // done (DoneDetector)
	FirstAt    time.Time // the first sample with input committed
	FirstLines int64     // input lines committed at FirstAt
	Stats      ProcStats // the process's, read at done
}

// waitDone samples the run every Poll until the DoneDetector says done,
// then reads the process's CPU time and peak RSS before anything stops it.
// It fails if the process exits, the run exceeds RunTimeout, the live
// input's writer fails (inputFailed), or the broker cannot be asked for
// 10 s in a row.
func (b *Bench) waitDone(ctx context.Context, p *Proc, w *Watch, logPath string, inputFailed func() error) (doneInfo, error) {
	det := DoneDetector{Quiet: b.opt.Quiet}
	var total int64
	for _, e := range w.InputEnds {
		total += e
	}
	deadline := p.Start.Add(b.opt.RunTimeout)
	tick := time.NewTicker(b.opt.Poll)
	defer tick.Stop()
	var (
		d        doneInfo
		last     Sample
		failing  time.Time // first of a series of failed samples
		lastFail error
	)
	for {
		select {
		case <-ctx.Done():
			return doneInfo{}, fmt.Errorf("interrupted: %w", ctx.Err())
		case <-tick.C:
		}
		if exited, err := p.Exited(); exited {
			return doneInfo{}, fmt.Errorf("process exited before the run was done (%v; last: %s); last lines of %s:\n%s",
				err, last, logPath, tail(logPath, 30))
		}
		if time.Now().After(deadline) {
			return doneInfo{}, fmt.Errorf("not done within %s (last: %s); last lines of %s:\n%s",
				b.opt.RunTimeout, last, logPath, tail(logPath, 30))
		}
		if err := inputFailed(); err != nil {
			return doneInfo{}, err
		}
		s, err := w.Sample(ctx)
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
			}
			lastFail = err
			if time.Since(failing) > 10*time.Second {
				return doneInfo{}, fmt.Errorf("broker unreachable for 10s while sampling progress: %w", lastFail)
			}
			continue
		}
		failing = time.Time{}
		last = s
		if d.FirstAt.IsZero() && s.InputLag < total {
			d.FirstAt, d.FirstLines = s.At, total-s.InputLag
		}
		if done, at := det.Observe(s); done {
			stats, err := ReadProcStats(p.Pid())
			if err != nil {
				return doneInfo{}, err
			}
			d.At, d.Stats = at, stats
			return d, nil
		}
	}
}

// liveWriter writes a live run's input while the run goes.
type liveWriter struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the writer has returned
	last   time.Time     // when the last line was acknowledged
	err    error         // valid once done is closed
}

// startWriter starts writing in's lines to topic at the session's input
// rate.
func (b *Bench) startWriter(ctx context.Context, in *Input, topic string) *liveWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &liveWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		g, err := NewGenerator(in.Spec)
		if err != nil {
			w.err = err
			return
		}
		_, w.last, w.err = produceInput(ctx, b.opt.Brokers, topic, g, b.opt.InputRate, inputBound(in.Lines, b.opt.InputRate))
	}()
	return w
}

// failed returns the writer's error once it has failed; nil while it
// writes, once it has written everything, and for no writer (nil).
func (w *liveWriter) failed() error {
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
		if w.err != nil {
			return fmt.Errorf("writing the live input: %w", w.err)
		}
	default:
	}
	return nil
}

// wait waits for the writer to return.
func (w *liveWriter) wait() (time.Time, error) {
	<-w.done
	return w.last, w.err
}

// stop ends the writer, if it has not ended, and waits for it.
func (w *liveWriter) stop() {
	w.cancel()
	<-w.done
}

// brokerCPU is the broker's CPU time so far; 0 when its pid is unknown.
func (b *Bench) brokerCPU() (time.Duration, error) {
	if b.opt.BrokerPID == 0 {
		return 0, nil
	}
	s, err := ReadProcStats(b.opt.BrokerPID)
	if err != nil {
		return 0, fmt.Errorf("the broker (-broker-pid-file): %w", err)
	}
	return s.CPU, nil
}

// command returns the argv of configuration c's process.
func (b *Bench) command(c Config, appID, input, output, guarantee, runDir string) ([]string, error) {
	switch c.System {
	case SystemKafkaStreams:
		argv := append([]string{b.opt.Java}, b.opt.JavaOpts...)
		return append(argv, "-jar", b.opt.KSJar,
			"-bootstrap", strings.Join(b.opt.Brokers, ","),
			"-app-id", appID,
			"-input", input,
			"-output", output,
			"-guarantee", guaranteeFor(c.System, guarantee),
			"-commit-ms", strconv.FormatInt(b.opt.CommitInterval.Milliseconds(), 10),
			"-cache-bytes", c.CacheBytes,
			"-threads", strconv.Itoa(b.opt.KSThreads),
			"-state-dir", filepath.Join(runDir, "state"),
		), nil
	case SystemWasmstream:
		src, err := renderPipeline(b.opt.Templates, c.Pipeline,
			b.opt.pipelineVars(c, appID, input, output, guaranteeFor(c.System, guarantee), runDir))
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(runDir, "pipeline.yaml")
		if err := os.WriteFile(cfg, src, 0o644); err != nil {
			return nil, err
		}
		return []string{b.opt.binary(c), "run", "-c", cfg}, nil
	case SystemFloor:
		return []string{b.opt.Self, "floor",
			"-brokers", strings.Join(b.opt.Brokers, ","),
			"-app-id", appID,
			"-input", input,
			"-output", output,
			"-guarantee", guarantee,
			"-commit-interval", b.opt.CommitInterval.String(),
			"-partitions", strconv.Itoa(b.opt.Spec.Partitions),
			"-emit", string(c.FloorEmit),
		}, nil
	}
	return nil, errors.New("unknown system " + string(c.System))
}

// childEnv is the environment of the measured processes: the harness's,
// without WASMSTREAM_* variables. wasmstream reads those as config
// (WASMSTREAM_KAFKA__BROKERS, ...), and the pipeline template alone must
// decide its config; the broker scripts' own WASMSTREAM_KAFKA_* settings
// would even be refused as unknown fields.
func childEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "WASMSTREAM_") {
			env = append(env, kv)
		}
	}
	return env
}

// binary is the wasmstream binary that runs c: its own (a baseline copy's)
// or the session's.
func (o Options) binary(c Config) string {
	if c.Binary != "" {
		return c.Binary
	}
	return o.Wasmstream
}
