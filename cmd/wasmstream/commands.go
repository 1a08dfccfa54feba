package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/demo"
)

const usage = `wasmstream runs WebAssembly stream processors against Kafka.

Usage:
  wasmstream run -c pipeline.yaml       run the pipeline until SIGINT/SIGTERM
  wasmstream validate -c pipeline.yaml  check the config and every plugin
  wasmstream plugin inspect FILE.wasm   show a plugin's ABI version, exports, imports
                                        (-c pipeline.yaml or --max-module-size: the size limit)
  wasmstream state dump -c pipeline.yaml --store NAME [--partition N]
                                        print a store's keys, values and checkpoint
                                        from the local state directory (offline)
  wasmstream deploy -c pipeline.yaml PROCESSOR FILE.wasm [--label L]
                                        publish a plugin version; running processes
                                        switch to it at their next commit point
  wasmstream rollback -c pipeline.yaml PROCESSOR
                                        make the previous plugin version active again
  wasmstream demo                       run a demo on an embedded Kafka
  wasmstream init NAME --lang go|rust|c write a new processor project (wasmstream init -h)
  wasmstream help                       this text

Config is read from the file, then WASMSTREAM_* environment variables
(WASMSTREAM_APP_ID, WASMSTREAM_KAFKA__BROKERS=host:port,...), then flags.
`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (bad config, bad plugin, runtime error)
	exitUsage = 2 // the command line was wrong
)

type env struct {
	stdout, stderr io.Writer
	environ        []string
}

func doMain(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	e := &env{stdout: stdout, stderr: stderr, environ: environ}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return e.run(ctx, args[1:])
	case "validate":
		return e.validate(ctx, args[1:])
	case "plugin":
		if len(args) > 1 && args[1] == "inspect" {
			return e.inspect(ctx, args[2:])
		}
		fmt.Fprintln(stderr, "usage: wasmstream plugin inspect FILE.wasm")
		return exitUsage
	case "state":
		return e.state(args[1:])
	case "deploy":
		return e.deploy(ctx, args[1:])
	case "rollback":
		return e.rollback(ctx, args[1:])
	case "demo":
		return e.demo(ctx, args[1:])
	case "init":
		return e.initProject(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "wasmstream: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// configFlags parses the flags shared by commands that read a config, and
// those extra registers. The config file (-c) is required; its absence is a
// usage error, reported here.
func (e *env) configFlags(name string, args []string, extra ...func(*pflag.FlagSet)) (*pflag.FlagSet, string, bool) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	path := fs.StringP("config", "c", "", "pipeline config file (YAML)")
	host.ConfigFlags(fs)
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		e.flagError(name, err)
		return nil, "", false
	}
	if *path == "" {
		fmt.Fprintf(e.stderr, "wasmstream %s: -c pipeline.yaml is required\n", name)
		return nil, "", false
	}
	return fs, *path, true
}

// flagError reports a command line pflag refused (with ContinueOnError it
// prints nothing itself); -h has printed the usage already.
func (e *env) flagError(name string, err error) {
	if !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(e.stderr, "wasmstream %s: %v (wasmstream %s -h lists its flags)\n", name, err, name)
	}
}

func (e *env) loadConfig(path string, fs *pflag.FlagSet) (*host.Config, bool) {
	cfg, err := host.LoadConfig(path, e.environ, fs)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream: invalid config %s:\n%s\n", path, indent(err.Error()))
		return nil, false
	}
	return cfg, true
}

func (e *env) logger(level string) *slog.Logger { return loggerTo(e.stderr, level) }

func loggerTo(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func (e *env) run(ctx context.Context, args []string) int {
	fs, path, ok := e.configFlags("run", args)
	if !ok {
		return exitUsage
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	// Restore progress: bars on a terminal, drawn below the log lines,
	// which then go through them; elsewhere the restore's own log lines
	// (start, progress every 10s, completion) are the progress.
	stderr := e.stderr
	var bars *restoreBars
	opts := []host.Option{}
	if width, ok := terminal(e.stderr, e.environ); ok && hasStores(cfg) {
		bars = newRestoreBars(e.stderr, width)
		defer bars.Close()
		stderr = bars
		opts = append(opts, host.WithRestoreProgress(bars.Update))
	}
	log := loggerTo(stderr, cfg.Log.Level)
	h, err := host.New(ctx, cfg, append(opts, host.WithLogger(log))...)
	if err != nil && ctx.Err() != nil {
		// Stopped (SIGTERM, SIGINT) while starting: nothing was consumed,
		// so nothing is left undone — a clean stop, not a failure.
		log.Info("stopped before starting", "during", err)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "wasmstream: %v\n", err)
		return exitError
	}
	defer h.Close()
	if bars != nil {
		// A failed or canceled restore sends no final progress: drop its
		// bar once the host says no restore runs.
		stop := make(chan struct{})
		defer close(stop)
		go bars.watch(h.Ready, time.Second, stop)
	}
	if h.Embedded() {
		fmt.Fprintf(stderr, "wasmstream: DEVELOPMENT MODE: embedded Kafka at %s (set kafka.brokers for a real cluster)\n", strings.Join(h.Brokers(), ","))
	}
	log.Info("running", "app_id", cfg.AppID, "processors", len(cfg.Processors), "brokers", strings.Join(h.Brokers(), ","))
	if err := h.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "wasmstream: %v\n", err)
		return exitError
	}
	log.Info("stopped cleanly")
	return exitOK
}

func (e *env) validate(ctx context.Context, args []string) int {
	fs, path, ok := e.configFlags("validate", args)
	if !ok {
		return exitUsage
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	if err := host.Validate(ctx, cfg, e.logger("warn")); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream: %s: plugin problems:\n%s\n", path, indent(err.Error()))
		return exitError
	}
	fmt.Fprintf(e.stdout, "%s: ok (%d processors)\n", path, len(cfg.Processors))
	return exitOK
}

func (e *env) inspect(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("plugin inspect", pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	path := fs.StringP("config", "c", "", "pipeline config file (YAML) whose runtime.max_module_size applies")
	maxSize := fs.String("max-module-size", "", "largest module to read, like 64MiB (default: runtime.max_module_size of -c, else "+host.ByteSize(host.DefaultMaxModuleSize).String()+")")
	if err := fs.Parse(args); err != nil {
		e.flagError("plugin inspect", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "usage: wasmstream plugin inspect [-c pipeline.yaml | --max-module-size SIZE] FILE.wasm")
		return exitUsage
	}
	limit := host.ByteSize(host.DefaultMaxModuleSize)
	if *path != "" {
		cfg, ok := e.loadConfig(*path, nil)
		if !ok {
			return exitError
		}
		limit = cfg.Runtime.MaxModuleSize
	}
	if *maxSize != "" {
		if err := limit.UnmarshalText([]byte(*maxSize)); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream plugin inspect: --max-module-size: %v\n", err)
			return exitUsage
		}
	}
	file := fs.Arg(0)
	wasm, err := readModule(file, limit)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream: %v\n", err)
		return exitError
	}
	info, err := host.InspectPlugin(ctx, wasm)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream: %s: %v\n", file, err)
		return exitError
	}
	printInfo(e.stdout, file, info)
	return exitOK
}

// readModule reads a module file of at most limit bytes, refusing a larger
// one before reading it (runtime.max_module_size applies to inspect as it
// does to run and deploy).
func readModule(file string, limit host.ByteSize) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	over := func(n int64) error {
		return fmt.Errorf("%s: the module is %d bytes or more, over runtime.max_module_size (%s)", file, n, limit)
	}
	if st, err := f.Stat(); err == nil && st.Size() > int64(limit) {
		return nil, over(st.Size())
	}
	wasm, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if int64(len(wasm)) > int64(limit) {
		return nil, over(int64(len(wasm)))
	}
	return wasm, nil
}

func printInfo(w io.Writer, file string, info host.PluginInfo) {
	fmt.Fprintf(w, "file:         %s\n", file)
	fmt.Fprintf(w, "size:         %d bytes\n", info.Size)
	fmt.Fprintf(w, "sha256:       %s\n", info.SHA256)
	fmt.Fprintf(w, "abi version:  %d (module declares %v)\n", info.ABIVersion, info.ABIVersions)
	mem := fmt.Sprintf("%d pages (%d KiB) minimum", info.MemoryMinPages, info.MemoryMinPages*64)
	if info.HasMemoryMax {
		mem += fmt.Sprintf(", %d pages maximum", info.MemoryMaxPages)
	}
	fmt.Fprintf(w, "memory:       %s\n", mem)
	var inits []string
	if info.HasStart {
		inits = append(inits, "start")
	}
	if info.HasInitialize {
		inits = append(inits, "_initialize")
	}
	if info.HasInit {
		inits = append(inits, "wasmstream_init")
	}
	if len(inits) == 0 {
		inits = []string{"none"}
	}
	fmt.Fprintf(w, "initializers: %s\n", strings.Join(inits, ", "))
	fmt.Fprintf(w, "exports (%d):\n", len(info.Exports))
	for _, s := range info.Exports {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "imports (%d):\n", len(info.Imports))
	for _, s := range info.Imports {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

func (e *env) demo(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	records := fs.Int("records", 12, "sample records to produce")
	verbose := fs.Bool("verbose", false, "show host logs")
	if err := fs.Parse(args); err != nil {
		e.flagError("demo", err)
		return exitUsage
	}
	level := "error"
	if *verbose {
		level = "info"
	}
	if err := demo.Run(ctx, demo.Options{Out: e.stdout, Logger: e.logger(level), Records: *records}); err != nil {
		if errors.Is(err, context.Canceled) {
			return exitOK
		}
		fmt.Fprintf(e.stderr, "wasmstream demo: %v\n", err)
		return exitError
	}
	return exitOK
}

// hasStores reports whether any processor is stateful (and so restores).
func hasStores(cfg *host.Config) bool {
	for _, p := range cfg.Processors {
		if len(p.Stores) > 0 {
			return true
		}
	}
	return false
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
