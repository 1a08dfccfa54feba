package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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

func TestLoadConfigMergesFileEnvFlags(t *testing.T) {
	path := writeConfig(t, goodConfig)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	ConfigFlags(fs)
	if err := fs.Parse([]string{"--state-dir", "/tmp/st"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"WASMSTREAM_APP_ID=from-env", "WASMSTREAM_KAFKA__BROKERS=a:1,b:2", "HOME=/root"}
	cfg, err := LoadConfig(path, env, fs)
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
	if p.OnError != OnErrorFail || cfg.Kafka.CommitRecords != DefaultCommitRecords {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if p.Config["value"] != "NL" {
		t.Errorf("plugin config = %v", p.Config)
	}
}

func TestLoadConfigErrorsNameTheField(t *testing.T) {
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
		{"no processors", "app_id: x\n", "processors: at least one"},
		{"not yaml", "app_id: [", "config file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, c.body), nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("error = %v", err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"65536": 65536, "64KiB": 64 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30, "2mb": 2e6} {
		var b ByteSize
		if err := b.UnmarshalText([]byte(in)); err != nil || b != want {
			t.Errorf("%s -> %d, %v", in, b, err)
		}
	}
	if got := ByteSize(64 << 20).String(); got != "64MiB" {
		t.Error(got)
	}
}

// A config file's canary_window: 0s turns the canary off; so does
// CanaryOff from Go, where a zero CanaryWindow means "the default".
func TestCanaryOff(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, goodConfig+"swap: {canary_window: 0s}\n"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Swap.CanaryOff || cfg.Swap.CanaryWindow != 0 || cfg.Swap.canary().Window != 0 {
		t.Errorf("canary_window: 0s gave %+v", cfg.Swap)
	}
	cfg, err = LoadConfig(writeConfig(t, goodConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Swap.CanaryOff || cfg.Swap.canary().Window != DefaultCanaryWindow {
		t.Errorf("no canary_window gave %+v", cfg.Swap)
	}
	for _, c := range []struct {
		swap SwapConfig
		want time.Duration
	}{
		{SwapConfig{}, DefaultCanaryWindow},
		{SwapConfig{CanaryOff: true}, 0},
		{SwapConfig{CanaryOff: true, CanaryWindow: time.Minute}, 0},
		{SwapConfig{CanaryWindow: time.Minute}, time.Minute},
	} {
		cfg := Config{Swap: c.swap}
		cfg.ApplyDefaults()
		if got := cfg.Swap.canary().Window; got != c.want {
			t.Errorf("%+v: canary window %s, want %s", c.swap, got, c.want)
		}
	}
}

// Clone shares nothing a caller could change under a running host.
func TestCloneIsDeep(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, goodConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Clone()
	c.Kafka.Brokers[0] = "changed:1"
	p := &c.Processors[0]
	p.Inputs[0] = "changed"
	p.Outputs["out"] = "changed"
	p.Config["field"] = "changed"
	p.Name = "changed"
	orig := cfg.Processors[0]
	if cfg.Kafka.Brokers[0] != "127.0.0.1:9092" || orig.Inputs[0] != "orders" || orig.Outputs["out"] != "orders-nl" ||
		orig.Config["field"] != "country" || orig.Name != "nl-only" {
		t.Errorf("changing the clone changed the original: %+v", cfg)
	}
	if (&Config{}).Clone().Processors != nil {
		t.Error("a config without processors cloned to an empty, non-nil list")
	}
}

// A duration or size written as 0 is an error naming the field, not a
// silent default, and a duration without a unit is not nanoseconds (issue
// 11: "memory: 0 and record_timeout: 0 are silently replaced by defaults;
// record_timeout: 5 passes as 5 ns"). canary_window: 0s keeps its meaning.
func TestLoadConfigRefusesZeroAndUnitlessQuantities(t *testing.T) {
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
			_, err := LoadConfig(writeConfig(t, tc.yaml), tc.env, nil)
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
	cfg, err := LoadConfig(writeConfig(t, base+"swap: {canary_window: 0s}\n"), nil, nil)
	if err != nil || !cfg.Swap.CanaryOff {
		t.Fatalf("canary_window: 0s = %v, CanaryOff %v; want the canary off", err, cfg != nil && cfg.Swap.CanaryOff)
	}
	cfg, err = LoadConfig(writeConfig(t, base), []string{"WASMSTREAM_KAFKA__FETCH_MAX_PARTITION_BYTES=64KiB"}, nil)
	if err != nil || cfg.Kafka.FetchMaxPartitionBytes != 64<<10 || cfg.Kafka.FetchMaxBytes != DefaultFetchMaxBytes {
		t.Fatalf("fetch sizes: %v, %+v", err, cfg)
	}
	cfg, err = LoadConfig(writeConfig(t, base+"    limits: {memory: 32MiB, record_timeout: 250ms}\n"), nil, nil)
	if err != nil || cfg.Processors[0].Limits.RecordTimeout != 250*time.Millisecond || cfg.Processors[0].Limits.Memory != 32<<20 {
		t.Fatalf("good limits: %v, %+v", err, cfg)
	}
}

// Under exactly_once a record's time limit must leave the transaction room:
// a commit point comes at most one record late.
func TestValidateRecordTimeoutAgainstTransactionTimeout(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, goodConfig), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka.TransactionTimeout = 2 * time.Second
	cfg.Processors[0].Limits.RecordTimeout = 900 * time.Millisecond
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "processors[0].limits.record_timeout") || !strings.Contains(err.Error(), "kafka.transaction_timeout") {
		t.Fatalf("Validate = %v, want record_timeout refused against the transaction timeout", err)
	}
	cfg.Guarantee = AtLeastOnce
	if err := cfg.Validate(); err != nil {
		t.Fatalf("at_least_once has no transaction: %v", err)
	}
}
