package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/procs"
	"github.com/wasmstream/wasmstream/internal/wasmvariant"
)

// soakRun is one soak: its settings, names, processes and what it saw.
type soakRun struct {
	o      Options
	out    io.Writer
	start  time.Time
	app    string
	lines  string // the word count's input
	recs   string // the passthrough's input
	copies string // the passthrough's output
	adm    *kadm.Client
	procs  [2]*proc // main, second
	base   []byte   // the word count plugin the builds are made from

	mu       sync.Mutex
	samples  []Sample
	events   []Event
	problems []string // failures seen while running
}

func (s *soakRun) at() time.Duration { return time.Since(s.start) }

func (s *soakRun) event(kind, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := Event{At: s.at(), Kind: kind, Detail: detail}
	s.events = append(s.events, e)
	fmt.Fprintf(s.out, "[%s] %s %s\n", clock(e.At), kind, detail)
}

func (s *soakRun) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	s.problems = append(s.problems, msg)
	fmt.Fprintf(s.out, "[%s] PROBLEM: %s\n", clock(s.at()), msg)
}

// run is the whole soak; ok is its verdict, err a failure to run it.
func run(ctx context.Context, o Options, out io.Writer) (ok bool, err error) {
	if err := os.RemoveAll(o.Work); err != nil {
		return false, err
	}
	for _, d := range []string{"builds", "logs", "state-main", "state-second"} {
		if err := os.MkdirAll(filepath.Join(o.Work, d), 0o755); err != nil {
			return false, err
		}
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	s := &soakRun{o: o, out: out, app: "soak-" + hex.EncodeToString(id[:])}
	s.lines, s.recs, s.copies = s.app+"-lines", s.app+"-records", s.app+"-copies"
	if s.base, err = os.ReadFile(filepath.Join(o.Plugins, "wordcount.wasm")); err != nil {
		return false, fmt.Errorf("%w (make plugins builds it)", err)
	}
	// The load's client: a record not acknowledged within 2 minutes fails
	// (and fails the soak) rather than waiting for a broker forever.
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1_000_000), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		return false, err
	}
	defer cl.Close()
	s.adm = kadm.NewClient(cl)
	if err := s.createTopics(ctx); err != nil {
		return false, err
	}
	for i, name := range []string{"main", "second"} {
		port, err := procs.FreePort()
		if err != nil {
			return false, err
		}
		p := &proc{procs.Proc{Name: name, Config: filepath.Join(o.Work, name+".yaml"), StateDir: filepath.Join(o.Work, "state-"+name),
			Admin: "127.0.0.1:" + strconv.Itoa(port)}}
		if err := s.writeConfig(p); err != nil {
			return false, err
		}
		s.procs[i] = p
	}
	defer func() {
		for _, p := range s.procs {
			if p.Running() {
				_ = p.Stop(time.Minute)
			}
		}
	}()

	vocab, err := NewVocab(o.Vocab, o.Partitions)
	if err != nil {
		return false, err
	}
	load := &Load{cl: cl, vocab: vocab, linesTopic: s.lines, recsTopic: s.recs, partitions: o.Partitions, words: o.Words, counts: map[string]int64{}}
	fmt.Fprintf(out, "soak %s: %s, %d lines/s of %d words (vocabulary %d) and %d records/s, %s builds every %s from %s, brokers %s, work %s\n",
		s.app, o.Duration, o.LinesPerSec, o.Words, o.Vocab, o.RecordsPerSec, o.Builds, o.DeployEvery, o.FirstDeploy, strings.Join(o.Brokers, ","), o.Work)
	s.start = time.Now()
	if err := s.procs[0].Start(o.Wasmstream, filepath.Join(o.Work, "logs", "main.log"), 2*time.Minute); err != nil {
		return false, err
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loaded := make(chan struct{})
	go func() { defer close(loaded); load.Run(lctx, o.LinesPerSec, o.RecordsPerSec) }()
	defer func() { stopLoad(); <-loaded }()

	// The samples, every SampleEvery, and the actions on their schedule,
	// until the duration is over or the main process died.
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); s.sampleLoop(sctx) }()
	actx, stopActions := context.WithTimeout(ctx, o.Duration)
	s.actions(actx)
	<-actx.Done()
	stopActions()
	if ctx.Err() != nil {
		stopSampling()
		<-sampled
		return false, ctx.Err()
	}

	// The end: no more input; everything processed; the second process
	// gone; the main one stopped cleanly.
	stopLoad()
	<-loaded
	lines, words, records, failures, firstErr := load.Totals()
	if failures > 0 {
		s.problem("%d records of the input were not acknowledged; first: %v", failures, firstErr)
	}
	if p := s.procs[1]; p.Running() {
		if err := p.Stop(time.Minute); err != nil {
			s.problem("second process: %v", err)
		}
		s.event(EventLeave, "at the end")
	}
	if err := s.waitLag(ctx, 5*time.Minute); err != nil {
		s.problem("%v", err)
	}
	stopSampling()
	<-sampled
	end := s.at()
	if err := s.procs[0].Stop(2 * time.Minute); err != nil {
		s.problem("main process: %v", err)
	}

	s.checkCounts(ctx, load, lines, words, records)
	rep := Analyze(s.samples, s.events, o.Warmup, o.Canary, DefaultBounds)
	rep.Failures = append(s.problems, rep.Failures...)
	if err := s.report(rep, end, lines, words, records); err != nil {
		return false, err
	}
	return rep.OK(), nil
}

// createTopics makes the soak's topics: the inputs keep 15 minutes (their
// records are processed within seconds), the word count's output 5 (it
// writes about 16,000 records/s; the check reads the store, not it), the
// passthrough's output everything (the check reads it all).
func (s *soakRun) createTopics(ctx context.Context) error {
	keep := func(ms string) map[string]*string {
		return map[string]*string{"retention.ms": kadm.StringPtr(ms), "segment.ms": kadm.StringPtr("60000")}
	}
	for topic, cfg := range map[string]map[string]*string{
		s.lines:                keep("900000"),
		s.recs:                 keep("900000"),
		s.app + "-word-counts": keep("300000"),
		s.copies:               nil,
	} {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := s.adm.CreateTopic(cctx, int32(s.o.Partitions), -1, cfg, topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("creating topic %s: %w", topic, err)
		}
	}
	return nil
}

// writeConfig writes p's pipeline: both processors, exactly_once, the admin
// endpoint with its debug endpoints (the samples read /debug/snapshot).
func (s *soakRun) writeConfig(p *proc) error {
	o := s.o
	cfg := fmt.Sprintf(`# make soak (internal/soak): process %q
app_id: %s
guarantee: exactly_once
kafka:
  brokers: [%s]
  commit_interval: %s
  create_topics: false
processors:
  - name: wordcount
    plugin: %s
    inputs: [%s]
    outputs: {counts: %s}
    stores: [counts]
  - name: passthrough
    plugin: %s
    inputs: [%s]
    outputs: {out: %s}
state:
  dir: %s
runtime:
  cache_dir: %s
swap:
  canary_window: %s
admin:
  listen: %s
  debug: true
log:
  level: info
`, p.Name, s.app, strings.Join(o.Brokers, ", "), o.CommitInterval,
		abs(filepath.Join(o.Plugins, "wordcount.wasm")), s.lines, s.app+"-word-counts",
		abs(filepath.Join(o.Plugins, "passthrough.wasm")), s.recs, s.copies,
		abs(p.StateDir), cacheDir(o.CacheDir), o.Canary, p.Admin)
	return os.WriteFile(p.Config, []byte(cfg), 0o644)
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func cacheDir(d string) string {
	if d == "off" {
		return d
	}
	return abs(d)
}

// allTasks is the app's task count: one per input partition of each of
// its two processors.
func (s *soakRun) allTasks() int { return 2 * s.o.Partitions }

// sampleLoop samples every running process every SampleEvery until ctx
// ends.
func (s *soakRun) sampleLoop(ctx context.Context) {
	t := time.NewTicker(s.o.SampleEvery)
	defer t.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *soakRun) sampleOnce(ctx context.Context) {
	at := s.at()
	lag, lagErr := s.lag(ctx)
	for _, p := range s.procs {
		if !p.Running() {
			if p.Name == "main" && p.Cmd != nil {
				s.problem("the main process exited: %v", p.Err())
			}
			continue
		}
		smp, err := p.sample(at, s.allTasks())
		if err != nil {
			s.problem("sampling: %v", err)
			continue
		}
		smp.Lag = lag
		if lagErr != nil {
			smp.Lag = -1
		}
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
	}
}

// lag is the group's lag over both inputs: end offsets minus committed.
func (s *soakRun) lag(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ends, err := s.adm.ListEndOffsets(ctx, s.lines, s.recs)
	if err != nil {
		return 0, err
	}
	committed, err := s.adm.FetchOffsets(ctx, s.app)
	if err != nil {
		return 0, err
	}
	var lag int64
	ends.Each(func(e kadm.ListedOffset) {
		c, ok := committed.Lookup(e.Topic, e.Partition)
		at := int64(0)
		if ok && c.At >= 0 {
			at = c.At
		}
		lag += max(e.Offset-at, 0)
	})
	return lag, nil
}

// waitLag waits until the group has processed all its input.
func (s *soakRun) waitLag(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		lag, err := s.lag(ctx)
		if err == nil && lag == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lag %d (err %v) %s after the load stopped, want 0", lag, err, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// action is one thing the soak does at a time.
type action struct {
	at   time.Duration
	kind string // EventDeploy, EventRollback, EventJoin, EventLeave
}

// schedule lists the soak's actions in time order: a swap every
// DeployEvery from FirstDeploy (every RollbackEvery-th a rollback, and
// every other time the next one a second rollback), leaving each swap its
// canary window and a sample after it before the end; the second process
// joining every JoinEvery from JoinFirst for JoinFor.
func (o Options) schedule() []action {
	var acts []action
	for k := 0; ; k++ {
		at := o.FirstDeploy + time.Duration(k)*o.DeployEvery
		if at > o.Duration-o.DeployEvery {
			break
		}
		kind := EventDeploy
		if n := o.RollbackEvery; n > 0 && (k%n == n-1 || (k%(2*n) == n && k > 0)) {
			kind = EventRollback
		}
		acts = append(acts, action{at, kind})
	}
	if o.JoinEvery > 0 {
		for at := o.JoinFirst; at+o.JoinFor <= o.Duration-time.Minute; at += o.JoinEvery {
			acts = append(acts, action{at, EventJoin}, action{at + o.JoinFor, EventLeave})
		}
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	return acts
}

// actions runs the schedule until ctx ends. A join waits, if it must,
// until the swap before it has had its canary window and two samples
// after it (a deploy under load can take seconds), and its leave follows
// it by JoinFor.
func (s *soakRun) actions(ctx context.Context) {
	builds := 0
	var lastSwap, joined time.Duration
	for _, a := range s.o.schedule() {
		due := a.at
		switch a.kind {
		case EventJoin:
			due = max(due, lastSwap+s.o.Canary+10*time.Second+2*s.o.SampleEvery)
		case EventLeave:
			due = max(due, joined+s.o.JoinFor)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(due - s.at()):
		}
		switch a.kind {
		case EventDeploy:
			builds++
			n := builds
			if s.o.Builds == "alternate" {
				n = 1 + (builds+1)%2
			}
			if err := s.deploy(ctx, n); err != nil {
				s.problem("deploy of build %d: %v", n, err)
			}
			lastSwap = s.at()
		case EventRollback:
			if out, err := s.cli(ctx, "rollback", "-c", s.procs[0].Config, "wordcount"); err != nil {
				s.problem("rollback: %v: %s", err, out)
			} else {
				s.event(EventRollback, firstLine(out))
			}
			lastSwap = s.at()
		case EventJoin:
			if err := s.procs[1].Start(s.o.Wasmstream, filepath.Join(s.o.Work, "logs", "second.log"), 2*time.Minute); err != nil {
				s.problem("second process: %v", err)
				continue
			}
			joined = s.at()
			s.event(EventJoin, "second process")
		case EventLeave:
			if !s.procs[1].Running() {
				continue
			}
			if err := s.procs[1].Stop(time.Minute); err != nil {
				s.problem("second process: %v", err)
			}
			s.event(EventLeave, "second process")
		}
	}
}

// deploy writes build n of the word count (internal/wasmvariant of the
// plugin: its own code and data) and deploys it with wasmstream deploy.
func (s *soakRun) deploy(ctx context.Context, n int) error {
	wasm, err := wasmvariant.Make(s.base, uint64(n), wasmvariant.Options{CodeBytes: 16 << 10, DataBytes: s.o.VariantData})
	if err != nil {
		return err
	}
	path := filepath.Join(s.o.Work, "builds", "wordcount-"+strconv.Itoa(n)+".wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		return err
	}
	out, err := s.cli(ctx, "deploy", "-c", s.procs[0].Config, "wordcount", path, "--label", "build"+strconv.Itoa(n))
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	s.event(EventDeploy, fmt.Sprintf("build %d: %s", n, firstLine(out)))
	return nil
}

// cli runs a wasmstream command (deploy, rollback) and returns its output.
func (s *soakRun) cli(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.o.Wasmstream, args...)
	cmd.Env = procs.Env()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// checkCounts compares the word count's store (the main process's state
// directory, which holds every task at the end) with the words the brokers
// acknowledged, and the passthrough's committed output with its input.
func (s *soakRun) checkCounts(ctx context.Context, load *Load, lines, words, records int64) {
	dir := filepath.Join(s.procs[0].StateDir, s.app)
	r, err := host.OpenStateReadOnly(dir, nil)
	if err != nil {
		s.problem("opening the main process's state %s: %v", dir, err)
		return
	}
	defer r.Close()
	got := map[string]int64{}
	for p := 0; p < s.o.Partitions; p++ {
		err := r.Scan("wordcount", int32(p), "counts", func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("word %q holds %d bytes, want 8", k, len(v))
			}
			got[string(k)] = int64(binary.BigEndian.Uint64(v))
			return nil
		})
		if err != nil {
			s.problem("reading the word count's store, partition %d: %v", p, err)
			return
		}
	}
	load.mu.Lock()
	want := load.counts
	load.mu.Unlock()
	var mismatches int
	var sum int64
	for w, n := range want {
		if got[w] != n {
			if mismatches < 5 {
				s.problem("word %s: the store counts %d, %d were produced", w, got[w], n)
			}
			mismatches++
		}
	}
	for w, n := range got {
		sum += n
		if _, ok := want[w]; !ok {
			s.problem("word %s: the store counts %d, none was produced", w, n)
			mismatches++
		}
	}
	fmt.Fprintf(s.out, "counts: %d lines, %d words produced; the store counts %d words over %d keys; %d mismatches\n",
		lines, words, sum, len(got), mismatches)
	if mismatches > 0 || sum != words {
		s.problem("the word count's store is off: %d mismatched words, %d counted of %d produced", mismatches, sum, words)
	}

	// The passthrough: every record exactly once in the committed output.
	n, dups, err := s.countCopies(ctx)
	switch {
	case err != nil:
		s.problem("reading the passthrough's output: %v", err)
	case n != records || dups != 0:
		s.problem("the passthrough's committed output holds %d records (%d duplicates) for %d produced", n, dups, records)
	default:
		fmt.Fprintf(s.out, "passthrough: %d records in, %d out, no duplicate\n", records, n)
	}
}

// countCopies reads the passthrough's output, read_committed, from its
// start until nothing more comes for 5 s (the load has stopped and every
// transaction has ended: the rest is only the time to fetch).
func (s *soakRun) countCopies(ctx context.Context) (n, dups int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.o.Brokers...), kgo.ConsumeTopics(s.copies),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	seen := map[string]bool{}
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return n, dups, ctx.Err()
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return n, dups, e.Err
			}
		}
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			n++
			if seen[string(r.Key)] {
				dups++
			}
			seen[string(r.Key)] = true
		})
		if got == 0 && idle {
			return n, dups, nil
		}
	}
}
