package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
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
	floor, floorCommit := config(t, "floor"), config(t, "floor-commit")
	res := func(c Config, round int, wall, cpu, broker time.Duration, rss, outs int64) Result {
		return Result{Layout: LayoutKeyed, Guarantee: ExactlyOnce, Config: c, Round: round, Lines: 1000,
			Wall: wall, FirstCommit: time.Second, FirstLines: 100, CPU: cpu, BrokerCPU: broker, PeakRSS: rss << 20, Outputs: outs}
	}
	// A live run: its input written during the run, done 1.5 s after the
	// last line.
	live := func(r Result, drain time.Duration) Result { r.Live, r.Drain = true, drain; return r }
	results := []Result{
		res(ksOff, 1, 10*time.Second, 20*time.Second, 15*time.Second, 800, 8000),
		res(ws, 1, 4*time.Second, 5*time.Second, 4*time.Second, 200, 7000),
		res(floor, 1, 2*time.Second, 2*time.Second, 2*time.Second, 50, 8000),
		res(ksOn, 1, 5*time.Second, 10*time.Second, 10*time.Second, 900, 500),
		res(ksOff, 2, 12*time.Second, 22*time.Second, 17*time.Second, 820, 8000),
		res(ws, 2, 6*time.Second, 7*time.Second, 6*time.Second, 220, 7000),
		res(floor, 2, 2*time.Second, 2*time.Second, 2*time.Second, 52, 8000),
		res(ksOn, 2, 5*time.Second, 10*time.Second, 10*time.Second, 900, 500),
		live(res(wsCommit, 1, 4*time.Second, 5*time.Second, 4*time.Second, 250, 400), 1500*time.Millisecond),
		res(floorCommit, 1, 1*time.Second, 1*time.Second, 1*time.Second, 40, 300),
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
	Report(&b, results, []Layout{LayoutKeyed, LayoutAny}, []string{ExactlyOnce}, []Config{ws, floor, ksOff, floorCommit, wsCommit, ksOn})
	out := b.String()
	for _, want := range []string{
		"== layout keyed (each word in one partition), exactly_once ==",
		// Medians of two rounds: wall (10+12)/2 = 11 s, 1000/11 = 91
		// lines/s; steady: the 900 lines after the first commit (1 s,
		// 100 lines) in 10 s; CPU 21 s over 1000 lines, 10.5x the
		// floor's 2 s; with the broker's (21+16)/(2+2) = 9.25x.
		"ks-cache-off               median    11.0           1.0       91              90   21.0      21000.0   10.50x          16.0            9.25x           810        -     8000  2 runs",
		// The floor's own median is 1x itself.
		"floor                      median     2.0           1.0      500             900    2.0       2000.0    1.00x           2.0            1.00x            51        -     8000  2 runs",
		// Each run against the median floor: 5/2 and (5+4)/(2+2).
		"wasmstream                      1     4.0           1.0      250             300    5.0       5000.0    2.50x           4.0            2.25x           200        -     7000    PASS",
		// Emitting per commit: against floor-commit (1 s, 1 s). The
		// live run's drain, and no steady rate: its pace is its input's.
		"ks-cache-on                median     5.0           1.0      200             225   10.0      10000.0   10.00x          10.0           10.00x           900        -      500  2 runs",
		"wasmstream-general-commit       1     4.0           1.0      250               -    5.0       5000.0    5.00x           4.0            4.50x           250      1.5      400    PASS",
		"x floor: CPU per line over floor's (2000.0 µs/line, 4000.0 with the broker's), the I/O floor of the configurations that emit one output per update",
		"x floor: CPU per line over floor-commit's (1000.0 µs/line, 2000.0 with the broker's), the I/O floor of the configurations that emit the latest per word per commit",
		// wasmstream median wall 5 s: 200 lines/s; 200/91 = 2.20x; steady
		// 900/4 s over 900/10 s = 2.50x; CPU 6/21; broker CPU 5/16; RSS
		// 210/810; outputs 7000/8000.
		"wasmstream / ks-cache-off                 2.20x    2.50x   0.29x  0.31x         0.26x     0.88x    matched: both emit one record per update",
		"wasmstream / ks-cache-on                  1.00x    1.00x   0.60x  0.50x         0.23x     14.00x   not matched: wasmstream emits one record per update, Kafka Streams' cache the latest per word per commit",
		// The emit-at-commit configuration is matched with the cache on:
		// 250/200 lines/s, CPU 5/10, broker CPU 4/10, RSS 250/900, outputs 400/500.
		"wasmstream-general-commit / ks-cache-off  2.75x    -       0.24x  0.25x         0.31x     0.05x    not matched: wasmstream-general-commit emits the latest per word per commit, Kafka Streams without cache one record per update",
		"wasmstream-general-commit / ks-cache-on   1.25x    -       0.50x  0.40x         0.28x     0.80x    matched: both emit the latest count per word per commit",
		"== layout any (any word on any partition), exactly_once ==",
		// No floor measured on this layout: no "x floor".
		"wasmstream                     -       -             -        -               -      -            -        -             -                -             -        -        -      -  not run: needs repartitioning (not yet)",
		"ks-cache-on                    1     5.0           1.0      200             225   10.0      10000.0        -             -                -           900        -      500   FAIL",
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
	// The floors are not paired with Kafka Streams.
	if strings.Contains(out, "floor / ks-") || strings.Contains(out, "floor-commit / ks-") {
		t.Errorf("a floor in the wasmstream / Kafka Streams ratios:\n%s", out)
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
			alike := func(j int) bool {
				return j >= 0 && j < len(run) && run[j].System == SystemWasmstream && run[j].EmitsPerCommit == c.EmitsPerCommit
			}
			matched := alike(i-1) || alike(i+1)
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
		floored := false
		for _, f := range configs {
			floored = floored || (f.System == SystemFloor && f.EmitsPerCommit == ws.EmitsPerCommit)
		}
		if !floored {
			t.Errorf("%s has no floor that emits alike", ws.Name)
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
// from host.Config fails here, not in the middle of a benchmark. A
// configuration that needs a config feature this host may not have yet
// (Requires) must load, or be refused at that feature's path only (what
// the harness's gate looks for); without those fields it must load.
func TestPipelineTemplatesLoad(t *testing.T) {
	for _, c := range configs {
		if c.System != SystemWasmstream {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Brokers: []string{"127.0.0.1:19192", "127.0.0.1:19194"}, CommitInterval: 100 * time.Millisecond,
				Spec: InputSpec{Partitions: 4}, Plugins: "/opt/plugins", Work: dir}
			load := func(c Config) (PipelineVars, *host.Config, []byte, error) {
				v := o.pipelineVars(c, "bench-x", "in-x", "out-x", ExactlyOnce, dir)
				src, err := renderPipeline(filepath.Join("..", "..", "scripts", "bench"), c.Pipeline, v)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, "pipeline.yaml")
				if err := os.WriteFile(path, src, 0o644); err != nil {
					t.Fatal(err)
				}
				cfg, err := configload.Load(path, nil, nil)
				return v, cfg, src, err
			}
			v, cfg, src, err := load(c)
			if err != nil && len(c.Requires) > 0 {
				if refusedFeature(c, err.Error()) == "" {
					t.Fatalf("refused, but not at the path of a feature it requires (%+v): %v\n%s", c.Requires, err, src)
				}
				// The rest of the template, without the features.
				stripped := c
				stripped.OutputEmit, stripped.StoreCache = "", ""
				v, cfg, src, err = load(stripped)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if cfg.AppID != v.AppID || string(cfg.Guarantee) != v.Guarantee || cfg.Kafka.CommitInterval != 100*time.Millisecond ||
				strings.Join(cfg.Kafka.Brokers, ",") != v.Brokers || cfg.State.Dir != v.StateDir || cfg.Runtime.CacheDir != v.CacheDir {
				t.Fatalf("loaded %+v from\n%s", cfg, src)
			}
			wantDir := "/opt/plugins"
			if c.Lang != "go" {
				wantDir += "/" + c.Lang
			}
			// EmitsPerCommit decides the ratio pairs and the floor: it
			// must say what the configuration does.
			if perCommit := c.Emit == "commit" || c.OutputEmit == "latest_per_key"; perCommit != c.EmitsPerCommit {
				t.Errorf("emit %q, output emit %q, but EmitsPerCommit %v", c.Emit, c.OutputEmit, c.EmitsPerCommit)
			}
			var inputs []string
			for _, p := range cfg.Processors {
				inputs = append(inputs, p.Inputs...)
				if filepath.Dir(p.Plugin) != wantDir {
					t.Errorf("processor %s: plugin %s is not in %s (language %s)", p.Name, p.Plugin, wantDir, c.Lang)
				}
				// The processors writing the harness's output (not a
				// re-keying one that writes a repartition topic).
				if f, _ := p.Config["value_format"].(string); len(p.Outputs) > 0 && f != "int64" {
					t.Errorf("processor %s: value_format %q, want int64 (the harness reads 8-byte counts)", p.Name, f)
				}
				if e, _ := p.Config["emit"].(string); len(p.Outputs) > 0 && e != c.Emit {
					t.Errorf("processor %s: emit %q, but the configuration's Emit is %q", p.Name, e, c.Emit)
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

func TestBusyWarning(t *testing.T) {
	if w := busyWarning(2, "0.50 0.40 0.30", "1.99 1.00 0.50"); w != "" {
		t.Fatalf("quiet machine: %q", w)
	}
	if w := busyWarning(2, "0.50 0.40 0.30", "7.21 3.00 1.00"); !strings.Contains(w, "above the 2 CPUs") {
		t.Fatalf("busy at the end: %q", w)
	}
	if w := busyWarning(2, "unknown", ""); w != "" {
		t.Fatalf("unknown load: %q", w)
	}
}

// TestBaseline: -baseline runs each wasmstream configuration twice per
// round, next to each other and in alternating order, and the table
// gives the ratios of the pair: of the medians and round by round.
func TestBaseline(t *testing.T) {
	ws, ksOn := config(t, "wasmstream-general-commit"), config(t, "ks-cache-on")
	cfgs := withBaseline([]Config{ksOn, ws}, "/opt/old/wasmstream")
	if len(cfgs) != 3 || cfgs[2].Name != "wasmstream-general-commit-baseline" || cfgs[2].BaselineOf != ws.Name ||
		cfgs[2].Binary != "/opt/old/wasmstream" || cfgs[1].Binary != "" {
		t.Fatalf("withBaseline: %+v", cfgs)
	}
	names := func(cs []Config) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name)
		}
		return strings.Join(n, " ")
	}
	if got, want := names(roundOrder(cfgs, 1)), "ks-cache-on wasmstream-general-commit wasmstream-general-commit-baseline"; got != want {
		t.Errorf("round 1 runs %s, want %s", got, want)
	}
	if got, want := names(roundOrder(cfgs, 2)), "ks-cache-on wasmstream-general-commit-baseline wasmstream-general-commit"; got != want {
		t.Errorf("round 2 runs %s, want %s", got, want)
	}
	o := Options{Wasmstream: "/repo/bin/wasmstream"}
	if o.binary(cfgs[1]) != "/repo/bin/wasmstream" || o.binary(cfgs[2]) != "/opt/old/wasmstream" {
		t.Errorf("binaries: %s and %s", o.binary(cfgs[1]), o.binary(cfgs[2]))
	}

	res := func(c Config, round int, wall time.Duration) Result {
		return Result{Layout: LayoutAny, Guarantee: ExactlyOnce, Config: c, Round: round, Lines: 1000,
			Wall: wall, FirstCommit: time.Second, FirstLines: 100, CPU: time.Second, BrokerCPU: time.Second, PeakRSS: 100 << 20, Outputs: 10}
	}
	var results []Result
	for round, walls := range [][3]time.Duration{{10 * time.Second, 2 * time.Second, 4 * time.Second}, {10 * time.Second, 4 * time.Second, 5 * time.Second}} {
		for i, c := range cfgs {
			results = append(results, res(c, round+1, walls[i]))
		}
	}
	var b strings.Builder
	Report(&b, results, []Layout{LayoutAny}, []string{ExactlyOnce}, cfgs)
	out := b.String()
	if h := Header(Options{Wasmstream: "/repo/bin/wasmstream", Configs: cfgs}, nil); !strings.Contains(h, "wasmstream: /repo/bin/wasmstream; the configurations named NAME-baseline run /opt/old/wasmstream") {
		t.Errorf("the header does not name both binaries:\n%s", h)
	}
	// Medians: 3 s against 4.5 s of wall, 1.50x; round by round 4/2 and 5/4.
	for _, want := range []string{
		"ratios of this binary to the baseline's",
		"wasmstream-general-commit / wasmstream-general-commit-baseline  1.50x",
		"2.00x 1.25x",
		"wasmstream-general-commit-baseline / ks-cache-on",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
