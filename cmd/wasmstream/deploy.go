package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const deployUsage = `usage: wasmstream deploy -c pipeline.yaml PROCESSOR FILE.wasm [--label LABEL]
       [--shadow | --shadow-first DURATION [--max-diff-ratio R] | --no-shadow-first]

Publishes FILE.wasm as PROCESSOR's plugin version to the app's control topic
(<app_id>-plugins on kafka.brokers; with kafka.brokers empty, on the embedded
development broker of the running wasmstream run of the config, found as
the topic commands find it). Every running wasmstream of the app
switches each of its tasks to it at the task's next commit point. The module
is checked first, as a running process would (size, compile, instantiate with
the processor's config, limits, outputs and stores): one that cannot run is
refused and nothing is published. The first deploy of a processor also
records the config file's plugin, labeled "config", to roll back to.

--label defaults to FILE's base name without .wasm; --label "" leaves the
version unlabeled (known by its hash alone). Outputs carry the version as
the header wasmstream-version: LABEL@SHA256-PREFIX.

--shadow runs FILE.wasm beside the active version instead, in every task of
every process, on the same records: its emits are compared with the active
version's and dropped, its state writes stay in a per-task overlay, nothing
of it is committed. Each process reports matches, differences, failures and
samples of differing records to <app_id>-PROCESSOR-shadow; see them with
wasmstream shadow status PROCESSOR, end it with wasmstream shadow stop.

--shadow-first DURATION (or swap.shadow_first in the config) runs it as a
shadow for DURATION first and deploys it only if its failure ratio stayed
under swap.max_failure_ratio and, with --max-diff-ratio, its difference
ratio under R; otherwise it is refused with the reason (exit status 1) and
nothing of it was committed. --no-shadow-first deploys at once although
swap.shadow_first is set.
`

const rollbackUsage = `usage: wasmstream rollback -c pipeline.yaml PROCESSOR

Makes PROCESSOR's previous plugin version active again in the app's control
topic; running processes switch back at their next commit point.
`

func (e *env) deploy(ctx context.Context, args []string) int {
	fs, path, code := e.configFlags("deploy", args, false, func(fs *pflag.FlagSet) {
		fs.String("label", "", "the version's label (default: FILE's base name without .wasm)")
		fs.Bool("shadow", false, "run it as a shadow beside the active version; deploy nothing")
		fs.Duration("shadow-first", 0, "run it as a shadow this long first; deploy it only if it passes")
		fs.Bool("no-shadow-first", false, "deploy at once although swap.shadow_first is set")
		fs.Float64("max-diff-ratio", -1, "with --shadow-first: refuse it if this share of records or more came out different")
	})
	if code != proceed {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprint(e.stderr, deployUsage)
		return exitUsage
	}
	processor, file := fs.Arg(0), fs.Arg(1)
	shadow, _ := fs.GetBool("shadow")
	first, _ := fs.GetDuration("shadow-first")
	noFirst, _ := fs.GetBool("no-shadow-first")
	maxDiff, _ := fs.GetFloat64("max-diff-ratio")
	switch {
	case shadow && (fs.Changed("shadow-first") || noFirst):
		fmt.Fprintln(e.stderr, "wasmstream deploy: --shadow runs a shadow and deploys nothing: it does not go with --shadow-first or --no-shadow-first")
		return exitUsage
	case noFirst && fs.Changed("shadow-first"), first < 0, fs.Changed("max-diff-ratio") && (maxDiff < 0 || maxDiff > 1):
		fmt.Fprintln(e.stderr, "wasmstream deploy: --shadow-first takes a positive duration, not with --no-shadow-first; --max-diff-ratio is between 0 and 1")
		return exitUsage
	}
	label, _ := fs.GetString("label")
	if !fs.Changed("label") {
		label = strings.TrimSuffix(filepath.Base(file), ".wasm")
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream deploy: %v\n", absPathError(err))
		return exitError
	}
	log := e.logger(commandLogLevel(fs, cfg))
	if !fs.Changed("shadow-first") && !noFirst {
		first = cfg.Swap.ShadowFirst
	}
	switch {
	case shadow:
		run, err := host.DeployShadow(ctx, cfg, processor, wasm, label, log)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream deploy: %s: %v\n", file, err)
			return exitError
		}
		fmt.Fprintf(e.stdout, "shadow of %s started from %s (run %d); running processes start it at their next batch: wasmstream shadow status -c %s %s\n",
			processor, file, run, path, processor)
		return exitOK
	case first > 0:
		return e.deployShadowFirst(ctx, cfg, processor, file, wasm, label, first, maxDiff, log)
	}
	res, err := host.Deploy(ctx, cfg, processor, wasm, label, log)
	switch {
	case errors.Is(err, host.ErrAlreadyActive):
		fmt.Fprintf(e.stdout, "%s already runs %s (%s): nothing to deploy\n", processor, res.Active.ID, file)
		return exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "wasmstream deploy: %s: %v\n", file, err)
		return exitError
	}
	was := "no previous version: the config file's plugin could not run, so there is nothing to roll back to"
	if res.Previous.ID != "" {
		was = "was " + res.Previous.ID
	}
	fmt.Fprintf(e.stdout, "deployed %s %s to %s at offset %d (%s); running processes switch at their next commit point\n",
		processor, res.Active.ID, res.Topic, res.Offset, was)
	return exitOK
}

func (e *env) rollback(ctx context.Context, args []string) int {
	fs, path, code := e.configFlags("rollback", args, false)
	if code != proceed {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, rollbackUsage)
		return exitUsage
	}
	processor := fs.Arg(0)
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	res, err := host.Rollback(ctx, cfg, processor, e.logger(commandLogLevel(fs, cfg)))
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream rollback: %v\n", err)
		return exitError
	}
	for _, sk := range res.Skipped {
		fmt.Fprintf(e.stderr, "wasmstream rollback: note: skipped %s, which no process could run: %s\n", sk.Version.ID, sk.Why)
	}
	fmt.Fprintf(e.stdout, "rolled back %s to %s in %s at offset %d (was %s); running processes switch at their next commit point\n",
		processor, res.Active.ID, res.Topic, res.Offset, res.Previous.ID)
	return exitOK
}

// commandLogLevel is the log level of a one-shot command: warn, unless
// --log-level asks for another (the config's log.level is for run).
func commandLogLevel(fs *pflag.FlagSet, cfg *host.Config) string {
	if fs.Changed("log-level") {
		return string(cfg.Log.Level)
	}
	return "warn"
}

const pauseUsage = `usage: wasmstream pause -c pipeline.yaml PROCESSOR

Pauses PROCESSOR through the app's control topic: every running process
stops fetching its inputs at its tasks' next commit point, and keeps their
assignment, state and committed offsets; its timers do not fire. A process
that starts (or takes over a task) while it is paused keeps it paused. The
other processors go on. /v1/processors shows "paused": true once a process
applied it. wasmstream resume undoes it, and nothing is lost or repeated.
`

const resumeUsage = `usage: wasmstream resume -c pipeline.yaml PROCESSOR

Resumes PROCESSOR after wasmstream pause: every running process fetches and
processes its inputs again from where each task stopped, at its next commit
point.
`

func (e *env) pause(ctx context.Context, args []string) int {
	return e.setPause(ctx, "pause", pauseUsage, args)
}

func (e *env) resume(ctx context.Context, args []string) int {
	return e.setPause(ctx, "resume", resumeUsage, args)
}

func (e *env) setPause(ctx context.Context, cmd, usage string, args []string) int {
	fs, path, code := e.configFlags(cmd, args, false)
	if code != proceed {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	processor := fs.Arg(0)
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	set := host.Resume
	if cmd == "pause" {
		set = host.Pause
	}
	res, err := set(ctx, cfg, processor, e.logger(commandLogLevel(fs, cfg)))
	switch {
	case errors.Is(err, host.ErrSamePause):
		fmt.Fprintf(e.stdout, "%v\n", err)
		return exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "wasmstream %s: %v\n", cmd, err)
		return exitError
	}
	state := "resumed"
	if res.Paused {
		state = "paused"
	}
	fmt.Fprintf(e.stdout, "%s %s in %s at offset %d; running processes apply it at their next commit point\n",
		state, processor, res.Topic, res.Offset)
	return exitOK
}

// deployShadowFirst is deploy --shadow-first: the shadow run, its progress
// on stderr, then the deploy or the refusal with its reason.
func (e *env) deployShadowFirst(ctx context.Context, cfg *host.Config, processor, file string, wasm []byte, label string,
	d time.Duration, maxDiff float64, log *slog.Logger) int {
	fmt.Fprintf(e.stderr, "running %s as a shadow of %s for %s before deploying it\n", file, processor, d)
	progress := func(r host.ShadowResult) {
		c := r.Status.Total
		fmt.Fprintf(e.stderr, "  shadow: %s, %s: %d match, %d differ, %d failed\n",
			plural(r.Processes, "process", "processes"), plural(c.Records, "record", "records"), c.Matches, c.Differences, c.Failures)
	}
	res, sr, err := host.DeployShadowFirst(ctx, cfg, processor, wasm, label, d, maxDiff, progress, log)
	switch {
	case errors.Is(err, host.ErrShadowRefused):
		fmt.Fprintf(e.stderr, "wasmstream deploy: %v\n", err)
		printSamples(e.stderr, sr.Samples, 3)
		return exitError
	case errors.Is(err, host.ErrAlreadyActive):
		fmt.Fprintf(e.stdout, "%s already runs %s (%s): nothing to deploy\n", processor, res.Active.ID, file)
		return exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "wasmstream deploy: %s: %v\n", file, err)
		return exitError
	}
	c := sr.Status.Total
	fmt.Fprintf(e.stdout, "deployed %s %s to %s at offset %d after its shadow run (%d records: %.2f%% matched, %d failed); running processes switch at their next commit point\n",
		processor, res.Active.ID, res.Topic, res.Offset, c.Records, 100*c.MatchRate(), c.Failures)
	return exitOK
}

// printSamples writes up to n samples of differing records.
func printSamples(w io.Writer, samples []host.ShadowSample, n int) {
	for i, s := range samples {
		if i == n {
			fmt.Fprintf(w, "  ... %d more samples: wasmstream shadow status --samples N\n", len(samples)-n)
			return
		}
		fmt.Fprintf(w, "  %s/%d@%d key %q\n", s.Topic, s.Partition, s.Offset, s.Key)
		for _, side := range []struct {
			name string
			s    host.ShadowSide
		}{{"active   ", s.Active}, {"candidate", s.Candidate}} {
			if side.s.Error != "" {
				fmt.Fprintf(w, "    %s failed: %s\n", side.name, side.s.Error)
				continue
			}
			fmt.Fprintf(w, "    %s %d emits", side.name, side.s.Count)
			for _, em := range side.s.Emits {
				fmt.Fprintf(w, " %s:%q=%q", em.Output, em.Key, em.Value)
			}
			fmt.Fprintln(w)
		}
	}
}

const shadowUsage = `usage: wasmstream shadow status|stop -c pipeline.yaml PROCESSOR [--samples N] [--json]

status reports PROCESSOR's latest shadow run (wasmstream deploy --shadow) as
the running processes report it to <app_id>-PROCESSOR-shadow: records
compared, matches, differences, failures (in total and per task), whether it
still runs or why it stopped, and samples of differing records (both sides,
with the input's topic, partition and offset). stop ends it in every process:
the candidate's instances and state overlays are dropped.
`

func (e *env) shadow(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "status" && args[0] != "stop" {
		fmt.Fprint(e.stderr, shadowUsage)
		return exitUsage
	}
	sub := args[0]
	fs, path, code := e.configFlags("shadow "+sub, args[1:], false, func(fs *pflag.FlagSet) {
		if sub == "status" {
			fs.Int("samples", 5, "how many samples of differing records to show")
			fs.Bool("json", false, "print the status as JSON")
		}
	})
	if code != proceed {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, shadowUsage)
		return exitUsage
	}
	processor := fs.Arg(0)
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	log := e.logger(commandLogLevel(fs, cfg))
	if sub == "stop" {
		if err := host.StopShadow(ctx, cfg, processor, "wasmstream shadow stop", log); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream shadow stop: %v\n", err)
			return exitError
		}
		fmt.Fprintf(e.stdout, "stopped the shadow of %s; running processes drop it at their next batch\n", processor)
		return exitOK
	}
	n, _ := fs.GetInt("samples")
	asJSON, _ := fs.GetBool("json")
	r, err := host.Shadow(ctx, cfg, processor, max(n, 0), log)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream shadow status: %v\n", err)
		return exitError
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return exitOK
	}
	st := r.Status
	state := "running"
	if !st.Running {
		state = "stopped: " + st.Stopped
		if st.Stopped == "" {
			state = "no process reports it"
		}
	}
	c := st.Total
	fmt.Fprintf(e.stdout, "shadow of %s: version %s (run %d), %s\n", processor, r.Version, r.Run, state)
	if c.Records == 0 {
		// A rate of no record is not 100%: say why there is none yet.
		fmt.Fprintf(e.stdout, "%s, no record compared yet (each process starts the shadow at its next batch of records)\n",
			plural(r.Processes, "process", "processes"))
	} else {
		fmt.Fprintf(e.stdout, "%s, %s: %d match (%.2f%%), %d differ (%.2f%%), %d failed (%.2f%%)\n",
			plural(r.Processes, "process", "processes"), plural(c.Records, "record", "records"),
			c.Matches, 100*c.MatchRate(), c.Differences, 100*c.DiffRatio(), c.Failures, 100*c.FailureRatio())
	}
	ids := slices.Sorted(maps.Keys(st.Tasks))
	for _, id := range ids {
		tc := st.Tasks[id]
		fmt.Fprintf(e.stdout, "  %s: %d records, %d match, %d differ, %d failed\n", id, tc.Records, tc.Matches, tc.Differences, tc.Failures)
	}
	printSamples(e.stdout, r.Samples, n)
	return exitOK
}
