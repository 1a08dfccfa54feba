package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every relative path the file gives, and the default state.dir, is
// relative to the file's directory, wherever wasmstream runs from; one
// from the environment or a flag is relative to the working directory.
func TestLoadConfigResolvesPaths(t *testing.T) {
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
	cfg, err := LoadConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		cfg.State.Dir:                        filepath.Join(conf, DefaultStateDir),
		cfg.Runtime.CacheDir:                 filepath.Join(conf, "cache"),
		cfg.Processors[0].Plugin:             filepath.Join(conf, "p.wasm"),
		cfg.Processors[1].Plugin:             filepath.Join(filepath.Dir(conf), "q.wasm"),
		cfg.StateDir():                       filepath.Join(conf, DefaultStateDir, "a"),
		relativeTo(t, cfg.StateDir(), conf):  filepath.Join(DefaultStateDir, "a"),
		relativeTo(t, cfg.State.Dir, wd)[:2]: "..",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}

	// The environment and flags: relative to the working directory.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	ConfigFlags(fs)
	if err := fs.Parse([]string{"--state-dir", "st"}); err != nil {
		t.Fatal(err)
	}
	cfg, err = LoadConfig(path, []string{"WASMSTREAM_PROCESSORS__1__PLUGIN=build/q.wasm"}, fs)
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
	cfg, err = LoadConfig("", []string{"WASMSTREAM_APP_ID=b", "WASMSTREAM_PROCESSORS__0__NAME=p",
		"WASMSTREAM_PROCESSORS__0__PLUGIN=p.wasm", "WASMSTREAM_PROCESSORS__0__INPUTS=in"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Processors[0].Plugin != filepath.Join(wd, "p.wasm") || cfg.State.Dir != filepath.Join(wd, DefaultStateDir) {
		t.Errorf("without a file: plugin %q, state.dir %q; want both in %s", cfg.Processors[0].Plugin, cfg.State.Dir, wd)
	}
}

// TLS files and file: secrets follow the same rule; env: and literal
// secrets are not paths, and neither is cache_dir "off".
func TestResolveSecurityPaths(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	conf := filepath.Join(t.TempDir(), "conf")
	cfg := &Config{}
	cfg.Runtime.CacheDir = "off"
	cfg.Kafka.TLS = TLSConfig{Enabled: true, CAFile: "tls/ca.pem", CertFile: "/abs/cert.pem", KeyFile: "../key.pem"}
	cfg.Kafka.SASL = SASLConfig{Mechanism: "PLAIN", Password: "file:secrets/pw", Token: "env:TOKEN", AccessKey: "literal", SecretKey: "file:sk"}
	fromCLI := map[string]bool{"kafka.sasl.secret_key": true}
	if err := cfg.resolvePaths(filepath.Join(conf, "p.yaml"), func(k string) bool { return fromCLI[k] }); err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		cfg.Runtime.CacheDir:             "off",
		cfg.Kafka.TLS.CAFile:             filepath.Join(conf, "tls", "ca.pem"),
		cfg.Kafka.TLS.CertFile:           "/abs/cert.pem",
		cfg.Kafka.TLS.KeyFile:            filepath.Join(filepath.Dir(conf), "key.pem"),
		string(cfg.Kafka.SASL.Password):  "file:" + filepath.Join(conf, "secrets", "pw"),
		string(cfg.Kafka.SASL.Token):     "env:TOKEN",
		string(cfg.Kafka.SASL.AccessKey): "literal",
		string(cfg.Kafka.SASL.SecretKey): "file:" + filepath.Join(wd, "sk"),
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func relativeTo(t *testing.T, p, base string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A state directory an earlier wasmstream made relative to the working
// directory is found and named, with what to do about it.
func TestOldStateDir(t *testing.T) {
	conf, wd := t.TempDir(), t.TempDir()
	t.Chdir(wd)
	path := filepath.Join(conf, "pipeline.yaml")
	if err := os.WriteFile(path, []byte("app_id: a\nprocessors:\n  - {name: p, plugin: p.wasm, inputs: [in], stores: [s]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func() *Config {
		cfg, err := LoadConfig(path, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if old := load().OldStateDir(); old != "" {
		t.Errorf("OldStateDir %q with no state anywhere", old)
	}
	old := filepath.Join(wd, DefaultStateDir, "a")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := load()
	if got := cfg.OldStateDir(); got != old {
		t.Errorf("OldStateDir %q, want %q", got, old)
	}
	advice := cfg.oldStateDirAdvice()
	for _, want := range []string{cfg.StateDir(), old, "mv " + old + " " + cfg.StateDir(), "state.dir: " + filepath.Dir(old)} {
		if !strings.Contains(advice, want) {
			t.Errorf("advice lacks %q:\n%s", want, advice)
		}
	}
	// Once the new directory exists it is the state: nothing to say.
	if err := os.MkdirAll(cfg.StateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := load().OldStateDir(); got != "" {
		t.Errorf("OldStateDir %q when the state directory exists", got)
	}
}
