package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

// Exit codes of replay --diff-against besides exitOK (identical) and
// exitUsage.
const (
	exitDiffer     = 1 // the versions differ
	exitDiffFailed = 3 // the replay failed
)

const replayDetails = `Runs a version of PROCESSOR's plugin (--plugin FILE or --version LABEL,
default the config's)
over a range of the processor's input and writes what it emits to --out, one
JSON line per emitted record ({"in": {topic, partition, offset}, "output",
"topic", "key", "value" (base64), "headers", "timestamp", "partition"}) or
per failed input record ({"in", "error"}), task after task (partition 0
first), in the order the records ran.

It is offline from the app: its own Kafka client, no consumer group,
nothing committed, produced or stored; each task starts from empty state,
held in memory. --from and --to bound the offsets read in every partition of
every input (from <= offset < to; default: the start and the last stable
offset); --from-time and --to-time bound it by record time as well. It is deterministic: the same range, module and config give
byte-identical output (the plugin's clock is the record's timestamp).
--state current starts each task from the app's current local state
instead: a copy, in memory, of the task's stores in the state directory
(state.dir/app_id), opened read-only and never written to; the app must be
stopped on this machine (a running process holds the directory, and replay
refuses then), and the directory must exist.

--version LABEL runs a version published on the app's control topic instead
of the config's plugin (a label, LABEL@HASH, or a hash prefix of 6+ hex
digits; the active version or one in its history), as --diff-against
resolves one; --plugin FILE runs a module file.

--diff-against LABEL|FILE runs a second version over the same records, each
task of each version from the same starting state, and compares them record
by record as a shadow run does: the emits' output, key, value and headers
(but wasmstream-version), in order. FILE is a module file; otherwise LABEL
names a version in the app's control topic (a label, LABEL@HASH, or a hash
prefix of 6+ hex digits; the active version or one in its history). --out
then gets one JSON document: per task the records compared, matching,
differing, failed by each version and by both, the totals, and the first
--diff-samples differing records (the input's topic/partition/offset, each
side's emits or error). Stdout gets a summary. Exit status with --diff-against: 0 the
versions behaved identically (same emits, or both failed, on every record),
1 they differ, 2 a usage error, 3 the replay failed (as diff(1) and cmp(1),
a script can tell "differ" from "failed").

Timers fire after each record as the ABI defines them over the records'
time (event-time ones by the stream time, processing-time ones by the
largest record timestamp so far: replay has no real time); a firing's
lines follow its record's and carry "timer": {kind, time, key}. A plugin
that marks keys for the commit hook (commit_mark), and a processor with
tables, are refused: replay has no commit points. With
runtime.trusted_keys, the modules must be signed.`

func (e *env) replay(ctx context.Context, args []string) int {
	var pluginFile, version, out, against, stateFrom string
	var samples int
	var from, to int64
	var fromTime, toTime string
	var parts []int32
	fs, path, code := e.configFlags("replay", args, false, func(fs *pflag.FlagSet) {
		fs.StringVar(&pluginFile, "plugin", "", "the module to run (default: the config's plugin of PROCESSOR)")
		fs.StringVar(&version, "version", "", "run this version of the app's control topic instead: a LABEL, LABEL@HASH or hash prefix")
		fs.Int64Var(&from, "from", 0, "the first offset to read in every input partition")
		fs.Int64Var(&to, "to", -1, "the offset to stop before in every input partition (default: the last stable offset)")
		fs.StringVar(&fromTime, "from-time", "", "also start at the first record at or after this time (RFC 3339)")
		fs.StringVar(&toTime, "to-time", "", "also stop before the first record at or after this time (RFC 3339)")
		fs.Int32SliceVar(&parts, "partitions", nil, "the partition numbers (tasks) to replay (default: all)")
		fs.StringVar(&out, "out", "", "the file to write the JSON lines (or the diff) to; - for standard output (required)")
		fs.StringVar(&stateFrom, "state", "empty", "each task's starting state: empty, or current (the app's local stores, read-only; the app stopped)")
		fs.StringVar(&against, "diff-against", "", "compare with this version: a module FILE, or a LABEL in the app's control topic")
		fs.IntVar(&samples, "diff-samples", 20, "with --diff-against, how many differing records to show")
	})
	if code != proceed {
		return code
	}
	fail := exitError
	if against != "" {
		fail = exitDiffFailed
	}
	if fs.NArg() != 1 || out == "" {
		fmt.Fprintln(e.stderr, "usage: wasmstream replay -c pipeline.yaml PROCESSOR [--plugin FILE|--version LABEL] [--from N] [--to N] [--partitions 0,1] [--state empty|current] [--diff-against LABEL|FILE] --out FILE|-")
		return exitUsage
	}
	if pluginFile != "" && version != "" {
		fmt.Fprintln(e.stderr, "wasmstream replay: --plugin and --version name the module to run: give one")
		return exitUsage
	}
	if stateFrom != string(host.ReplayStateEmpty) && stateFrom != string(host.ReplayStateCurrent) {
		fmt.Fprintf(e.stderr, "wasmstream replay: --state %q: want empty or current\n", stateFrom)
		return exitUsage
	}
	if samples < 0 || (fs.Changed("diff-samples") && against == "") {
		fmt.Fprintln(e.stderr, "wasmstream replay: --diff-samples takes a count >= 0, with --diff-against")
		return exitUsage
	}
	if from < 0 || (fs.Changed("to") && to < from) {
		fmt.Fprintf(e.stderr, "wasmstream replay: --from %d --to %d is not a range of offsets\n", from, to)
		return exitUsage
	}
	opts := host.ReplayOptions{Processor: fs.Arg(0), From: from, To: to, Partitions: parts, State: host.ReplayState(stateFrom)}
	for _, tf := range []struct {
		flag, v string
		t       *time.Time
	}{{"--from-time", fromTime, &opts.FromTime}, {"--to-time", toTime, &opts.ToTime}} {
		if tf.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tf.v)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: %s %q: want RFC 3339, like 2026-01-02T15:04:05Z\n", tf.flag, tf.v)
			return exitUsage
		}
		*tf.t = t
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return fail
	}
	if pluginFile != "" {
		wasm, err := readModule(pluginFile, cfg.Runtime.MaxModuleSize)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", err)
			return fail
		}
		opts.Plugin = wasm
	}
	log := e.logger(commandLogLevel(fs, cfg))
	if version != "" {
		wasm, v, err := host.VersionModule(ctx, cfg, opts.Processor, version, log)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: --version %s: %v\n", version, err)
			return fail
		}
		opts.Plugin = wasm
		log.Info("replaying a version of the control topic", "processor", opts.Processor, "version", v.ID)
	}
	var againstWasm []byte
	againstName := against
	if against != "" {
		var err error
		if againstWasm, againstName, err = e.replayAgainst(ctx, cfg, opts.Processor, against, log); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: --diff-against %s: %v\n", against, err)
			return fail
		}
	}
	var w io.Writer = e.stdout
	var f *os.File
	if out != "-" {
		var err error
		if f, err = os.Create(out); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", absPathError(err))
			return fail
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if against != "" {
		return e.replayDiff(ctx, cfg, opts, againstWasm, againstName, samples, bw, f, out, log)
	}
	res, err := host.Replay(ctx, cfg, opts, bw, log)
	err = finishOutput(bw, f, err)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", err)
		return fail
	}
	msg := fmt.Sprintf("replayed %s over %d task(s): %d records in, %d emitted, %d failed", opts.Processor, res.Tasks, res.Records, res.Emitted, res.Failed)
	if res.Fired > 0 {
		msg += fmt.Sprintf(", %d timers fired", res.Fired)
	}
	if out == "-" {
		fmt.Fprintln(e.stderr, msg)
	} else {
		fmt.Fprintf(e.stdout, "%s; written to %s\n", msg, out)
	}
	return exitOK
}

// replayAgainst reads the version --diff-against names: a module file if
// ref is one, else a version in the app's control topic. It returns the
// bytes and the name to report.
func (e *env) replayAgainst(ctx context.Context, cfg *host.Config, processor, ref string, log *slog.Logger) ([]byte, string, error) {
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		wasm, err := readModule(ref, cfg.Runtime.MaxModuleSize)
		return wasm, ref, err
	}
	wasm, v, err := host.VersionModule(ctx, cfg, processor, ref, log)
	if err != nil {
		return nil, "", fmt.Errorf("not a file, nor a version in the control topic: %w", err)
	}
	return wasm, v.ID, nil
}

// replayDiff runs host.ReplayDiff, writes its result as JSON to bw (then
// f, the --out file, or stdout) and a summary to stdout (stderr with --out
// -). Exit status 0 when the versions behaved alike, 1 when they differ.
func (e *env) replayDiff(ctx context.Context, cfg *host.Config, opts host.ReplayOptions, against []byte, againstName string,
	samples int, bw *bufio.Writer, f *os.File, out string, log *slog.Logger) int {
	res, err := host.ReplayDiff(ctx, cfg, opts, against, samples, log)
	if err == nil {
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	}
	err = finishOutput(bw, f, err)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", err)
		return exitDiffFailed
	}
	t := res.Total
	verdict, code := "identical", exitOK
	if !res.Identical() {
		verdict, code = "they differ", exitDiffer
	}
	msg := fmt.Sprintf("replayed %s against %s over %d task(s): %d records, %d matching, %d differing, %d failed, %d failed against, %d failed by both: %s",
		opts.Processor, againstName, len(res.Tasks), t.Records, t.Matching, t.Differing, t.Failed, t.AgainstFailed, t.FailedBoth, verdict)
	if out == "-" {
		fmt.Fprintln(e.stderr, msg)
	} else {
		fmt.Fprintf(e.stdout, "%s; written to %s\n", msg, out)
	}
	return code
}

// finishOutput flushes bw and closes f (the --out file; nil for stdout),
// and returns err, or else the first error of those.
func finishOutput(bw *bufio.Writer, f *os.File, err error) error {
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
