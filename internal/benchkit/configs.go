package main

import (
	"fmt"
	"strings"
)

// System is the stream processor a configuration runs.
type System string

const (
	SystemKafkaStreams System = "kafka-streams"
	SystemWasmstream   System = "wasmstream"
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

	// EmitsPerCommit: the configuration writes the latest count per word
	// per commit rather than one record per update. Ratios pair a
	// configuration with Kafka Streams' cache on when it does, with cache
	// off when it does not, and note the difference for the other pair.
	EmitsPerCommit bool

	// Pending names the layouts this configuration cannot count correctly
	// yet, with the reason; their rows say so instead of running.
	Pending map[Layout]string
}

// configs are the configurations, in the order each round runs them: no
// two Kafka Streams ones in a row and each next to a wasmstream one that
// emits alike (its matched pair), on both layouts (on the any layout
// "wasmstream" does not run), so a slow minute of the shared machine does
// not fall on one system only. With five wasmstream configurations and two
// Kafka Streams ones not every wasmstream one can have a Kafka Streams
// neighbour; those of one emit mode run together, around their pair.
//
// "wasmstream" counts where the lines arrive (one processor), right on the
// keyed layout only; "wasmstream-general" is the general word count,
// plugins/split re-keying by word through a repartition topic and
// plugins/wordcount counting, right on both layouts, one output per
// update; "wasmstream-general-rust" is the same with both plugins in Rust
// (plugins/rust: a faster guest than Go's wasip1 port); "wasmstream-general-commit"
// is the same as wasmstream-general with wordcount's emit: commit, the
// latest count per word per commit, as Kafka Streams' record cache emits;
// "wasmstream-general-rust-commit" is that with the Rust plugins.
var configs = []Config{
	{Name: "wasmstream", System: SystemWasmstream, Pipeline: "wasmstream-wordcount.yaml",
		Pending: map[Layout]string{LayoutAny: "counts where lines arrive: needs the keyed layout (wasmstream-general repartitions)"}},
	{Name: "ks-cache-off", System: SystemKafkaStreams, CacheBytes: "0"},
	{Name: "wasmstream-general", System: SystemWasmstream, Pipeline: "wasmstream-wordcount-general.yaml"},
	{Name: "wasmstream-general-rust", System: SystemWasmstream, Pipeline: "wasmstream-wordcount-general-rust.yaml"},
	{Name: "ks-cache-on", System: SystemKafkaStreams, CacheBytes: "default", EmitsPerCommit: true},
	{Name: "wasmstream-general-commit", System: SystemWasmstream, Pipeline: "wasmstream-wordcount-general-commit.yaml",
		EmitsPerCommit: true},
	{Name: "wasmstream-general-rust-commit", System: SystemWasmstream, Pipeline: "wasmstream-wordcount-general-rust-commit.yaml",
		EmitsPerCommit: true},
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
