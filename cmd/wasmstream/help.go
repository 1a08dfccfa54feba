package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/internal/scaffold"
)

// cmdDoc is the help of one command: `wasmstream CMD --help`, `wasmstream
// help CMD` and the command list of `wasmstream help` are made from it.
type cmdDoc struct {
	name     string // "run", "plugin inspect"
	summary  string // one line, no final period
	usage    string // the synopsis after "Usage: "
	details  string // paragraphs, may be ""
	examples []string
	hidden   bool // a group ("plugin", "state"): not listed on its own
}

var docs = []cmdDoc{
	{
		name:    "run",
		summary: "run the pipeline until SIGINT or SIGTERM",
		usage:   "wasmstream run [-c pipeline.yaml] [flags]",
		details: `Runs every processor of the config against Kafka. The config is read from
the file (-c), then WASMSTREAM_* environment variables, then flags; -c may be
left out when the environment holds the whole config (processors too, by
index: WASMSTREAM_PROCESSORS__0__NAME, WASMSTREAM_PROCESSORS__0__INPUTS=a,b).

Without kafka.brokers an embedded development broker is started on
127.0.0.1 (--embedded-port fixes its port). SIGINT or SIGTERM stops cleanly:
the record in flight finishes and processed records are committed.`,
		examples: []string{
			"wasmstream run -c pipeline.yaml",
			"wasmstream run -c pipeline.yaml --brokers kafka-1:9092,kafka-2:9092 --admin-listen :9090",
			"WASMSTREAM_APP_ID=orders WASMSTREAM_KAFKA__BROKERS=kafka:9092 \\\n    WASMSTREAM_PROCESSORS__0__NAME=mask WASMSTREAM_PROCESSORS__0__PLUGIN=/plugins/mask.wasm \\\n    WASMSTREAM_PROCESSORS__0__INPUTS=orders WASMSTREAM_PROCESSORS__0__OUTPUTS__OUT=orders-masked wasmstream run",
			"wasmstream run -c pipeline.yaml --embedded-port 9092   # development broker on 127.0.0.1:9092",
		},
	},
	{
		name:    "validate",
		summary: "check the config and compile every plugin, without Kafka",
		usage:   "wasmstream validate -c pipeline.yaml [flags]",
		details: `Loads the config as run does, reports every problem with its field path,
then compiles and instantiates each processor's plugin with its config and
limits. Exit 0 when all is well.`,
		examples: []string{"wasmstream validate -c pipeline.yaml"},
	},
	{
		name:    "test",
		summary: "run a pipeline's test cases in process, with its plugins and no Kafka",
		usage:   "wasmstream test pipeline.yaml CASES.yaml... [--partitions N] [--timeout D] [--log-level L]",
		details: `Runs each case of each file on a new copy of the pipeline: an embedded broker
in this process, the config's plugins (any language: the .wasm files it
names), the host's own runners, commit points, timers and stores. A case's
steps pipe records into topics, advance the wall clock the plugins see,
commit, and expect outputs, dead letters and store contents:

  cases:
    - name: words are counted
      steps:
        - pipe: {topic: lines, records: [{key: l1, value: "the cat", timestamp: 1s}]}
        - commit
        - expect:
            outputs:
              word-counts: [{key: the, value: "1"}, {key: cat, value: "1"}]
            stores:
              count: {counts: [{key: cat, value_hex: "0000000000000001"}, {key: the, value_hex: "0000000000000001"}]}

A failed expectation prints a diff (- want, + got); the exit code is 1 when
any case failed. The format: docs/testing.md.`,
		examples: []string{
			"wasmstream test pipeline.yaml cases.yaml",
			"wasmstream test pipeline.yaml tests/*.yaml --log-level info",
		},
	},
	{name: "plugin", summary: "inspect and sign plugin modules", usage: "wasmstream plugin inspect|sign|keygen ...", hidden: true,
		examples: []string{"wasmstream plugin inspect mask.wasm", "wasmstream plugin sign --key team.pem mask.wasm"}},
	{
		name:    "plugin keygen",
		summary: "make an Ed25519 key pair to sign plugins with",
		usage:   "wasmstream plugin keygen --out KEY.pem",
		details: `Writes a new private key to KEY.pem (PEM, PKCS#8, mode 0600) and its public
key to KEY.pub.pem, and prints the key's fingerprint. List KEY.pub.pem in
runtime.trusted_keys; keep KEY.pem where plugins are signed. It never
overwrites a file. openssl makes the same files:
  openssl genpkey -algorithm ed25519 -out KEY.pem
  openssl pkey -in KEY.pem -pubout -out KEY.pub.pem`,
		examples: []string{"wasmstream plugin keygen --out team.pem"},
	},
	{
		name:    "plugin sign",
		summary: "sign a plugin module with an Ed25519 key",
		usage:   "wasmstream plugin sign --key KEY.pem FILE.wasm [--out SIGNED.wasm]",
		details: `Appends a signature of the module's bytes as its last section, a custom
section named wasmstream.signature (abi/ABI.md section 11), replacing one it
already ends with; FILE is replaced unless --out is given. A process whose
runtime.trusted_keys lists the key's public half runs the module; with
trusted keys set, run, validate and deploy refuse a module that is unsigned,
changed after signing, or signed by another key. Sign the final build:
anything that rewrites the module afterwards (wasm-opt, strip) voids the
signature.`,
		examples: []string{"wasmstream plugin sign --key team.pem mask.wasm", "wasmstream plugin sign --key team.pem build/mask.wasm --out dist/mask.wasm"},
	},
	{
		name:    "plugin inspect",
		summary: "show a plugin's ABI version, memory, exports and imports",
		usage:   "wasmstream plugin inspect [-c pipeline.yaml | --max-module-size SIZE] FILE.wasm",
		details: `Reads the module and checks it as the host would, without running it: a
module over the size limit (runtime.max_module_size of -c, or
--max-module-size, default 64MiB) is refused before it is read, and one over
the module shape limits or the compile timeout is refused with the reason.`,
		examples: []string{"wasmstream plugin inspect bin/plugins/mask.wasm", "wasmstream plugin inspect -c pipeline.yaml upload.wasm"},
	},
	{name: "state", summary: "look at local state stores", usage: "wasmstream state dump -c pipeline.yaml --store NAME [flags]", hidden: true,
		examples: []string{"wasmstream state dump -c pipeline.yaml --store counts"}},
	{
		name:    "state dump",
		summary: "print a store's keys, values and checkpoint from the local state directory",
		usage:   "wasmstream state dump -c pipeline.yaml --store NAME [--partition N] [--processor P] [--format auto|text|hex] [--limit N]",
		details: `Reads the local state directory (state.dir/app_id) offline: no Kafka, no
writes. Stop the wasmstream that uses the directory first, or copy the
directory and pass --state-dir.`,
		examples: []string{
			"wasmstream state dump -c pipeline.yaml --store counts",
			"wasmstream state dump -c pipeline.yaml --store counts --partition 2 --format hex --limit 20",
		},
	},
	{name: "topic", summary: "put records into topics, read them out, list, create and describe topics",
		usage: "wasmstream topic produce|consume|list|create|describe [TOPIC] [-c pipeline.yaml | --brokers HOST:PORT] [flags]", hidden: true,
		details: strings.TrimSpace(topicConnection),
		examples: []string{
			"wasmstream topic create payments -c pipeline.yaml",
			"printf 'acct-1:1999\\nacct-2:250000\\n' | wasmstream topic produce payments -c pipeline.yaml -k :",
			"wasmstream topic consume payment-alerts -c pipeline.yaml --follow",
		}},
	{
		name:    "topic produce",
		summary: "write stdin's lines to a topic, partitioned by key as the host partitions",
		usage:   "wasmstream topic produce TOPIC [-c pipeline.yaml | --brokers HOST:PORT] [-k SEP] [--format text|json] [--partition N] [-H NAME=VALUE]",
		details: `Reads standard input and writes a record per line as it reads (empty lines
are skipped), then waits for every record to be acknowledged. In text, a
line is the value and the key is null, or with -k SEP (--key-sep) a line is
KEY SEP VALUE, split at the first SEP. In json, a line is an object:

  {"key": "acct-1", "value": "1999", "headers": {"source": "test"},
   "timestamp": 1700000000000, "partition": 0}

where each field may be left out (key and value: null; timestamp: now;
partition: by key), timestamp may also be RFC 3339 ("2025-01-02T15:04:05Z"),
headers may be a list of {"key", "value"} objects (order and repeated
names kept), and key_base64, value_base64 carry bytes that are not text.
Consume's --format json writes this shape, so its output can be produced
again (topic and offset are ignored).

A keyed record goes to the partition Kafka's default partitioner chooses,
murmur2 of the key, which is also how the host partitions what it writes
(repartition topics, outputs): the record reaches the task that owns its
key. kcat's default partitioner (librdkafka's consistent_random, CRC32)
puts keys elsewhere; with kcat, pass -X partitioner=murmur2_random.
` + topicConnection,
		examples: []string{
			"printf 'acct-1:1999\\nacct-2:250000\\n' | wasmstream topic produce payments -c pipeline.yaml -k :",
			"wasmstream topic produce lines --brokers 127.0.0.1:19092 < words.txt",
			"echo '{\"key\":\"s1\",\"value\":\"ok\",\"timestamp\":\"2025-01-02T15:04:05Z\"}' | wasmstream topic produce beats -c pipeline.yaml --format json",
		},
	},
	{
		name:    "topic consume",
		summary: "print a topic's records (committed ones, from a position or time)",
		usage:   "wasmstream topic consume TOPIC [-c pipeline.yaml | --brokers HOST:PORT] [--from WHERE] [--follow] [-n N] [--format text|json|TEMPLATE] [-p N,...]",
		details: `Prints each record, from --from to the end of each partition as it was when
the command started, or with --follow until Ctrl-C. Only committed records
are read (read_committed, as the host reads its inputs; --read-uncommitted
for all). --from is start (default), end, an offset, +N (N after the
start), -N (the last N offsets), or @TIME: the first record at or after
TIME, in ms since the epoch, RFC 3339, or a negative duration (@-10m).

--format text prints "PARTITION/OFFSET KEY VALUE {HEADER=VALUE, ...}", a null
key or value as (null) and anything that is not printable text Go-quoted;
json prints an object per line (topic, partition, offset, timestamp, key,
value, headers), which topic produce --format json reads back; a template
prints its verbs: %k key, %v value, %p partition, %o offset, %t topic, %h
headers, %d timestamp (ms), %T timestamp (RFC 3339), %% and \n, \t.
` + topicConnection,
		examples: []string{
			"wasmstream topic consume payment-alerts -c pipeline.yaml",
			"wasmstream topic consume word-counts -c pipeline.yaml --format '%k -> %v\\n'",
			"wasmstream topic consume greetings -c pipeline.yaml --from end --follow --format '%p %o %h %v\\n'",
			"wasmstream topic consume orders --brokers 127.0.0.1:19092 --from @-10m -n 5 --format json",
		},
	},
	{
		name:     "topic list",
		summary:  "list the cluster's topics with their partitions and replication factor",
		usage:    "wasmstream topic list [-c pipeline.yaml | --brokers HOST:PORT] [--internal]",
		details:  topicConnection,
		examples: []string{"wasmstream topic list -c pipeline.yaml", "wasmstream topic list --brokers 127.0.0.1:19092 --internal"},
	},
	{
		name:    "topic create",
		summary: "create a topic",
		usage:   "wasmstream topic create TOPIC [-c pipeline.yaml | --brokers HOST:PORT] [-p PARTITIONS] [-r REPLICAS] [--topic-config NAME=VALUE]",
		details: `Creates a topic with -p partitions (default kafka.topic_partitions: 3 unless
the config says otherwise, as the host creates topics) and the broker's
replication factor unless -r says otherwise. A topic that exists is an
error naming its partitions.
` + topicConnection,
		examples: []string{"wasmstream topic create payments -c pipeline.yaml -p 6", "wasmstream topic create customers --brokers 127.0.0.1:19092 --topic-config cleanup.policy=compact"},
	},
	{
		name:     "topic describe",
		summary:  "show a topic's partitions, offsets and configs",
		usage:    "wasmstream topic describe TOPIC [-c pipeline.yaml | --brokers HOST:PORT]",
		details:  "Shows each partition's leader, replicas, in-sync replicas, and start, end and\nlast stable offsets, and the configs set on the topic.\n" + topicConnection,
		examples: []string{"wasmstream topic describe payments -c pipeline.yaml"},
	},
	{
		name:    "deploy",
		summary: "publish a new plugin version; running processes switch at their next commit point",
		usage:   "wasmstream deploy -c pipeline.yaml PROCESSOR FILE.wasm [--label LABEL]",
		details: strings.TrimSpace(strings.TrimPrefix(deployUsage, strings.SplitN(deployUsage, "\n", 2)[0])),
		examples: []string{
			"wasmstream deploy -c pipeline.yaml mask-pii mask-v2.wasm",
			"wasmstream deploy -c pipeline.yaml mask-pii build/mask.wasm --label v2.1",
			"wasmstream deploy -c pipeline.yaml mask-pii mask-v3.wasm --shadow",
			"wasmstream deploy -c pipeline.yaml mask-pii mask-v3.wasm --shadow-first 10m --max-diff-ratio 0.001",
		},
	},
	{
		name:    "shadow",
		summary: "report or stop a shadow run (deploy --shadow)",
		usage:   "wasmstream shadow status|stop -c pipeline.yaml PROCESSOR [--samples N] [--json]",
		details: strings.TrimSpace(strings.TrimPrefix(shadowUsage, strings.SplitN(shadowUsage, "\n", 2)[0])),
		examples: []string{
			"wasmstream shadow status -c pipeline.yaml mask-pii",
			"wasmstream shadow stop -c pipeline.yaml mask-pii",
		},
	},
	{
		name:     "rollback",
		summary:  "make a processor's previous plugin version active again",
		usage:    "wasmstream rollback -c pipeline.yaml PROCESSOR",
		details:  strings.TrimSpace(strings.TrimPrefix(rollbackUsage, strings.SplitN(rollbackUsage, "\n", 2)[0])),
		examples: []string{"wasmstream rollback -c pipeline.yaml mask-pii"},
	},
	{
		name:    "query",
		summary: "read a key's committed value from the running processes' stores",
		usage:   "wasmstream query -c pipeline.yaml PROCESSOR STORE KEY [--format utf8|hex|base64] [--value-format F] [--partition P]",
		details: strings.TrimSpace(strings.TrimPrefix(queryUsage, strings.SplitN(queryUsage, "\n", 2)[0])),
		examples: []string{
			"wasmstream query -c pipeline.yaml wordcount counts hello --value-format hex",
			"wasmstream query -c pipeline.yaml profiles latest 0a1b2c --format hex",
		},
	},
	{
		name:     "pause",
		summary:  "stop a processor's processing in every running process, keeping its tasks, state and offsets",
		usage:    "wasmstream pause -c pipeline.yaml PROCESSOR",
		details:  strings.TrimSpace(strings.TrimPrefix(pauseUsage, strings.SplitN(pauseUsage, "\n", 2)[0])),
		examples: []string{"wasmstream pause -c pipeline.yaml mask-pii"},
	},
	{
		name:     "resume",
		summary:  "continue a paused processor where it stopped",
		usage:    "wasmstream resume -c pipeline.yaml PROCESSOR",
		details:  strings.TrimSpace(strings.TrimPrefix(resumeUsage, strings.SplitN(resumeUsage, "\n", 2)[0])),
		examples: []string{"wasmstream resume -c pipeline.yaml mask-pii"},
	},
	{
		name:    "replay",
		summary: "run a plugin version over a range of a processor's input, offline and deterministically",
		usage:   "wasmstream replay -c pipeline.yaml PROCESSOR [--plugin FILE] [--from N] [--to N] [--from-time T] [--to-time T] [--partitions 0,1] [--state empty|current] [--diff-against LABEL|FILE [--diff-samples N]] --out FILE|-",
		details: replayDetails,
		examples: []string{
			"wasmstream replay -c pipeline.yaml count --plugin count-v2.wasm --from 1000 --to 2000 --out v2.jsonl",
			"wasmstream replay -c pipeline.yaml count --partitions 0 --out -",
			"wasmstream replay -c pipeline.yaml count --plugin count-v2.wasm --diff-against config --out diff.json",
			"wasmstream replay -c pipeline.yaml count --state current --from-time 2026-01-02T15:00:00Z --out -",
		},
	},
	{
		name:    "reset",
		summary: "prepare a stopped app to process its input again: offsets to a target, state and changelogs wiped",
		usage:   "wasmstream reset -c pipeline.yaml --to-earliest|--to-latest|--to-time TIME|--to-offset N [--dry-run]",
		details: resetDetails,
		examples: []string{
			"wasmstream reset -c pipeline.yaml --to-earliest --dry-run",
			"wasmstream reset -c pipeline.yaml --to-time 2026-01-02T00:00:00Z",
		},
	},
	{
		name:    "demo",
		summary: "run a two-part demo on an embedded Kafka (no setup, no toolchain)",
		usage:   "wasmstream demo [--records N] [--verbose] [--port P] [--keep DIR]",
		details: `Part one masks PII in sample records with a stateless plugin; part two counts
words in a state store across a restart and a move to an empty state
directory. --keep DIR keeps the word count's config, plugin and state in DIR
to look at afterwards with wasmstream state dump.`,
		examples: []string{"wasmstream demo", "wasmstream demo --keep /tmp/wasmstream-demo && wasmstream state dump -c /tmp/wasmstream-demo/pipeline.yaml --store counts"},
	},
	{
		name:    "init",
		summary: "write a new processor project, its SDK vendored in (" + scaffold.Names() + ")",
		usage:   "wasmstream init NAME --lang " + langList("|") + " [--dir DIR] [--sdk DIR]\n  wasmstream init --update-sdk [--dir DIR] [--sdk DIR]",
		details: strings.TrimSpace(initUsage[strings.Index(initUsage, "\n\n"):]),
		examples: []string{
			"wasmstream init wordcount --lang rust",
			"wasmstream init alerts --lang go --dir ~/src/alerts",
			"wasmstream init velocity --lang ts",
			"cd ~/src/alerts && wasmstream init --update-sdk     # the SDK of this wasmstream",
		},
	},
	{
		name:     "version",
		summary:  "print the version, commit, Go, wazero and franz-go versions",
		usage:    "wasmstream version   (or wasmstream --version)",
		examples: []string{"wasmstream version", "wasmstream --version"},
	},
	{
		name:     "help",
		summary:  "show the help of wasmstream or of a command",
		usage:    "wasmstream help [COMMAND [SUBCOMMAND]]",
		examples: []string{"wasmstream help", "wasmstream help run", "wasmstream help state dump"},
	},
}

// topicConnection is how every topic command finds its brokers.
const topicConnection = `
The brokers: -c pipeline.yaml takes its kafka.brokers, with its kafka.tls and
kafka.sasl settings (and WASMSTREAM_KAFKA__* variables); --brokers HOST:PORT
overrides them. When kafka.brokers is empty the pipeline runs on the
embedded development broker inside its "wasmstream run", which writes the
broker's address to <state.dir>/<app_id>.embedded-broker while it runs:
-c finds it there, and says so when no such run is going on. Brokers that
do not answer are waited for up to kafka.connect_timeout, at most 10s.`

func docFor(name string) *cmdDoc {
	for i := range docs {
		if docs[i].name == name {
			return &docs[i]
		}
	}
	return nil
}

// topUsage is `wasmstream help`.
func topUsage() string {
	var b strings.Builder
	b.WriteString("wasmstream runs WebAssembly stream processors against Kafka.\n\nUsage:\n  wasmstream COMMAND [flags]\n\nCommands:\n")
	for _, d := range docs {
		if !d.hidden {
			fmt.Fprintf(&b, "  %-16s %s\n", d.name, d.summary)
		}
	}
	b.WriteString(`
Config is read from the file (-c), then WASMSTREAM_* environment variables
(WASMSTREAM_APP_ID, WASMSTREAM_KAFKA__BROKERS=host:port,...), then flags.

"wasmstream help COMMAND" or "wasmstream COMMAND --help" shows a command's
flags and examples; "wasmstream --version" the build.
`)
	return b.String()
}

// printHelp writes a command's help, with fs's flags when fs is not nil.
func printHelp(w io.Writer, d *cmdDoc, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "wasmstream %s: %s\n\nUsage:\n  %s\n", d.name, d.summary, d.usage)
	if d.hidden {
		fmt.Fprintf(w, "\nSubcommands:\n")
		for _, s := range docs {
			if strings.HasPrefix(s.name, d.name+" ") {
				fmt.Fprintf(w, "  %-16s %s\n", strings.TrimPrefix(s.name, d.name+" "), s.summary)
			}
		}
	}
	if d.details != "" {
		fmt.Fprintf(w, "\n%s\n", d.details)
	}
	if fs != nil && fs.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	}
	if len(d.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, ex := range d.examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
}

// wantsHelp reports whether args ask for help (-h or --help before "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

// flagSet makes a command's flag set whose -h/--help prints the command's
// help on stdout (the parse then returns pflag.ErrHelp: exit 0).
func (e *env) flagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { printHelp(e.stdout, docFor(name), fs) }
	return fs
}

// help runs `wasmstream help [COMMAND...]`: the command's own --help, so
// its flags are listed as its flag set has them.
func (e *env) help(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stdout, topUsage())
		return exitOK
	}
	if wantsHelp(args) && len(args) == 1 { // wasmstream help --help
		printHelp(e.stdout, docFor("help"), nil)
		return exitOK
	}
	name := strings.Join(args, " ")
	if docFor(name) == nil {
		fmt.Fprintf(e.stderr, "wasmstream help: no command %q\n\n%s", name, topUsage())
		return exitUsage
	}
	return doMainIO(ctx, append(append([]string{}, args...), "--help"), e.stdin, e.stdout, e.stderr, e.environ)
}
