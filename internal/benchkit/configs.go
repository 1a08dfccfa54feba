package main

import (
	"fmt"
	"slices"
	"strings"
)

// System is the stream processor a configuration runs.
type System string

const (
	SystemKafkaStreams System = "kafka-streams"
	SystemWasmstream   System = "wasmstream"
	// SystemFloor is the I/O floor (floor.go): the same topology and
	// transactions as a plain franz-go loop, no Wasm, no state store.
	SystemFloor System = "floor"
)

// Config is one benchmarked configuration. Each runs once per layout,
// guarantee and round; the commit interval is the same for all.
type Config struct {
	Name   string
	System System

	// CacheBytes (Kafka Streams) is statestore.cache.max.bytes: "0" turns
	// the record cache off (one output per update), "default" leaves
	// Kafka Streams' default (10 MiB: the latest value per word, emitted
	// at each commit or when the cache evicts).
	CacheBytes string

	// Pipeline (wasmstream) is the pipeline config template, a file in the
	// templates directory (scripts/bench), rendered with PipelineVars.
	Pipeline string
	// Lang (wasmstream) is the language of the plugins: "go" runs those
	// of the plugins directory (make plugins), any other those of its
	// subdirectory of that name (make rust-plugins: rust, make c-plugins:
	// c). A TypeScript configuration is one more line below with its
	// language's directory, once its split and wordcount build there.
	Lang string
	// Emit (wasmstream) is wordcount's own "emit" config: "" one record
	// per update, "commit" the latest count per word per commit window
	// through commit marks (ABI.md 8.2; the Go, Rust and C plugins).
	Emit string
	// OutputEmit (wasmstream) is the output option "emit" of the counts
	// output: "" none, "latest_per_key" (the host keeps the last emit per
	// key of a commit window and produces those at the commit point).
	OutputEmit string
	// StoreCache (wasmstream) is wordcount's record cache,
	// processors[].state_cache ("" the default, 16MiB; e.g. "10MiB",
	// Kafka Streams' default size).
	StoreCache string
	// Requires (wasmstream) are config features the pipeline uses that a
	// wasmstream binary may not have yet. A binary that refuses the config
	// at one of their paths does not run the configuration: its rows say
	// why (Bench.WarmWasmstream), and no figure stands in for it.
	Requires []Feature

	// FloorEmit (floor) is the floor's output mode.
	FloorEmit FloorEmit

	// EmitsPerCommit: the configuration writes the latest count per word
	// per commit rather than one record per update. Ratios pair a
	// configuration with Kafka Streams' cache on and with floor-commit
	// when it does, with cache off and floor when it does not, and note
	// the difference for the other Kafka Streams pair.
	EmitsPerCommit bool

	// Pending names the layouts this configuration cannot count correctly
	// yet, with the reason; their rows say so instead of running.
	Pending map[Layout]string

	// Binary (wasmstream) is the binary that runs the configuration: ""
	// the session's (-wasmstream). BaselineOf names the configuration this
	// one repeats with the baseline binary (-baseline, withBaseline).
	Binary     string
	BaselineOf string
}

// baselineSuffix ends the name of a configuration run by the baseline
// binary: wasmstream-general-commit-baseline (names are part of topic
// names, which take no '@').
const baselineSuffix = "-baseline"

// withBaseline returns cfgs with each wasmstream configuration followed by
// its copy run by the binary bin: an A/B of two builds of wasmstream on
// the same broker, input and plugins, the pair next to each other in every
// round (roundOrder alternates which goes first). Separate sessions each
// start a broker of their own, and a fresh broker's JIT and caches made
// the same binary's figures of two sessions differ by up to 1.7x.
func withBaseline(cfgs []Config, bin string) []Config {
	var out []Config
	for _, c := range cfgs {
		out = append(out, c)
		if c.System == SystemWasmstream {
			b := c
			b.Name, b.Binary, b.BaselineOf = c.Name+baselineSuffix, bin, c.Name
			out = append(out, b)
		}
	}
	return out
}

// roundOrder is the order of cfgs in round (from 1): as given in odd
// rounds; in even ones each configuration and its baseline copy swap, so
// neither of a pair always runs first (after the other's broker work).
func roundOrder(cfgs []Config, round int) []Config {
	out := slices.Clone(cfgs)
	if round%2 == 1 {
		return out
	}
	for i := 0; i+1 < len(out); i++ {
		if out[i+1].BaselineOf != "" && out[i+1].BaselineOf == out[i].Name {
			out[i], out[i+1] = out[i+1], out[i]
			i++
		}
	}
	return out
}

// Feature is a part of wasmstream's config that a configuration needs.
type Feature struct {
	What string // what it is, for the row that cannot run
	// Path is where in the config a binary without the feature refuses
	// it: its error names this path (host.ConfigError's Path, e.g.
	// "processors[1].outputs[counts]").
	Path string
}

// Features the host may lack (an older build under test); the configurations that
// use them run once `wasmstream validate` accepts their config.
var (
	featureLatestPerKey = Feature{What: "the output option emit: latest_per_key", Path: "processors[1].outputs[counts]"}
	featureStoreCache   = Feature{What: "the record cache size, state_cache", Path: "processors[1].state_cache"}
)

// generalTemplate is the general word count (split -> repartition topic
// -> wordcount) in every language and emit mode.
const generalTemplate = "wasmstream-wordcount-general.yaml"

// configs are the configurations, in the order each round runs them: no
// two Kafka Streams ones in a row and each next to a wasmstream one that
// emits alike (its matched pair), on both layouts (on the any layout
// "wasmstream" does not run), so a slow minute of the shared machine does
// not fall on one system only. With more wasmstream configurations than
// Kafka Streams ones not every wasmstream one can have a Kafka Streams
// neighbour; those of one emit mode run together, around their pair, with
// the floor of that mode before them.
//
// "wasmstream" counts where the lines arrive (one processor), right on the
// keyed layout only; "wasmstream-general" is the general word count,
// plugins/split re-keying by word through a repartition topic and
// plugins/wordcount counting, right on both layouts, one output per
// update; "-rust" and "-c" are the same with both plugins in that
// language (plugins/rust, plugins/c: smaller, faster guests than Go's
// wasip1 port); "-commit" is the same with wordcount's emit: commit, the
// latest count per word per commit, as Kafka Streams' record cache emits
// ("-rust-commit" and "-c-commit" in those languages); "-latest" is
// wordcount emitting per update with the output's emit: latest_per_key,
// the host keeping the latest per word per commit; "-latest-cache" sizes
// wordcount's record cache as Kafka Streams' default (10MiB; every other
// configuration has the host's default, 16MiB). "floor" and
// "floor-commit" are the I/O floors of the two emit modes (floor.go).
var configs = []Config{
	{Name: "wasmstream", System: SystemWasmstream, Pipeline: "wasmstream-wordcount.yaml", Lang: "go",
		Pending: map[Layout]string{LayoutAny: "counts where lines arrive: needs the keyed layout (wasmstream-general repartitions)"}},
	{Name: "floor", System: SystemFloor, FloorEmit: FloorPerUpdate},
	{Name: "ks-cache-off", System: SystemKafkaStreams, CacheBytes: "0"},
	{Name: "wasmstream-general", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "go"},
	{Name: "wasmstream-general-rust", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "rust"},
	{Name: "wasmstream-general-c", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "c"},
	{Name: "floor-commit", System: SystemFloor, FloorEmit: FloorPerCommit, EmitsPerCommit: true},
	{Name: "wasmstream-general-commit", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "go", Emit: "commit",
		EmitsPerCommit: true},
	{Name: "ks-cache-on", System: SystemKafkaStreams, CacheBytes: "default", EmitsPerCommit: true},
	{Name: "wasmstream-general-rust-commit", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "rust", Emit: "commit",
		EmitsPerCommit: true},
	{Name: "wasmstream-general-c-commit", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "c", Emit: "commit",
		EmitsPerCommit: true},
	{Name: "wasmstream-general-latest", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "go",
		OutputEmit: "latest_per_key", Requires: []Feature{featureLatestPerKey}, EmitsPerCommit: true},
	{Name: "wasmstream-general-rust-latest", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "rust",
		OutputEmit: "latest_per_key", Requires: []Feature{featureLatestPerKey}, EmitsPerCommit: true},
	{Name: "wasmstream-general-rust-latest-cache", System: SystemWasmstream, Pipeline: generalTemplate, Lang: "rust",
		OutputEmit: "latest_per_key", StoreCache: "10MiB", Requires: []Feature{featureLatestPerKey, featureStoreCache}, EmitsPerCommit: true},
}

// Guarantees, by the harness's names; each system has its own spelling.
const (
	AtLeastOnce = "at_least_once"
	ExactlyOnce = "exactly_once"
)

// guaranteeFor returns sys's name for guarantee g.
func guaranteeFor(sys System, g string) string {
	if sys == SystemKafkaStreams && g == ExactlyOnce {
		return "exactly_once_v2"
	}
	return g
}

// selectConfigs returns the configurations named in a comma-separated
// list, in the order of configs; "all" or "" selects every one.
func selectConfigs(list string) ([]Config, error) {
	if list == "" || list == "all" {
		return configs, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []Config
	for _, c := range configs {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	if len(want) > 0 {
		var names, unknown []string
		for _, c := range configs {
			names = append(names, c.Name)
		}
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown configuration(s) %s; known: %s", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

// parseList splits a comma-separated list and checks each item with ok.
func parseList[T any](list, what string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	seen := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		v, err := parse(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", what)
	}
	return out, nil
}

func parseGuarantee(s string) (string, error) {
	switch s {
	case AtLeastOnce, ExactlyOnce:
		return s, nil
	}
	return "", fmt.Errorf("unknown guarantee %q (want %s or %s)", s, AtLeastOnce, ExactlyOnce)
}
