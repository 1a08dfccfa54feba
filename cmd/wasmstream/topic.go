package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/configload"
)

const topicUsage = `usage: wasmstream topic produce|consume|list|create|describe [TOPIC] [-c pipeline.yaml | --brokers HOST:PORT] [flags]

Puts records into a topic and reads them out, and lists, creates and
describes topics, on the brokers of a pipeline's config (-c, with its TLS
and SASL settings) or of --brokers. With kafka.brokers empty, -c finds the
embedded development broker of a running "wasmstream run" of that config.
`

// topicCommands are the subcommands of `wasmstream topic`.
var topicCommands = map[string]func(e *env, ctx context.Context, args []string) int{
	"produce":  (*env).topicProduce,
	"consume":  (*env).topicConsume,
	"list":     (*env).topicList,
	"create":   (*env).topicCreate,
	"describe": (*env).topicDescribe,
}

// topic runs `wasmstream topic SUBCOMMAND`.
func (e *env) topic(ctx context.Context, args []string) int {
	if len(args) == 0 || topicCommands[args[0]] == nil {
		if len(args) > 0 && !wantsHelp(args[:1]) {
			fmt.Fprintf(e.stderr, "wasmstream topic: unknown subcommand %q\n\n", args[0])
		}
		fmt.Fprint(e.stderr, topicUsage)
		return exitUsage
	}
	return topicCommands[args[0]](e, ctx, args[1:])
}

// topicTool parses a topic command's flags (extra adds its own), loads
// the Kafka part of the config and connects. want is how many positional
// arguments the command takes. It returns proceed, or the exit code to
// stop with.
func (e *env) topicTool(ctx context.Context, name string, args []string, want int, extra func(*pflag.FlagSet)) (*host.TopicTool, *pflag.FlagSet, int) {
	var flags []func(*pflag.FlagSet)
	if extra != nil {
		flags = append(flags, extra)
	}
	fs, path, code := e.configFlags(name, args, true, flags...)
	if code != proceed {
		return nil, nil, code
	}
	if fs.NArg() != want {
		d := docFor(name)
		fmt.Fprintf(e.stderr, "usage: %s\n(wasmstream %s --help)\n", d.usage, name)
		return nil, nil, exitUsage
	}
	cfg, ok := e.loadConfigWith(configload.LoadKafka, path, fs)
	if !ok {
		return nil, nil, exitError
	}
	tool, err := host.OpenTopicTool(ctx, cfg, e.logger(commandLogLevel(fs, cfg)))
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream %s: %v\n", name, err)
		return nil, nil, exitError
	}
	return tool, fs, proceed
}

func (e *env) topicProduce(ctx context.Context, args []string) int {
	var (
		keySep, format string
		partition      int32
		headers        []string
	)
	tool, fs, code := e.topicTool(ctx, "topic produce", args, 1, func(fs *pflag.FlagSet) {
		fs.StringVarP(&keySep, "key-sep", "k", "", "split each line at the first SEP into KEY and VALUE (default: the line is the value, the key null)")
		fs.StringVar(&format, "format", "text", "text (a record per line) or json (an object per line: key, value, headers, timestamp, partition)")
		fs.Int32Var(&partition, "partition", -1, "write every record to this partition (default: by key, as the host partitions)")
		fs.StringArrayVarP(&headers, "header", "H", nil, "add the header NAME=VALUE to every record (repeatable)")
	})
	if code != proceed {
		return code
	}
	defer tool.Close()
	o := host.ProduceOptions{Topic: fs.Arg(0), Format: format, KeySep: keySep}
	if fs.Changed("partition") {
		o.Partition = &partition
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			fmt.Fprintf(e.stderr, "wasmstream topic produce: --header %q: want NAME=VALUE\n", h)
			return exitUsage
		}
		o.Headers = append(o.Headers, host.RecordHeader{Key: k, Value: []byte(v)})
	}
	res, err := tool.Produce(ctx, e.stdin, o)
	if res.Records > 0 || err == nil {
		var parts []string
		for p := int32(0); len(parts) < len(res.ByPartition); p++ {
			if n, ok := res.ByPartition[p]; ok {
				parts = append(parts, fmt.Sprintf("%d: %d", p, n))
			}
		}
		fmt.Fprintf(e.stderr, "produced %s to %s", plural(res.Records, "record", "records"), o.Topic)
		if len(parts) > 0 {
			fmt.Fprintf(e.stderr, " (by partition: %s)", strings.Join(parts, ", "))
		}
		fmt.Fprintln(e.stderr)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream topic produce: %v\n", err)
		return exitError
	}
	return exitOK
}

func (e *env) topicConsume(ctx context.Context, args []string) int {
	var (
		o          host.ConsumeOptions
		partitions []int32
	)
	tool, fs, code := e.topicTool(ctx, "topic consume", args, 1, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.From, "from", "start", "where to start: start, end, OFFSET, +N (N after the start), -N (N before the end), @TIME (@1700000000000, @2025-01-02T15:04:05Z, @-10m)")
		fs.BoolVar(&o.Follow, "follow", false, "keep waiting for new records until Ctrl-C (default: stop at the end)")
		fs.IntVarP(&o.Max, "num", "n", 0, "stop after N records (0: no limit)")
		fs.StringVar(&o.Format, "format", "text", "text, json, or a template: %k key, %v value, %p partition, %o offset, %h headers, %d/%T timestamp, %t topic, \\n")
		fs.Int32SliceVarP(&partitions, "partition", "p", nil, "read only these partitions (default: all)")
		fs.BoolVar(&o.ReadUncommitted, "read-uncommitted", false, "also read records of open and aborted transactions (default: committed only, as the host reads)")
	})
	if code != proceed {
		return code
	}
	defer tool.Close()
	o.Topic, o.Partitions = fs.Arg(0), partitions
	res, err := tool.Consume(ctx, e.stdout, o)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream topic consume: %v\n", err)
		return exitError
	}
	if len(res.Short) > 0 {
		fmt.Fprintf(e.stderr, "wasmstream topic consume: stopped before the end of partitions %v: nothing came for 5s (records of aborted transactions at the end are skipped and leave nothing to read)\n", res.Short)
	}
	return exitOK
}

func (e *env) topicList(ctx context.Context, args []string) int {
	var internal bool
	tool, _, code := e.topicTool(ctx, "topic list", args, 0, func(fs *pflag.FlagSet) {
		fs.BoolVar(&internal, "internal", false, "also list the broker's internal topics (__consumer_offsets, ...)")
	})
	if code != proceed {
		return code
	}
	defer tool.Close()
	if err := tool.ListTopics(ctx, e.stdout, internal); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream topic list: %v\n", err)
		return exitError
	}
	return exitOK
}

func (e *env) topicCreate(ctx context.Context, args []string) int {
	var (
		o       host.CreateTopicOptions
		configs []string
	)
	tool, fs, code := e.topicTool(ctx, "topic create", args, 1, func(fs *pflag.FlagSet) {
		fs.Int32VarP(&o.Partitions, "partitions", "p", 0, "partitions (default: kafka.topic_partitions, 3 unless the config says otherwise)")
		fs.Int16VarP(&o.Replicas, "replicas", "r", 0, "replication factor (default: the broker's)")
		fs.StringArrayVar(&configs, "topic-config", nil, "a topic config NAME=VALUE, such as cleanup.policy=compact (repeatable)")
	})
	if code != proceed {
		return code
	}
	defer tool.Close()
	o.Topic = fs.Arg(0)
	for _, c := range configs {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			fmt.Fprintf(e.stderr, "wasmstream topic create: --topic-config %q: want NAME=VALUE\n", c)
			return exitUsage
		}
		if o.Configs == nil {
			o.Configs = map[string]string{}
		}
		o.Configs[k] = v
	}
	parts, replicas, err := tool.CreateTopic(ctx, o)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream topic create: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.stdout, "created topic %s (%d partitions, replication factor %d) on %s\n", o.Topic, parts, replicas, strings.Join(tool.Brokers(), ","))
	return exitOK
}

func (e *env) topicDescribe(ctx context.Context, args []string) int {
	tool, fs, code := e.topicTool(ctx, "topic describe", args, 1, nil)
	if code != proceed {
		return code
	}
	defer tool.Close()
	if err := tool.DescribeTopic(ctx, e.stdout, fs.Arg(0)); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream topic describe: %v\n", err)
		return exitError
	}
	return exitOK
}
