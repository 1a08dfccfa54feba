package configload

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodConfig = `
app_id: orders
kafka:
  brokers: [127.0.0.1:9092]
  commit_interval: 250ms
processors:
  - name: nl-only
    plugin: plugins/filter.wasm
    inputs: [orders]
    outputs: {out: orders-nl}
    config: {field: country, op: eq, value: NL}
    limits: {memory: 32MiB, record_timeout: 500ms}
`

func TestLoadMergesFileEnvFlags(t *testing.T) {
	path := writeConfig(t, goodConfig)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse([]string{"--state-dir", "/tmp/st"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"WASMSTREAM_APP_ID=from-env", "WASMSTREAM_KAFKA__BROKERS=a:1,b:2", "HOME=/root"}
	cfg, err := Load(path, env, fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AppID != "from-env" {
		t.Errorf("app_id = %q, env should win over the file", cfg.AppID)
	}
	if strings.Join(cfg.Kafka.Brokers, ",") != "a:1,b:2" {
		t.Errorf("brokers = %v", cfg.Kafka.Brokers)
	}
	if cfg.State.Dir != "/tmp/st" {
		t.Errorf("state.dir = %q, flag should win", cfg.State.Dir)
	}
	if cfg.Kafka.CommitInterval != 250*time.Millisecond {
		t.Errorf("commit_interval = %v", cfg.Kafka.CommitInterval)
	}
	p := cfg.Processors[0]
	if p.Limits.Memory != 32<<20 || p.Limits.RecordTimeout != 500*time.Millisecond {
		t.Errorf("limits = %+v", p.Limits)
	}
	if !filepath.IsAbs(p.Plugin) || filepath.Dir(p.Plugin) != filepath.Join(filepath.Dir(path), "plugins") {
		t.Errorf("plugin path %q not resolved against the config dir", p.Plugin)
	}
	if p.OnError != host.OnErrorFail || cfg.Kafka.CommitRecords != host.DefaultCommitRecords {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if p.Config["value"] != "NL" {
		t.Errorf("plugin config = %v", p.Config)
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"missing app_id", strings.Replace(goodConfig, "app_id: orders", "", 1), "app_id: required"},
		{"misspelled field", strings.Replace(goodConfig, "commit_interval", "commit_intervall", 1), "commit_intervall: unknown field"},
		{"bad duration", strings.Replace(goodConfig, "250ms", "soon", 1), "commit_interval"},
		{"bad size", strings.Replace(goodConfig, "32MiB", "32 parsecs", 1), "memory"},
		{"tiny memory", strings.Replace(goodConfig, "32MiB", "1KiB", 1), "processors[0].limits.memory"},
		{"no inputs", strings.Replace(goodConfig, "inputs: [orders]", "inputs: []", 1), "processors[0].inputs: at least one"},
		{"bad policy", strings.Replace(goodConfig, "limits:", "on_error: retry\n    limits:", 1), "processors[0].on_error"},
		{"bad broker", strings.Replace(goodConfig, "127.0.0.1:9092", "localhost", 1), "kafka.brokers[0]"},
		{"bad members", strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  members: one", 1), "kafka.members: \"one\" must be per_processor or shared"},
		{"tiny fetch", strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  fetch_max_partition_bytes: 1KiB", 1), "kafka.fetch_max_partition_bytes: 1KiB is outside 4KiB..256MiB"},
		{"fetch below partition", strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  fetch_max_partition_bytes: 8MiB\n  fetch_max_bytes: 1MiB", 1), "kafka.fetch_max_bytes: 1MiB is below kafka.fetch_max_partition_bytes (8MiB)"},
		{"expire unknown store", strings.Replace(goodConfig, "limits:", "expire: {nope: {after: 1h}}\n    limits:", 1), "processors[0].expire.nope: \"nope\" is not one of the processor's stores"},
		{"reserved store name", strings.Replace(goodConfig, "limits:", "stores: [_x]\n    limits:", 1), "store names starting with _ are the host's"},
		{"debug without admin", "admin: {debug: true}\n" + goodConfig, "admin.debug: the debug endpoints are served on the admin endpoint: set admin.listen too"},
		{"bad emit", strings.Replace(goodConfig, "outputs: {out: orders-nl}", "outputs: {out: {topic: orders-nl, emit: sometimes}}", 1), "processors[0].outputs.out.emit: \"sometimes\" must be each or latest_per_key"},
		{"bad guarantee", goodConfig + "guarantee: twice\n", "guarantee: \"twice\" must be exactly_once or at_least_once"},
		{"bad start offset", strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  start_offset: middle", 1), "kafka.start_offset: \"middle\" must be earliest or latest"},
		{"bad group protocol", strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  group_protocol: 848", 1), "kafka.group_protocol: \"848\" must be auto, consumer or classic"},
		{"bad log level", goodConfig + "log: {level: loud}\n", "log.level: \"loud\" must be debug, info, warn or error"},
		{"bad log format", goodConfig + "log: {format: xml}\n", "log.format: \"xml\" must be text or json"},
		{"bad clock", strings.Replace(goodConfig, "limits:", "stores: [s]\n    expire: {s: {after: 1h, clock: sundial}}\n    limits:", 1), "processors[0].expire.s.clock: \"sundial\" must be event or wall"},
		{"unitless canary window", goodConfig + "swap: {canary_window: 30}\n", "swap.canary_window: 30 has no unit"},
		{"bad ratio", goodConfig + "swap: {max_failure_ratio: lots}\n", "swap.max_failure_ratio: \"lots\" is not a number"},
		{"output without topic", strings.Replace(goodConfig, "outputs: {out: orders-nl}", "outputs: {out: {emit: latest_per_key}}", 1), "processors[0].outputs.out: \"\" is not a valid topic name"},
		{"bad state cache", strings.Replace(goodConfig, "limits:", "state_cache: lots\n    limits:", 1), "or off"},
		{"no processors", "app_id: x\n", "processors: at least one"},
		{"not yaml", "app_id: [", "config file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// An output is its topic, or a topic with an emit mode, from the file and
// from the environment.
func TestLoadOutputForms(t *testing.T) {
	body := strings.Replace(goodConfig, "outputs: {out: orders-nl}", "outputs: {out: orders-nl, counts: {topic: word-counts, emit: latest_per_key}}", 1)
	env := []string{"WASMSTREAM_PROCESSORS__0__OUTPUTS__SIDE=side-topic"}
	cfg, err := Load(writeConfig(t, body), env, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Processors[0].Outputs
	want := map[string]host.OutputConfig{
		"out":    {Topic: "orders-nl", Emit: host.EmitEach},
		"counts": {Topic: "word-counts", Emit: host.EmitLatestPerKey},
		"side":   {Topic: "side-topic", Emit: host.EmitEach},
	}
	for name, w := range want {
		if g := got[name]; g != w {
			t.Errorf("outputs.%s = %+v, want %+v", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("outputs = %+v", got)
	}
}

func TestLoadStateCache(t *testing.T) {
	for value, want := range map[string]int{"": 16 << 20, "state_cache: off": 0, "state_cache: 8MiB": 8 << 20, "state_cache: 0": 0} {
		cfg, err := Load(writeConfig(t, strings.Replace(goodConfig, "limits:", value+"\n    limits:", 1)), nil, nil)
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if got := cfg.Processors[0].StateCache.Bytes(16 << 20); got != want {
			t.Errorf("%q: %d bytes, want %d", value, got, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("error = %v", err)
	}
}

// A duration or size written as 0 is an error naming the field, not a
// silent default, and a duration without a unit is not nanoseconds (once,
// "memory: 0 and record_timeout: 0 are silently replaced by defaults;
// record_timeout: 5 passes as 5 ns"). canary_window: 0s keeps its meaning
// (TestLoadZeroesThatMeanSomething).
func TestLoadRefusesZeroAndUnitlessQuantities(t *testing.T) {
	base := `
app_id: orders
kafka:
  brokers: [127.0.0.1:9092]
processors:
  - name: a
    plugin: a.wasm
    inputs: [in]
`
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       []string // substrings of the error, each naming its field
	}{
		{"zero memory", base + "    limits: {memory: 0}\n", nil, []string{"processors[0].limits.memory: 0 is not allowed"}},
		{"zero memory with unit", base + "    limits: {memory: 0MiB}\n", nil, []string{"processors[0].limits.memory: 0 is not allowed"}},
		{"zero timeout", base + "    limits: {record_timeout: 0}\n", nil, []string{"processors[0].limits.record_timeout: 0 has no unit"}},
		{"zero timeout with unit", base + "    limits: {record_timeout: 0s}\n", nil, []string{"processors[0].limits.record_timeout: 0 is not allowed"}},
		{"unitless timeout", base + "    limits: {record_timeout: 5}\n", nil, []string{"processors[0].limits.record_timeout: 5 has no unit"}},
		{"unitless float", base + "  - name: b\n    plugin: b.wasm\n    inputs: [in2]\n    limits: {record_timeout: 1.5}\n", nil,
			[]string{"processors[1].limits.record_timeout: 1.5 has no unit"}},
		{"zero commit interval", base, []string{"WASMSTREAM_KAFKA__COMMIT_INTERVAL=0s"}, []string{"kafka.commit_interval: 0 is not allowed"}},
		{"unitless env", base, []string{"WASMSTREAM_KAFKA__SESSION_TIMEOUT=30"}, []string{"kafka.session_timeout", "missing unit"}},
		{"zero module size", base + "runtime: {max_module_size: 0}\n", nil, []string{"runtime.max_module_size: 0 is not allowed"}},
		{"zero compile time", base + "runtime: {module_limits: {compile_time: 0s}}\n", nil, []string{"runtime.module_limits.compile_time: 0 is not allowed"}},
		{"tiny compile budget", base + "runtime: {module_limits: {compile_memory: 1MiB, instance_memory: 64KiB}}\n", nil,
			[]string{"runtime.module_limits.compile_memory: 1MiB is below 8MiB", "runtime.module_limits.instance_memory: 64KiB is below 1MiB"}},
		{"two at once", base + "    limits: {memory: 0, record_timeout: 7}\n", nil,
			[]string{"processors[0].limits.memory: 0 is not allowed", "processors[0].limits.record_timeout: 7 has no unit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.yaml), tc.env, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	cfg, err := Load(writeConfig(t, base), []string{"WASMSTREAM_KAFKA__FETCH_MAX_PARTITION_BYTES=64KiB"}, nil)
	if err != nil || cfg.Kafka.FetchMaxPartitionBytes != 64<<10 || cfg.Kafka.FetchMaxBytes != host.DefaultFetchMaxBytes {
		t.Fatalf("fetch sizes: %v, %+v", err, cfg)
	}
	cfg, err = Load(writeConfig(t, base+"    limits: {memory: 32MiB, record_timeout: 250ms}\n"), nil, nil)
	if err != nil || cfg.Processors[0].Limits.RecordTimeout != 250*time.Millisecond || cfg.Processors[0].Limits.Memory != 32<<20 {
		t.Fatalf("good limits: %v, %+v", err, cfg)
	}
}

// Every relative path the file gives, and the default state.dir, is
// relative to the file's directory, wherever wasmstream runs from; one
// from the environment or a flag is relative to the working directory.
func TestLoadResolvesPaths(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "conf")
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(conf, "pipeline.yaml")
	body := `app_id: a
kafka:
  brokers: [127.0.0.1:9092]
runtime: {cache_dir: cache}
processors:
  - {name: p, plugin: p.wasm, inputs: [in]}
  - {name: q, plugin: ../q.wasm, inputs: [in2]}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		cfg.State.Dir:                        filepath.Join(conf, host.DefaultStateDir),
		cfg.Runtime.CacheDir:                 filepath.Join(conf, "cache"),
		cfg.Processors[0].Plugin:             filepath.Join(conf, "p.wasm"),
		cfg.Processors[1].Plugin:             filepath.Join(filepath.Dir(conf), "q.wasm"),
		cfg.StateDir():                       filepath.Join(conf, host.DefaultStateDir, "a"),
		relativeTo(t, cfg.StateDir(), conf):  filepath.Join(host.DefaultStateDir, "a"),
		relativeTo(t, cfg.State.Dir, wd)[:2]: "..",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}

	// The environment and flags: relative to the working directory.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse([]string{"--state-dir", "st"}); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(path, []string{"WASMSTREAM_PROCESSORS__1__PLUGIN=build/q.wasm"}, fs)
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		cfg.State.Dir:            filepath.Join(wd, "st"),
		cfg.Processors[0].Plugin: filepath.Join(conf, "p.wasm"),
		cfg.Processors[1].Plugin: filepath.Join(wd, "build", "q.wasm"),
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}

	// No file: the working directory.
	cfg, err = Load("", []string{"WASMSTREAM_APP_ID=b", "WASMSTREAM_PROCESSORS__0__NAME=p",
		"WASMSTREAM_PROCESSORS__0__PLUGIN=p.wasm", "WASMSTREAM_PROCESSORS__0__INPUTS=in"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Processors[0].Plugin != filepath.Join(wd, "p.wasm") || cfg.State.Dir != filepath.Join(wd, host.DefaultStateDir) {
		t.Errorf("without a file: plugin %q, state.dir %q; want both in %s", cfg.Processors[0].Plugin, cfg.State.Dir, wd)
	}
}

func relativeTo(t *testing.T, p, base string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLoadSecurity: kafka.tls and kafka.sasl load from the file and
// the environment, their problems name the field path, and the password
// never shows in the config's JSON.
func TestLoadSecurity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	yaml := `app_id: a
kafka:
  brokers: [k:9093]
  tls: {enabled: true, server_name: kafka.internal}
  sasl: {mechanism: SCRAM-SHA-512, username: svc}
processors: [{name: p, plugin: x.wasm, inputs: [in]}]
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, []string{"WASMSTREAM_KAFKA__SASL__PASSWORD=hunter2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Kafka.TLS.Enabled || cfg.Kafka.TLS.ServerName != "kafka.internal" || cfg.Kafka.SASL.Username != "svc" || cfg.Kafka.SASL.Password != "hunter2" {
		t.Fatalf("loaded %+v", cfg.Kafka)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "hunter2") || !strings.Contains(string(js), `"Password":"[redacted]"`) {
		t.Fatalf("config JSON: %s", js)
	}

	_, err = Load(path, []string{"WASMSTREAM_KAFKA__SASL__PASSWORD=env:WASMSTREAM_TEST_UNSET_PASSWORD", "WASMSTREAM_KAFKA__TLS__CA_FILE=" + filepath.Join(dir, "none.pem")}, nil)
	var ce *host.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"kafka.sasl.password: ", "kafka.tls.ca_file: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
}

const repartitionConfig = `
app_id: app
kafka:
  brokers: [127.0.0.1:9092]
processors:
  - name: split
    plugin: split.wasm
    inputs: [lines]
    repartition: [words]
  - name: count
    plugin: wordcount.wasm
    inputs: [split.words]
    outputs: {counts: word-counts}
    stores: [counts]
`

func TestLoadRepartitionErrorsNameTheField(t *testing.T) {
	cases := []struct{ name, old, new, want string }{
		{"unknown processor output", "inputs: [split.words]", "inputs: [split.word]",
			`processors[1].inputs[0]: "split.word" names processor "split", which has no repartition output "word"`},
		{"reads its own output", "inputs: [lines]", "inputs: [split.words]",
			`processors[0].inputs[0]: "split.words" is the processor's own repartition output`},
		{"both output and repartition", "repartition: [words]", "repartition: [words]\n    outputs: {words: t}",
			`processors[0].repartition[0]: output "words" is also in outputs`},
		{"bad name", "repartition: [words]", "repartition: [words, \"a b\"]",
			`processors[0].repartition[1]: output name "a b" must be made of`},
		{"listed twice", "repartition: [words]", "repartition: [words, words]",
			`processors[0].repartition[1]: output "words" is listed twice`},
		{"read by nobody", "inputs: [split.words]", "inputs: [other]",
			`processors[0].repartition[0]: no processor reads it: name "split.words" in the inputs`},
		{"negative partitions", "repartition: [words]", "repartition: [words]\n    repartition_partitions: -1",
			"processors[0].repartition_partitions: must be positive"},
		{"partitions without outputs", "stores: [counts]", "stores: [counts]\n    repartition_partitions: 4",
			"processors[1].repartition_partitions: is set but the processor has no repartition outputs"},
		{"cycle", "inputs: [lines]", "inputs: [count.back]",
			"processors split -> count -> split feed each other through repartition topics in a cycle"},
		{"topic name too long", "name: split", "name: split" + strings.Repeat("s", 240),
			"is longer than Kafka's 249 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := strings.Replace(repartitionConfig, c.old, c.new, 1)
			switch c.name {
			case "cycle": // count also writes a repartition output split reads
				body = strings.Replace(body, "stores: [counts]", "stores: [counts]\n    repartition: [back]", 1)
			case "topic name too long":
				body = strings.Replace(body, "inputs: [split.words]", "inputs: [split"+strings.Repeat("s", 240)+".words]", 1)
			}
			_, err := Load(writeConfig(t, body), nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	// Two readers of one repartition output.
	body := repartitionConfig + `  - name: count2
    plugin: wordcount.wasm
    inputs: [split.words]
    outputs: {counts: word-counts-2}
`
	_, err := Load(writeConfig(t, body), nil, nil)
	if want := `processors[2].inputs[0]: repartition output "split.words" is already the input of processor "count"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("two readers: %v\nwant %q", err, want)
	}
}

// A zero that means something is kept, from the file, the environment or
// a flag: canary_window: 0s turns the canary off, max_failure_ratio: 0
// rolls back at the first failure; left out, each takes its default.
func TestLoadZeroesThatMeanSomething(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		env        []string
		window     time.Duration
		ratio      float64
	}{
		{"defaults", goodConfig, nil, host.DefaultCanaryWindow, host.DefaultMaxFailureRatio},
		{"file", goodConfig + "swap: {canary_window: 0s, max_failure_ratio: 0}\n", nil, 0, 0},
		{"file, floats", goodConfig + "swap: {canary_window: 90s, max_failure_ratio: 0.0}\n", nil, 90 * time.Second, 0},
		{"environment", goodConfig, []string{"WASMSTREAM_SWAP__CANARY_WINDOW=0s", "WASMSTREAM_SWAP__MAX_FAILURE_RATIO=0"}, 0, 0},
		{"environment over file", goodConfig + "swap: {canary_window: 0s}\n", []string{"WASMSTREAM_SWAP__CANARY_WINDOW=2m"}, 2 * time.Minute, host.DefaultMaxFailureRatio},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(writeConfig(t, c.yaml), c.env, nil)
			if err != nil {
				t.Fatal(err)
			}
			w, wok := cfg.Swap.CanaryWindow.Get()
			r, rok := cfg.Swap.MaxFailureRatio.Get()
			if !wok || !rok || w != c.window || r != c.ratio {
				t.Errorf("canary_window %s (set %v), max_failure_ratio %v (set %v); want %s, %v", w, wok, r, rok, c.window, c.ratio)
			}
		})
	}
}

// Every enum a file gives is the config's typed value, whatever its case
// where the field allows any (log.level), and LoadKafka checks only what
// a topic command needs.
func TestLoadEnums(t *testing.T) {
	body := strings.Replace(goodConfig, "commit_interval: 250ms", "commit_interval: 250ms\n  start_offset: latest\n  group_protocol: classic\n  members: shared", 1) +
		"guarantee: at_least_once\nlog: {level: WARN, format: json}\n"
	body = strings.Replace(body, "limits:", "on_error: dead_letter\n    stores: [s]\n    expire: {s: {after: 1h, clock: wall}}\n    limits:", 1)
	cfg, err := Load(writeConfig(t, body), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Processors[0]
	if cfg.Guarantee != host.AtLeastOnce || cfg.Kafka.StartOffset != host.StartLatest || cfg.Kafka.GroupProtocol != host.ProtocolClassic ||
		cfg.Kafka.Members != host.MembersShared || cfg.Log.Level != host.LevelWarn || cfg.Log.Format != host.LogJSON ||
		p.OnError != host.OnErrorDeadLetter || p.Expire["s"].Clock != host.ClockWall {
		t.Errorf("loaded %+v", cfg)
	}
	if _, err := LoadKafka(writeConfig(t, "kafka: {brokers: [127.0.0.1:9092]}\n"), nil, nil); err != nil {
		t.Errorf("LoadKafka without processors: %v", err)
	}
	if _, err := LoadKafka(writeConfig(t, "app_id: \"a b\"\nkafka: {brokers: [localhost]}\n"), nil, nil); err == nil ||
		!strings.Contains(err.Error(), "kafka.brokers[0]") || !strings.Contains(err.Error(), "app_id") {
		t.Errorf("LoadKafka with a bad broker and app_id: %v", err)
	}
}

// A value that does not parse does not hide the config's other problems,
// and is reported once.
func TestLoadReportsEveryProblem(t *testing.T) {
	body := strings.Replace(goodConfig, "app_id: orders", "guarantee: twice", 1)
	body = strings.Replace(body, "limits:", "on_error: retry\n    limits:", 1)
	_, err := Load(writeConfig(t, body), nil, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`guarantee: "twice" must be`, `processors[0].on_error: "retry" must be`, "app_id: required"} {
		if strings.Count(err.Error(), want) != 1 {
			t.Errorf("error %q names %q %d times, want once", err, want, strings.Count(err.Error(), want))
		}
	}
}
