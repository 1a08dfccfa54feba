package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/configload"
	"github.com/wasmstream/wasmstream/internal/demo"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (bad config, bad plugin, runtime error)
	exitUsage = 2 // the command line was wrong
)

type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	environ        []string
}

func doMain(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	return doMainIO(ctx, args, os.Stdin, stdout, stderr, environ)
}

// doMainIO is doMain with the standard input too (topic produce reads it).
func doMainIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, environ: environ}
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return exitUsage
	}
	// Commands without a flag set of their own answer -h/--help here.
	helpHere := func(name string) bool {
		if wantsHelp(args) {
			printHelp(stdout, docFor(name), nil)
			return true
		}
		return false
	}
	switch args[0] {
	case "run":
		return e.run(ctx, args[1:])
	case "validate":
		return e.validate(ctx, args[1:])
	case "test":
		return e.test(ctx, args[1:])
	case "plugin":
		if len(args) > 1 {
			switch args[1] { // their flag sets answer --help
			case "inspect":
				return e.inspect(ctx, args[2:])
			case "sign":
				return e.sign(args[2:])
			case "keygen":
				return e.keygen(args[2:])
			}
		}
		if helpHere("plugin") {
			return exitOK
		}
		fmt.Fprintln(stderr, "usage: wasmstream plugin inspect|sign|keygen ... (wasmstream plugin --help)")
		return exitUsage
	case "state":
		if len(args) < 2 || args[1] != "dump" {
			if helpHere("state") {
				return exitOK
			}
		}
		return e.state(args[1:])
	case "topic":
		if len(args) < 2 || topicCommands[args[1]] == nil {
			if helpHere("topic") {
				return exitOK
			}
		}
		return e.topic(ctx, args[1:])
	case "deploy":
		return e.deploy(ctx, args[1:])
	case "rollback":
		return e.rollback(ctx, args[1:])
	case "shadow":
		if len(args) < 2 || args[1] != "status" && args[1] != "stop" {
			if helpHere("shadow") {
				return exitOK
			}
		}
		return e.shadow(ctx, args[1:])
	case "query":
		return e.query(ctx, args[1:])
	case "pause":
		return e.pause(ctx, args[1:])
	case "resume":
		return e.resume(ctx, args[1:])
	case "reset":
		return e.reset(ctx, args[1:])
	case "replay":
		return e.replay(ctx, args[1:])
	case "demo":
		return e.demo(ctx, args[1:])
	case "init":
		return e.initProject(args[1:])
	case "version", "--version":
		if helpHere("version") {
			return exitOK
		}
		return e.version(args[1:])
	case "help", "-h", "--help":
		return e.help(ctx, args[1:])
	default:
		fmt.Fprintf(stderr, "wasmstream: unknown command %q\n\n%s", args[0], topUsage())
		return exitUsage
	}
}

// proceed is configFlags' exit code for "go on with the command".
const proceed = -1

// configFlags parses the flags shared by commands that read a config, and
// those extra registers. It returns proceed, or the exit code to stop with:
// exitOK after -h/--help (the command's help is printed), exitUsage for a
// bad command line. The config file (-c) is required unless fileOptional
// (run, whose config may come from the environment alone).
func (e *env) configFlags(name string, args []string, fileOptional bool, extra ...func(*pflag.FlagSet)) (*pflag.FlagSet, string, int) {
	fs := e.flagSet(name)
	path := fs.StringP("config", "c", "", "pipeline config file (YAML)")
	configload.Flags(fs)
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", e.flagError(name, err)
	}
	if *path == "" && !fileOptional {
		fmt.Fprintf(e.stderr, "wasmstream %s: -c pipeline.yaml is required (wasmstream %s --help)\n", name, name)
		return nil, "", exitUsage
	}
	return fs, *path, proceed
}

// flagError reports a command line pflag refused (with ContinueOnError it
// prints nothing itself) and returns the exit code: -h/--help has printed
// the command's help, which is a success.
func (e *env) flagError(name string, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "wasmstream %s: %v (wasmstream %s --help lists its flags)\n", name, err, name)
	return exitUsage
}

func (e *env) loadConfig(path string, fs *pflag.FlagSet) (*host.Config, bool) {
	return e.loadConfigWith(configload.Load, path, fs)
}

// loadConfigWith loads the config with load (configload.Load or
// configload.LoadKafka) and reports a bad one.
func (e *env) loadConfigWith(load func(string, []string, *pflag.FlagSet) (*host.Config, error), path string, fs *pflag.FlagSet) (*host.Config, bool) {
	cfg, err := load(path, e.environ, fs)
	if err != nil {
		from := path
		if from == "" {
			from = "(from the environment)"
		}
		fmt.Fprintf(e.stderr, "wasmstream: invalid config %s:\n%s\n", from, indent(err.Error()))
		return nil, false
	}
	return cfg, true
}

func (e *env) logger(level string) *slog.Logger { return loggerTo(e.stderr, level, "text") }

// loggerTo makes the process's logger: format is log.format, text or json.
func loggerTo(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (e *env) run(ctx context.Context, args []string) int {
	var embeddedPort int
	fs, path, code := e.configFlags("run", args, true, func(fs *pflag.FlagSet) {
		fs.IntVar(&embeddedPort, "embedded-port", 0, "port of the embedded development broker on 127.0.0.1 (used when kafka.brokers is empty; 0: any free port)")
	})
	if code != proceed {
		return code
	}
	if path == "" && !hasConfigEnv(e.environ) {
		fmt.Fprintln(e.stderr, "wasmstream run: no config: give -c pipeline.yaml, or WASMSTREAM_* environment variables (wasmstream run --help)")
		return exitUsage
	}
	if embeddedPort < 0 || embeddedPort > 65535 {
		fmt.Fprintf(e.stderr, "wasmstream run: --embedded-port %d is not a port number\n", embeddedPort)
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
	opts := []host.Option{host.WithEmbeddedPort(embeddedPort)}
	if width, ok := terminal(e.stderr, e.environ); ok && hasStores(cfg) {
		bars = newRestoreBars(e.stderr, width)
		defer bars.Close()
		stderr = bars
		opts = append(opts, host.WithRestoreProgress(bars.Update))
	}
	log := loggerTo(stderr, string(cfg.Log.Level), string(cfg.Log.Format))
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
		reach := "--brokers " + strings.Join(h.Brokers(), ",")
		if path != "" {
			reach = "-c " + path
		}
		fmt.Fprintf(stderr, "wasmstream: DEVELOPMENT MODE: embedded Kafka at %s (set kafka.brokers for a real cluster; it keeps nothing between runs). "+
			"Feed and read it with: wasmstream topic produce|consume %s TOPIC\n", strings.Join(h.Brokers(), ","), reach)
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
	fs, path, code := e.configFlags("validate", args, false)
	if code != proceed {
		return code
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	if err := host.Validate(ctx, cfg, e.logger("warn")); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream: %s: plugin problems:\n%s\n", path, indent(err.Error()))
		return exitError
	}
	fmt.Fprintf(e.stdout, "%s: ok (%s)\n", path, plural(len(cfg.Processors), "processor", "processors"))
	return exitOK
}

func (e *env) inspect(ctx context.Context, args []string) int {
	fs := e.flagSet("plugin inspect")
	path := fs.StringP("config", "c", "", "pipeline config file (YAML) whose runtime.max_module_size and runtime.module_limits apply")
	maxSize := fs.String("max-module-size", "", "largest module to read, like 64MiB (default: runtime.max_module_size of -c, else "+host.ByteSize(host.DefaultMaxModuleSize).String()+")")
	if err := fs.Parse(args); err != nil {
		return e.flagError("plugin inspect", err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "usage: wasmstream plugin inspect [-c pipeline.yaml | --max-module-size SIZE] FILE.wasm")
		return exitUsage
	}
	limit := host.ByteSize(host.DefaultMaxModuleSize)
	var cfg *host.Config
	if *path != "" {
		var ok bool
		if cfg, ok = e.loadConfig(*path, nil); !ok {
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
	info, err := host.InspectPluginWith(ctx, wasm, cfg)
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
		return nil, absPathError(err)
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

// absPathError makes a file error name the absolute path it tried ("open
// /home/me/x.wasm: no such file or directory", not "open x.wasm: ...").
func absPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		if abs, aerr := filepath.Abs(pe.Path); aerr == nil {
			return &fs.PathError{Op: pe.Op, Path: abs, Err: pe.Err}
		}
	}
	return err
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
	switch {
	case info.Signer == "" && info.SignatureProblem == "":
		fmt.Fprintf(w, "signature:    none\n")
	case info.SignatureProblem != "" && info.Signer == "":
		fmt.Fprintf(w, "signature:    BAD: %s\n", info.SignatureProblem)
	case info.SignatureProblem != "":
		fmt.Fprintf(w, "signature:    BAD, by %s: %s\n", info.Signer, info.SignatureProblem)
	default:
		fmt.Fprintf(w, "signature:    %s, matches the module's bytes (runtime.trusted_keys decides whether it is trusted)\n", info.Signer)
	}
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	cpu := info.CompileTime.Round(time.Millisecond)
	if cpu >= time.Second {
		cpu = cpu.Round(100 * time.Millisecond)
	}
	fmt.Fprintf(w, "compile cost: about %s and %v of CPU to compile, %s per instance (estimates; runtime.module_limits)\n",
		mib(info.CompileMemory), cpu, mib(info.InstanceMemory))
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
	fs := e.flagSet("demo")
	records := fs.Int("records", 12, "sample records to produce")
	verbose := fs.Bool("verbose", false, "show host logs")
	port := fs.Int("port", 0, "port of the embedded Kafka on 127.0.0.1 (0: any free port)")
	keep := fs.String("keep", "", "keep the word count's config, plugin and state in this directory")
	if err := fs.Parse(args); err != nil {
		return e.flagError("demo", err)
	}
	level := "error"
	if *verbose {
		level = "info"
	}
	if err := demo.Run(ctx, demo.Options{Out: e.stdout, Logger: e.logger(level), Records: *records, Port: *port, Keep: *keep}); err != nil {
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

// hasConfigEnv reports whether environ sets any config variable.
func hasConfigEnv(environ []string) bool {
	for _, kv := range environ {
		if strings.HasPrefix(kv, configload.EnvPrefix) {
			return true
		}
	}
	return false
}

// plural is n and the noun: one when n is 1, many otherwise.
func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
