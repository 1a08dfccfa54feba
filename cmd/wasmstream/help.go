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
	{name: "plugin", summary: "inspect plugin modules", usage: "wasmstream plugin inspect FILE.wasm", hidden: true,
		examples: []string{"wasmstream plugin inspect mask.wasm"}},
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
	{
		name:    "deploy",
		summary: "publish a new plugin version; running processes switch at their next commit point",
		usage:   "wasmstream deploy -c pipeline.yaml PROCESSOR FILE.wasm [--label LABEL]",
		details: strings.TrimSpace(strings.TrimPrefix(deployUsage, strings.SplitN(deployUsage, "\n", 2)[0])),
		examples: []string{
			"wasmstream deploy -c pipeline.yaml mask-pii mask-v2.wasm",
			"wasmstream deploy -c pipeline.yaml mask-pii build/mask.wasm --label v2.1",
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
	return doMain(ctx, append(append([]string{}, args...), "--help"), e.stdout, e.stderr, e.environ)
}
