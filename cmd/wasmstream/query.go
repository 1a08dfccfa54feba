package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const queryUsage = `usage: wasmstream query -c pipeline.yaml PROCESSOR STORE KEY [--format utf8|hex|base64] [--value-format F] [--partition P]

Reads KEY's committed value in STORE of PROCESSOR from the running
processes of the app (their interactive-query endpoint, query.listen): the
process holding the key's task is found through the control topic on
kafka.brokers, and answers with the value and the store's checkpoint, as
JSON on stdout. KEY is given in --format (default utf8); the value is
written in --value-format (default: --format). The key's task is the
partition Kafka's default partitioner gives it on the processor's input;
--partition P asks task P instead (a store keyed otherwise). Exit 0 when
found, 1 when the store has no such key or the task is unavailable (a
rebalance or a restore: try again), 2 on a usage error.
`

func (e *env) query(ctx context.Context, args []string) int {
	fs, path, code := e.configFlags("query", args, false, func(fs *pflag.FlagSet) {
		fs.String("format", "utf8", "how KEY is written, and the answer's keys: utf8, hex or base64")
		fs.String("value-format", "", "how the value is written: utf8, hex or base64 (default: --format)")
		fs.Int32("partition", -1, "the task to ask (default: the key's partition)")
	})
	if code != proceed {
		return code
	}
	if fs.NArg() != 3 {
		fmt.Fprint(e.stderr, queryUsage)
		return exitUsage
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	format, _ := fs.GetString("format")
	valueFormat, _ := fs.GetString("value-format")
	partition, _ := fs.GetInt32("partition")
	res, err := host.Query(ctx, cfg, fs.Arg(0), fs.Arg(1), fs.Arg(2), format, valueFormat, partition, e.logger(commandLogLevel(fs, cfg)))
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream query: %v\n", err)
		return exitError
	}
	switch res.Status {
	case http.StatusOK:
		fmt.Fprintf(e.stdout, "%s", res.Body)
		return exitOK
	case http.StatusNotFound:
		fmt.Fprintf(e.stdout, "%s", res.Body)
		var a struct {
			Found *bool `json:"found"`
		}
		if json.Unmarshal(res.Body, &a) == nil && a.Found != nil {
			fmt.Fprintf(e.stderr, "wasmstream query: %s has no key %q in store %s\n", fs.Arg(0), fs.Arg(2), fs.Arg(1))
			return exitError
		}
	}
	var a struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(res.Body, &a) != nil || a.Error == "" {
		a.Error = string(res.Body)
	}
	fmt.Fprintf(e.stderr, "wasmstream query: %d %s: %s\n", res.Status, http.StatusText(res.Status), a.Error)
	return exitError
}
