package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const resetDetails = `Prepares a stopped app to process its input again, like Kafka Streams'
application-reset tool. With every process of the app stopped, it:

  - moves the group's (app_id) committed offsets of every processor's input
    topics to the target: --to-earliest, --to-latest, --to-time (the first
    record at or after it) or --to-offset (in every partition, within the
    partition's start and end);
  - moves those of the app's repartition topics to their end (the
    processors that write them write them again from the reset inputs);
  - deletes every store's changelog topic (the next run creates it empty);
  - removes the local state directory (state.dir/app_id).

It refuses while the group has members, naming them, and while a process
on this machine holds the state directory. Output, dead-letter and table
topics are left as they are: a rerun appends its results to the outputs.
Run it from one machine; on every other machine that ran the app, remove
its state directory before starting it again. --dry-run prints what it
would do and changes nothing.`

func (e *env) reset(ctx context.Context, args []string) int {
	var earliest, latest, dry bool
	var at string
	var offset int64
	fs, path, code := e.configFlags("reset", args, false, func(fs *pflag.FlagSet) {
		fs.BoolVar(&earliest, "to-earliest", false, "move the inputs' committed offsets to each partition's start")
		fs.BoolVar(&latest, "to-latest", false, "move them to each partition's end (skip what is there)")
		fs.StringVar(&at, "to-time", "", "move them to the first record at or after this time (RFC 3339: 2026-01-02T15:04:05Z)")
		fs.Int64Var(&offset, "to-offset", -1, "move them to this offset in every partition (within the partition's start and end)")
		fs.BoolVar(&dry, "dry-run", false, "print what reset would do and change nothing")
	})
	if code != proceed {
		return code
	}
	opts := host.ResetOptions{Earliest: earliest, Latest: latest, DryRun: dry, AtOffset: fs.Changed("to-offset"), Offset: offset}
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream reset: --to-time %q: want RFC 3339, like 2026-01-02T15:04:05Z\n", at)
			return exitUsage
		}
		opts.Time = t
	}
	n := 0
	for _, b := range []bool{earliest, latest, at != "", opts.AtOffset} {
		if b {
			n++
		}
	}
	if n != 1 || fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "usage: wasmstream reset -c pipeline.yaml --to-earliest|--to-latest|--to-time TIME|--to-offset N [--dry-run] (exactly one target)")
		return exitUsage
	}
	if opts.AtOffset && offset < 0 {
		fmt.Fprintf(e.stderr, "wasmstream reset: --to-offset %d is negative\n", offset)
		return exitUsage
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	res, err := host.Reset(ctx, cfg, opts, e.logger(commandLogLevel(fs, cfg)))
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream reset: %v\n", err)
		return exitError
	}
	verb := map[bool]string{false: "", true: "would "}[dry]
	topics := make([]string, 0, len(res.Offsets))
	for t := range res.Offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		parts := make([]int32, 0, len(res.Offsets[t]))
		for p := range res.Offsets[t] {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		var s []string
		for _, p := range parts {
			s = append(s, fmt.Sprintf("%d@%d", p, res.Offsets[t][p]))
		}
		fmt.Fprintf(e.stdout, "%scommit group %s offsets of %s: %s\n", verb, res.Group, t, strings.Join(s, " "))
	}
	for _, t := range res.DeletedChangelogs {
		fmt.Fprintf(e.stdout, "%sdelete changelog topic %s\n", verb, t)
	}
	if res.StateDir != "" {
		fmt.Fprintf(e.stdout, "%sremove local state directory %s\n", verb, res.StateDir)
	}
	if dry {
		fmt.Fprintln(e.stdout, "dry run: nothing changed")
	} else {
		fmt.Fprintf(e.stdout, "reset %s: the next run processes the inputs from the new offsets with empty state\n", res.Group)
	}
	return exitOK
}
