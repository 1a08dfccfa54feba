package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	if err := cfg.ResolvePaths(filepath.Join(conf, "p.yaml"), func(k string) bool { return fromCLI[k] }); err != nil {
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

// A state directory an earlier wasmstream made relative to the working
// directory is found and named, with what to do about it.
func TestOldStateDir(t *testing.T) {
	conf, wd := t.TempDir(), t.TempDir()
	t.Chdir(wd)
	// As a file in conf that leaves state.dir out loads.
	load := func() *Config {
		cfg := &Config{AppID: "a", Processors: []ProcessorConfig{{Name: "p", Plugin: "p.wasm", Inputs: []string{"in"}, Stores: []string{"s"}}}}
		cfg.ApplyDefaults()
		if err := cfg.ResolvePaths(filepath.Join(conf, "pipeline.yaml"), func(string) bool { return false }); err != nil {
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
