package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const replayDetails = `Runs a version of PROCESSOR's plugin (--plugin FILE, default the config's)
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
A plugin that uses timers or the commit hook, and a processor with tables,
are refused. With runtime.trusted_keys, the module must be signed.`

func (e *env) replay(ctx context.Context, args []string) int {
	var pluginFile, out string
	var from, to int64
	var fromTime, toTime string
	var parts []int32
	fs, path, code := e.configFlags("replay", args, false, func(fs *pflag.FlagSet) {
		fs.StringVar(&pluginFile, "plugin", "", "the module to run (default: the config's plugin of PROCESSOR)")
		fs.Int64Var(&from, "from", 0, "the first offset to read in every input partition")
		fs.Int64Var(&to, "to", -1, "the offset to stop before in every input partition (default: the last stable offset)")
		fs.StringVar(&fromTime, "from-time", "", "also start at the first record at or after this time (RFC 3339)")
		fs.StringVar(&toTime, "to-time", "", "also stop before the first record at or after this time (RFC 3339)")
		fs.Int32SliceVar(&parts, "partitions", nil, "the partition numbers (tasks) to replay (default: all)")
		fs.StringVar(&out, "out", "", "the file to write the JSON lines to; - for standard output (required)")
	})
	if code != proceed {
		return code
	}
	if fs.NArg() != 1 || out == "" {
		fmt.Fprintln(e.stderr, "usage: wasmstream replay -c pipeline.yaml PROCESSOR [--plugin FILE] [--from N] [--to N] [--partitions 0,1] --out FILE|-")
		return exitUsage
	}
	if from < 0 || (fs.Changed("to") && to < from) {
		fmt.Fprintf(e.stderr, "wasmstream replay: --from %d --to %d is not a range of offsets\n", from, to)
		return exitUsage
	}
	opts := host.ReplayOptions{Processor: fs.Arg(0), From: from, To: to, Partitions: parts}
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
		return exitError
	}
	if pluginFile != "" {
		wasm, err := readModule(pluginFile, cfg.Runtime.MaxModuleSize)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", err)
			return exitError
		}
		opts.Plugin = wasm
	}
	var w io.Writer = e.stdout
	var f *os.File
	if out != "-" {
		var err error
		if f, err = os.Create(out); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", absPathError(err))
			return exitError
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	res, err := host.Replay(ctx, cfg, opts, bw, e.logger(commandLogLevel(fs, cfg)))
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream replay: %v\n", err)
		return exitError
	}
	msg := fmt.Sprintf("replayed %s over %d task(s): %d records in, %d emitted, %d failed", opts.Processor, res.Tasks, res.Records, res.Emitted, res.Failed)
	if out == "-" {
		fmt.Fprintln(e.stderr, msg)
	} else {
		fmt.Fprintf(e.stdout, "%s; written to %s\n", msg, out)
	}
	return exitOK
}
