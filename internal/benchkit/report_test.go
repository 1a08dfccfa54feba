package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/configload"
)

// config returns the configuration called name.
func config(t *testing.T, name string) Config {
	t.Helper()
	for _, c := range configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no configuration %q", name)
	return Config{}
}

func TestReport(t *testing.T) {
	ws, ksOff, ksOn, wsCommit := config(t, "wasmstream"), config(t, "ks-cache-off"), config(t, "ks-cache-on"), config(t, "wasmstream-general-commit")
	res := func(c Config, round int, wall, cpu, broker time.Duration, rss, outs int64) Result {
		return Result{Layout: LayoutKeyed, Guarantee: ExactlyOnce, Config: c, Round: round, Lines: 1000,
			Wall: wall, FirstCommit: time.Second, CPU: cpu, BrokerCPU: broker, PeakRSS: rss << 20, Outputs: outs}
	}
	results := []Result{
		res(ksOff, 1, 10*time.Second, 20*time.Second, 15*time.Second, 800, 8000),
		res(ws, 1, 4*time.Second, 5*time.Second, 4*time.Second, 200, 7000),
		res(ksOn, 1, 5*time.Second, 10*time.Second, 10*time.Second, 900, 500),
		res(ksOff, 2, 12*time.Second, 22*time.Second, 17*time.Second, 820, 8000),
		res(ws, 2, 6*time.Second, 7*time.Second, 6*time.Second, 220, 7000),
		res(ksOn, 2, 5*time.Second, 10*time.Second, 10*time.Second, 900, 500),
		res(wsCommit, 1, 4*time.Second, 5*time.Second, 4*time.Second, 250, 400),
		{Layout: LayoutAny, Guarantee: ExactlyOnce, Config: ws, Round: 1, Pending: "needs repartitioning (not yet)"},
		{Layout: LayoutAny, Guarantee: ExactlyOnce, Config: ksOff, Round: 1, Err: errors.New("not done within 10m")},
	}
	// A broker whose pid was unknown: its column says "-".
	bad := res(ksOn, 1, 5*time.Second, 10*time.Second, 0, 900, 500)
	bad.Layout, bad.Check = LayoutAny, errors.New("3 words with a wrong count")
	results = append(results, bad)

	var b strings.Builder
	// The configurations the results are of (the column widths follow
	// the names shown), in the order of configs.
	Report(&b, results, []Layout{LayoutKeyed, LayoutAny}, []string{ExactlyOnce}, []Config{ws, ksOff, ksOn, wsCommit})
	out := b.String()
	for _, want := range []string{
		"== layout keyed (each word in one partition), exactly_once ==",
		// Medians of two rounds: wall (10+12)/2 = 11 s, 1000/11 = 91 lines/s.
		"ks-cache-off               median    11.0           1.0       91   21.0          16.0           810     8000  2 runs",
		// wasmstream median wall 5 s: 200 lines/s; 200/91 = 2.20x; CPU 6/21;
		// broker CPU 5/16; RSS 210/810; outputs 7000/8000.
		"wasmstream / ks-cache-off                 2.20x    0.29x  0.31x         0.26x     0.88x    matched: both emit one record per update",
		"wasmstream / ks-cache-on                  1.00x    0.60x  0.50x         0.23x     14.00x   not matched: wasmstream emits one record per update, Kafka Streams' cache the latest per word per commit",
		// The emit-at-commit configuration is matched with the cache on:
		// 250/200 lines/s, CPU 5/10, broker CPU 4/10, RSS 250/900, outputs 400/500.
		"wasmstream-general-commit / ks-cache-off  2.75x    0.24x  0.25x         0.31x     0.05x    not matched: wasmstream-general-commit emits the latest per word per commit, Kafka Streams without cache one record per update",
		"wasmstream-general-commit / ks-cache-on   1.25x    0.50x  0.40x         0.28x     0.80x    matched: both emit the latest count per word per commit",
		"== layout any (any word on any partition), exactly_once ==",
		"wasmstream                     -       -             -        -      -             -             -        -      -  not run: needs repartitioning (not yet)",
		"ks-cache-on                    1     5.0           1.0      200   10.0             -           900      500   FAIL",
		"ERROR",
		"ks-cache-off round 1: not done within 10m",
		"FAIL",
		"ks-cache-on round 1: 3 words with a wrong count",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// No ratios where wasmstream did not run.
	if strings.Count(out, "ratios wasmstream") != 1 {
		t.Errorf("want ratios for the keyed layout only:\n%s", out)
	}
}

// On every layout no two Kafka Streams configurations run in a row, each
// runs next to a wasmstream one that emits alike, and every wasmstream
// configuration has a Kafka Streams one that emits alike (its matched
// ratio).
func TestConfigsAlternateAndPair(t *testing.T) {
	for _, l := range []Layout{LayoutKeyed, LayoutAny} {
		var run []Config
		for _, c := range configs {
			if c.Pending[l] == "" {
				run = append(run, c)
			}
		}
		for i, c := range run {
			if c.System != SystemKafkaStreams {
				continue
			}
			if i > 0 && run[i-1].System == SystemKafkaStreams {
				t.Errorf("layout %s: %s runs right after another Kafka Streams configuration", l, c.Name)
			}
			matched := (i > 0 && run[i-1].EmitsPerCommit == c.EmitsPerCommit) ||
				(i+1 < len(run) && run[i+1].EmitsPerCommit == c.EmitsPerCommit)
			if !matched {
				t.Errorf("layout %s: %s has no wasmstream configuration that emits alike next to it", l, c.Name)
			}
		}
	}
	for _, ws := range configs {
		if ws.System != SystemWasmstream {
			continue
		}
		matched := false
		for _, ks := range configs {
			matched = matched || (ks.System == SystemKafkaStreams && ks.EmitsPerCommit == ws.EmitsPerCommit)
		}
		if !matched {
			t.Errorf("%s has no Kafka Streams configuration that emits alike", ws.Name)
		}
	}
	if !config(t, "wasmstream-general-commit").EmitsPerCommit || config(t, "wasmstream-general").EmitsPerCommit {
		t.Error("wasmstream-general-commit must pair with ks-cache-on, wasmstream-general with ks-cache-off")
	}
}

func TestSelectConfigs(t *testing.T) {
	all, err := selectConfigs("all")
	if err != nil || len(all) != len(configs) {
		t.Fatalf("all: %v, %d configs", err, len(all))
	}
	// The order is configs' (alternating systems), not the list's.
	two, err := selectConfigs("ks-cache-on, wasmstream")
	if err != nil {
		t.Fatal(err)
	}
	if len(two) != 2 || two[0].Name != "wasmstream" || two[1].Name != "ks-cache-on" {
		t.Fatalf("got %+v", two)
	}
	if _, err := selectConfigs("wasmstream,flink"); err == nil || !strings.Contains(err.Error(), "flink") {
		t.Fatalf("err = %v, want one naming flink", err)
	}
	if got := guaranteeFor(SystemKafkaStreams, ExactlyOnce); got != "exactly_once_v2" {
		t.Fatalf("Kafka Streams exactly_once = %q", got)
	}
	if got := guaranteeFor(SystemWasmstream, ExactlyOnce); got != "exactly_once" {
		t.Fatalf("wasmstream exactly_once = %q", got)
	}
	if _, err := parseList("keyed,,sideways", "-layouts", ParseLayout); err == nil {
		t.Fatal("parseList accepted an unknown layout")
	}
}

// Every wasmstream configuration's template renders to a config that
// wasmstream loads, with what the harness meant: a template that drifts
// from host.Config fails here, not in the middle of a benchmark.
func TestPipelineTemplatesLoad(t *testing.T) {
	for _, c := range configs {
		if c.System != SystemWasmstream {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			v := PipelineVars{
				AppID: "bench-x", Brokers: "127.0.0.1:19192,127.0.0.1:19194", Guarantee: ExactlyOnce,
				CommitInterval: (100 * time.Millisecond).String(), Input: "in-x", Output: "out-x", Partitions: 4,
				Plugins: "/opt/plugins", StateDir: filepath.Join(dir, "state"), CacheDir: filepath.Join(dir, "cache"),
			}
			src, err := renderPipeline(filepath.Join("..", "..", "scripts", "bench"), c.Pipeline, v)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "pipeline.yaml")
			if err := os.WriteFile(path, src, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := configload.Load(path, nil, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if cfg.AppID != v.AppID || string(cfg.Guarantee) != v.Guarantee || cfg.Kafka.CommitInterval != 100*time.Millisecond ||
				strings.Join(cfg.Kafka.Brokers, ",") != v.Brokers || cfg.State.Dir != v.StateDir || cfg.Runtime.CacheDir != v.CacheDir {
				t.Fatalf("loaded %+v from\n%s", cfg, src)
			}
			var inputs []string
			for _, p := range cfg.Processors {
				inputs = append(inputs, p.Inputs...)
				if !strings.HasPrefix(p.Plugin, v.Plugins+"/") {
					t.Errorf("processor %s: plugin %s is not under %s", p.Name, p.Plugin, v.Plugins)
				}
				// The processors writing the harness's output (not a
				// re-keying one that writes a repartition topic).
				if f, _ := p.Config["value_format"].(string); len(p.Outputs) > 0 && f != "int64" {
					t.Errorf("processor %s: value_format %q, want int64 (the harness reads 8-byte counts)", p.Name, f)
				}
				// EmitsPerCommit decides the ratio pairs: it must say
				// what the template does.
				if e, _ := p.Config["emit"].(string); len(p.Outputs) > 0 && (e == "commit") != c.EmitsPerCommit {
					t.Errorf("processor %s: emit %q, but the configuration has EmitsPerCommit %v", p.Name, e, c.EmitsPerCommit)
				}
			}
			if !contains(inputs, v.Input) {
				t.Errorf("no processor reads %s: inputs %v", v.Input, inputs)
			}
			var outputs []string
			for _, p := range cfg.Processors {
				for _, o := range p.Outputs {
					outputs = append(outputs, o.Topic)
				}
			}
			if !contains(outputs, v.Output) {
				t.Errorf("no processor writes %s: outputs %v", v.Output, outputs)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestChildEnvDropsWasmstreamVariables(t *testing.T) {
	got := childEnv([]string{"PATH=/bin", "WASMSTREAM_KAFKA_PORT=19192", "HOME=/root", "WASMSTREAM_APP_ID=x"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/root" {
		t.Fatalf("childEnv = %q", got)
	}
}
