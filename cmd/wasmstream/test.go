package main

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/host/testdriver"
)

// test runs `wasmstream test pipeline.yaml CASES.yaml...`: every case of
// every file on the pipeline, in process (host/testdriver).
func (e *env) test(ctx context.Context, args []string) int {
	fs := e.flagSet("test")
	partitions := fs.Int("partitions", 1, "partitions of every topic (more than 1: a topic several tasks write gets their records in the order they come)")
	timeout := fs.Duration("timeout", time.Minute, "how long a step may wait for the pipeline")
	level := fs.String("log-level", "error", "the pipeline's log on stderr: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return e.flagError("test", err)
	}
	if fs.NArg() < 2 {
		fmt.Fprintln(e.stderr, "usage: wasmstream test pipeline.yaml CASES.yaml... (wasmstream test --help)")
		return exitUsage
	}
	if *partitions < 1 {
		fmt.Fprintf(e.stderr, "wasmstream test: --partitions %d: want 1 or more\n", *partitions)
		return exitUsage
	}
	path := fs.Arg(0)
	opts := testdriver.Options{Partitions: *partitions, Timeout: *timeout, Logger: e.logger(*level)}
	failed, total := 0, 0
	for _, file := range fs.Args()[1:] {
		cs, err := testdriver.LoadCases(file)
		if err != nil {
			fmt.Fprintf(e.stderr, "wasmstream test: %v\n", err)
			return exitError
		}
		fmt.Fprintf(e.stdout, "=== %s\n", file)
		failed += testdriver.RunCases(ctx, path, cs, opts, e.stdout)
		total += len(cs.Cases)
	}
	if failed > 0 {
		fmt.Fprintf(e.stdout, "FAIL: %d of %d cases\n", failed, total)
		return exitError
	}
	fmt.Fprintf(e.stdout, "ok: %d cases\n", total)
	return exitOK
}
