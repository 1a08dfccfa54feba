package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const deployUsage = `usage: wasmstream deploy -c pipeline.yaml PROCESSOR FILE.wasm [--label LABEL]

Publishes FILE.wasm as PROCESSOR's plugin version to the app's control topic
(<app_id>-plugins on kafka.brokers). Every running wasmstream of the app
switches each of its tasks to it at the task's next commit point. The module
is checked first, as a running process would (size, compile, instantiate with
the processor's config, limits, outputs and stores): one that cannot run is
refused and nothing is published. The first deploy of a processor also
records the config file's plugin, labeled "config", to roll back to.

--label defaults to FILE's base name without .wasm; --label "" leaves the
version unlabeled (known by its hash alone). Outputs carry the version as
the header wasmstream-version: LABEL@SHA256-PREFIX.
`

const rollbackUsage = `usage: wasmstream rollback -c pipeline.yaml PROCESSOR

Makes PROCESSOR's previous plugin version active again in the app's control
topic; running processes switch back at their next commit point.
`

func (e *env) deploy(ctx context.Context, args []string) int {
	fs, path, code := e.configFlags("deploy", args, false, func(fs *pflag.FlagSet) {
		fs.String("label", "", "the version's label (default: FILE's base name without .wasm)")
	})
	if code != proceed {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprint(e.stderr, deployUsage)
		return exitUsage
	}
	processor, file := fs.Arg(0), fs.Arg(1)
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
	res, err := host.Deploy(ctx, cfg, processor, wasm, label, e.logger(commandLogLevel(fs, cfg)))
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
