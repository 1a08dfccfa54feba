package host

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The loading of configs from files, the environment and flags is tested
// in internal/configload; these tests build configs in Go.

// goodConfig is a valid config as an embedder builds it.
func goodConfig() *Config {
	return &Config{
		AppID: "orders",
		Kafka: KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, CommitInterval: 250 * time.Millisecond},
		Processors: []ProcessorConfig{{
			Name: "nl-only", Plugin: "plugins/filter.wasm", Inputs: []string{"orders"},
			Outputs: map[string]OutputConfig{"out": {Topic: "orders-nl"}},
			Config:  map[string]any{"field": "country", "op": "eq", "value": "NL"},
			Limits:  Limits{Memory: 32 << 20, RecordTimeout: 500 * time.Millisecond},
		}},
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

// A canary window of 0 turns the canary off and a failure ratio of 0 rolls
// back at the first failure: an Optional says "unset" by itself, so a zero
// set in Go is kept and only an unset one takes the default.
func TestSwapOptionals(t *testing.T) {
	for _, c := range []struct {
		swap         SwapConfig
		window       time.Duration
		ratio        float64
		windowString string
	}{
		{SwapConfig{}, DefaultCanaryWindow, DefaultMaxFailureRatio, "1m0s"},
		{SwapConfig{CanaryWindow: Set(time.Duration(0))}, 0, DefaultMaxFailureRatio, "0s"},
		{SwapConfig{CanaryWindow: Set(time.Minute), MaxFailureRatio: Set(0.0)}, time.Minute, 0, "1m0s"},
		{SwapConfig{MaxFailureRatio: Set(0.5)}, DefaultCanaryWindow, 0.5, "1m0s"},
	} {
		cfg := goodConfig()
		cfg.Swap = c.swap
		cfg.ApplyDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%+v: %v", c.swap, err)
		}
		can := cfg.Swap.canary()
		if can.Window != c.window || can.MaxFailureRatio != c.ratio || can.MinRecords != 1 {
			t.Errorf("%+v: canary %+v, want window %s, ratio %v", c.swap, can, c.window, c.ratio)
		}
		if got := cfg.Swap.CanaryWindow.String(); got != c.windowString {
			t.Errorf("%+v: CanaryWindow prints %q, want %q", c.swap, got, c.windowString)
		}
	}
	if got := (Optional[float64]{}).String(); got != "unset" {
		t.Errorf("an unset Optional prints %q", got)
	}
	cfg := goodConfig()
	cfg.Swap = SwapConfig{CanaryWindow: Set(-time.Second), MaxFailureRatio: Set(1.5)}
	err := cfg.Validate()
	for _, want := range []string{"swap.canary_window: must not be negative", "swap.max_failure_ratio: 1.5 must be between 0 and 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}

func TestOptionalUnmarshalText(t *testing.T) {
	var d Optional[time.Duration]
	if err := d.UnmarshalText([]byte("0s")); err != nil {
		t.Fatal(err)
	}
	if v, ok := d.Get(); !ok || v != 0 {
		t.Errorf("0s: %v, %v", v, ok)
	}
	for in, want := range map[string]string{"30": "30 has no unit", "soon": `"soon" is not a duration`} {
		var d Optional[time.Duration]
		if err := d.UnmarshalText([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if _, ok := d.Get(); ok {
			t.Errorf("%s: a refused value set the Optional", in)
		}
	}
	var r Optional[float64]
	if err := r.UnmarshalText([]byte("0")); err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Get(); !ok || v != 0 {
		t.Errorf("ratio 0: %v, %v", v, ok)
	}
	if err := r.UnmarshalText([]byte("lots")); err == nil {
		t.Error("ratio lots accepted")
	}
	// What MarshalText writes reads back the same, unset included.
	for _, o := range []Optional[time.Duration]{{}, Set(time.Duration(0)), Set(90 * time.Second)} {
		text, err := o.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Optional[time.Duration]
		if err := back.UnmarshalText(text); err != nil || back != o {
			t.Errorf("%v: marshalled %q, read back %v (%v)", o, text, back, err)
		}
	}
}

// Every enum parses its own values and "" (unset), refuses anything else
// naming what it accepts, and is checked again by Validate when built in
// Go; ApplyDefaults gives each unset one its documented default.
func TestEnums(t *testing.T) {
	type enum interface{ UnmarshalText([]byte) error }
	for _, c := range []struct {
		v      enum
		values []string
		bad    string
	}{
		{new(Guarantee), []string{"exactly_once", "at_least_once"}, `"twice" must be exactly_once or at_least_once`},
		{new(ErrorPolicy), []string{"fail", "skip", "dead_letter"}, `"twice" must be fail, skip or dead_letter`},
		{new(StartOffset), []string{"earliest", "latest"}, `"twice" must be earliest or latest`},
		{new(GroupProtocol), []string{"auto", "consumer", "classic"}, `"twice" must be auto, consumer or classic`},
		{new(Members), []string{"per_processor", "shared"}, `"twice" must be per_processor or shared`},
		{new(LogLevel), []string{"debug", "info", "warn", "error"}, `"twice" must be debug, info, warn or error`},
		{new(LogFormat), []string{"text", "json"}, `"twice" must be text or json`},
		{new(ExpiryClock), []string{"event", "wall"}, `"twice" must be event or wall`},
		{new(OutputEmit), []string{"each", "latest_per_key"}, `"twice" must be each or latest_per_key`},
	} {
		for _, v := range append(c.values, "") {
			if err := c.v.UnmarshalText([]byte(v)); err != nil {
				t.Errorf("%T %q: %v", c.v, v, err)
			}
			if got := reflect.ValueOf(c.v).Elem().String(); got != v {
				t.Errorf("%T %q parsed to %q", c.v, v, got)
			}
		}
		if err := c.v.UnmarshalText([]byte("twice")); err == nil || err.Error() != c.bad {
			t.Errorf("%T twice: %v, want %q", c.v, err, c.bad)
		}
	}
	var l LogLevel
	if err := l.UnmarshalText([]byte("WARN")); err != nil || l != LevelWarn {
		t.Errorf("log level WARN: %q, %v", l, err)
	}

	cfg := goodConfig()
	cfg.Processors[0].Stores = []string{"s"}
	cfg.Processors[0].Expire = map[string]StoreExpiry{"s": {After: time.Hour}}
	cfg.ApplyDefaults()
	p := cfg.Processors[0]
	if cfg.Guarantee != ExactlyOnce || cfg.Kafka.StartOffset != StartEarliest || cfg.Kafka.GroupProtocol != ProtocolAuto ||
		cfg.Kafka.Members != MembersPerProcessor || cfg.Log.Level != LevelInfo || cfg.Log.Format != LogText ||
		p.OnError != OnErrorFail || p.Expire["s"].Clock != ClockEvent || p.Outputs["out"].Emit != EmitEach {
		t.Errorf("enum defaults: %+v", cfg)
	}
	cfg.Guarantee, cfg.Kafka.Members, cfg.Processors[0].OnError = "twice", "one", "retry"
	cfg.Processors[0].Outputs["out"] = OutputConfig{Topic: "t", Emit: "sometimes"}
	cfg.Processors[0].Expire["s"] = StoreExpiry{After: time.Hour, Clock: "sundial"}
	cfg.Log.Level = "LOUD"
	err := cfg.Validate()
	for _, want := range []string{`guarantee: "twice" must be exactly_once or at_least_once`, `kafka.members: "one" must be per_processor or shared`,
		`processors[0].on_error: "retry" must be fail, skip or dead_letter`, `processors[0].outputs.out.emit: "sometimes" must be each or latest_per_key`,
		`processors[0].expire.s.clock: "sundial" must be event or wall`, `log.level: "loud" must be debug, info, warn or error`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v\nwant %q", err, want)
		}
	}
	cfg.Guarantee, cfg.Kafka.Members, cfg.Processors[0].OnError, cfg.Log.Level = AtLeastOnce, MembersShared, OnErrorSkip, "DEBUG"
	cfg.Processors[0].Outputs["out"] = OutputConfig{Topic: "t", Emit: EmitLatestPerKey}
	cfg.Processors[0].Expire["s"] = StoreExpiry{After: time.Hour, Clock: ClockWall}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate of good values (log.level in capitals): %v", err)
	}
}

// The tables that turn the config's enums into the runner's hold every
// value, each to the runner value of the same name; an unset one is an
// error, never the runner's zero value (whose default is not the
// config's: at_least_once against exactly_once).
func TestRunnerEnums(t *testing.T) {
	check := func(what string, values []string, names map[string]string) {
		for _, v := range values {
			if got, ok := names[v]; !ok || got != v {
				t.Errorf("%s %q becomes the runner's %q (in the table: %v)", what, v, got, ok)
			}
		}
		if len(names) != len(values) {
			t.Errorf("%s: the table has %d values, the config type %d", what, len(names), len(values))
		}
	}
	check("guarantee", strs(guarantees), names(runnerGuarantees))
	check("start offset", strs(startOffsets), names(runnerStartOffsets))
	check("group protocol", strs(groupProtocols), names(runnerGroupProtocols))
	check("error policy", strs(errorPolicies), names(runnerErrorPolicies))

	cfg := goodConfig()
	if _, err := toRunnerEnums(cfg); err == nil || !strings.Contains(err.Error(), "guarantee") {
		t.Errorf("toRunnerEnums of a config without its defaults: %v", err)
	}
	cfg.ApplyDefaults()
	e, err := toRunnerEnums(cfg)
	var ce *ConfigError
	if err != nil || e.guarantee.String() != "exactly_once" || e.onError[0].String() != "fail" {
		t.Errorf("toRunnerEnums = %+v, %v", e, err)
	}
	cfg.Processors[0].OnError = "retry"
	if _, err := toRunnerEnums(cfg); !errors.As(err, &ce) || ce.Path != "processors[0].on_error" {
		t.Errorf("toRunnerEnums with on_error retry: %v", err)
	}
}

func strs[E ~string](values []E) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

func names[E ~string, R fmt.Stringer](table map[E]R) map[string]string {
	out := map[string]string{}
	for k, v := range table {
		out[string(k)] = v.String()
	}
	return out
}

// Clone shares nothing a caller could change under a running host.
func TestCloneIsDeep(t *testing.T) {
	cfg := goodConfig()
	cfg.ApplyDefaults()
	c := cfg.Clone()
	c.Kafka.Brokers[0] = "changed:1"
	p := &c.Processors[0]
	p.Inputs[0] = "changed"
	p.Outputs["out"] = OutputConfig{Topic: "changed"}
	p.Config["field"] = "changed"
	p.Name = "changed"
	orig := cfg.Processors[0]
	if cfg.Kafka.Brokers[0] != "127.0.0.1:9092" || orig.Inputs[0] != "orders" || orig.Outputs["out"].Topic != "orders-nl" ||
		orig.Config["field"] != "country" || orig.Name != "nl-only" {
		t.Errorf("changing the clone changed the original: %+v", cfg)
	}
	if (&Config{}).Clone().Processors != nil {
		t.Error("a config without processors cloned to an empty, non-nil list")
	}
}

// Under exactly_once a record's time limit must leave the transaction room:
// a commit point comes at most one record late.
func TestValidateRecordTimeoutAgainstTransactionTimeout(t *testing.T) {
	cfg := goodConfig()
	cfg.ApplyDefaults()
	cfg.Kafka.TransactionTimeout = 2 * time.Second
	cfg.Processors[0].Limits.RecordTimeout = 900 * time.Millisecond
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "processors[0].limits.record_timeout") || !strings.Contains(err.Error(), "kafka.transaction_timeout") {
		t.Fatalf("Validate = %v, want record_timeout refused against the transaction timeout", err)
	}
	cfg.Guarantee = AtLeastOnce
	if err := cfg.Validate(); err != nil {
		t.Fatalf("at_least_once has no transaction: %v", err)
	}
}

// limits.window_bytes and runtime.memory_budget: their defaults, a window
// that one record could not fit in, a process budget below one task's cap.
func TestValidateHeldBudgets(t *testing.T) {
	cfg := goodConfig()
	cfg.ApplyDefaults()
	if w, m := cfg.Processors[0].Limits.WindowBytes, cfg.Runtime.MemoryBudget; w != 64<<20 || m != 1<<30 {
		t.Fatalf("defaults: window_bytes %d, memory_budget %d", w, m)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg.Processors[0].Limits.WindowBytes = 16 << 20
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "processors[0].limits.window_bytes") || !strings.Contains(err.Error(), "state_bytes_per_record") {
		t.Errorf("a window smaller than one record: %v", err)
	}
	cfg.Processors[0].Limits.WindowBytes = 1 << 30
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "runtime.memory_budget") {
		t.Errorf("a process budget below one task's cap: %v", err)
	}
	cfg.Runtime.MemoryBudget = 2 << 30
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "runtime.memory_budget") || !strings.Contains(err.Error(), "limits.memory (32MiB)") {
		t.Errorf("a budget of twice the window, no room for an instance: %v", err)
	}
	cfg.Runtime.MemoryBudget = 2<<30 + 32<<20
	if err := cfg.Validate(); err != nil {
		t.Errorf("a budget of twice the window and one instance's memory: %v", err)
	}
}

// The instances' share of runtime.memory_budget: all of it but twice the
// largest window; start-up warns when the tasks of every input partition
// could not all grow to limits.memory in it, naming the figures.
func TestInstanceMemoryWarning(t *testing.T) {
	cfg := goodConfig()
	cfg.Processors[0].Limits.Memory = 64 << 20
	cfg.ApplyDefaults()
	if got, want := cfg.instanceRoom(), int64(1<<30-128<<20); got != want {
		t.Fatalf("instance room %d, want %d (1 GiB less twice the 64 MiB window)", got, want)
	}
	in := cfg.Processors[0].Inputs[0]
	if w := cfg.instanceMemoryWarning(map[string]int32{in: 14}); w != "" {
		t.Errorf("14 tasks of 64 MiB fit in 896 MiB, but: %s", w)
	}
	w := cfg.instanceMemoryWarning(map[string]int32{in: 32})
	for _, s := range []string{"up to 32 tasks", "2GiB", "896MiB", "memory.grow returns -1", "raise runtime.memory_budget"} {
		if !strings.Contains(w, s) {
			t.Errorf("32 tasks of 64 MiB: the warning does not say %q: %s", s, w)
		}
	}
	if w := cfg.instanceMemoryWarning(map[string]int32{}); w != "" {
		t.Errorf("no partitions known: %s", w)
	}
}

// latest_per_key outputs are the runner's Latest, by output index.
func TestLatestOutputs(t *testing.T) {
	cfg := goodConfig()
	p := &cfg.Processors[0]
	p.Outputs = map[string]OutputConfig{"out": {Topic: "orders-nl"}, "counts": {Topic: "word-counts", Emit: EmitLatestPerKey},
		"side": {Topic: "side-topic"}}
	cfg.ApplyDefaults()
	if latest := cfg.latestOutputs(p, []string{"counts", "out", "side"}); len(latest) != 3 || !latest[0] || latest[1] || latest[2] {
		t.Errorf("latestOutputs = %v", latest)
	}
	p.Outputs["counts"] = OutputConfig{Topic: "word-counts"}
	if latest := cfg.latestOutputs(p, []string{"counts", "out", "side"}); latest != nil {
		t.Errorf("latestOutputs without latest_per_key = %v, want nil", latest)
	}
}

// A state cache of a Go-built config is checked as a file's is.
func TestValidateStateCache(t *testing.T) {
	cfg := goodConfig()
	cfg.ApplyDefaults()
	if got := cfg.Processors[0].StateCache; got != "16MiB" {
		t.Errorf("default state_cache %q", got)
	}
	cfg.Processors[0].StateCache = "lots"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "processors[0].state_cache") {
		t.Errorf("Validate with state_cache lots: %v", err)
	}
}

func TestValidateQuery(t *testing.T) {
	for _, c := range []struct {
		q    QueryConfig
		want string // "" for valid
	}{
		{QueryConfig{}, ""},
		{QueryConfig{Listen: "127.0.0.1:0", Advertise: "http://10.0.0.7:9645", Token: "t"}, ""},
		{QueryConfig{Listen: "127.0.0.1:9645", Advertise: "https://q.example:443/"}, ""},
		{QueryConfig{Listen: "nope"}, "query.listen"},
		{QueryConfig{Listen: "127.0.0.1:9644"}, "query.listen: \"127.0.0.1:9644\" is admin.listen too"},
		{QueryConfig{Listen: "127.0.0.1:0", Advertise: "10.0.0.7:9645"}, "query.advertise"},
		{QueryConfig{Listen: "127.0.0.1:0", Advertise: "http://10.0.0.7:9645/api"}, "query.advertise"},
		{QueryConfig{Advertise: "http://10.0.0.7:9645"}, "query.advertise: the query endpoint is off"},
		{QueryConfig{Token: "t"}, "query.token: the query endpoint is off"},
	} {
		cfg := goodConfig()
		cfg.Admin.Listen = "127.0.0.1:9644"
		cfg.Query = c.q
		cfg.ApplyDefaults()
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: Validate = %v, want %q", c.q, err, c.want)
		}
	}
}
