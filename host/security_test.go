package host

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigSecurity: kafka.tls and kafka.sasl load from the file and
// the environment, their problems name the field path, and the password
// never shows in the config's JSON.
func TestLoadConfigSecurity(t *testing.T) {
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
	cfg, err := LoadConfig(path, []string{"WASMSTREAM_KAFKA__SASL__PASSWORD=hunter2"}, nil)
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

	_, err = LoadConfig(path, []string{"WASMSTREAM_KAFKA__SASL__PASSWORD=env:WASMSTREAM_TEST_UNSET_PASSWORD", "WASMSTREAM_KAFKA__TLS__CA_FILE=" + filepath.Join(dir, "none.pem")}, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"kafka.sasl.password: ", "kafka.tls.ca_file: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}

	// The embedded broker is plaintext: security settings need brokers.
	c := Config{AppID: "a", Kafka: KafkaConfig{TLS: TLSConfig{Enabled: true}},
		Processors: []ProcessorConfig{{Name: "p", Plugin: "x.wasm", Inputs: []string{"in"}}}}
	c.ApplyDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.brokers: required with kafka.tls") {
		t.Fatalf("embedded with TLS: %v", err)
	}
}

func TestLogFormat(t *testing.T) {
	c := Config{AppID: "a", Processors: []ProcessorConfig{{Name: "p", Plugin: "x.wasm", Inputs: []string{"in"}}}}
	c.ApplyDefaults()
	if c.Log.Format != "text" {
		t.Fatalf("default log.format %q", c.Log.Format)
	}
	c.Log.Format = "xml"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `log.format: "xml" must be text or json`) {
		t.Fatalf("log.format xml: %v", err)
	}
}

func TestSecurityWarnings(t *testing.T) {
	for _, c := range []struct {
		k    KafkaConfig
		want string
	}{
		{KafkaConfig{TLS: TLSConfig{Enabled: true, InsecureSkipVerify: true}}, "insecure_skip_verify"},
		{KafkaConfig{SASL: SASLConfig{Mechanism: "plain"}}, "clear text"},
		{KafkaConfig{TLS: TLSConfig{Enabled: true}, SASL: SASLConfig{Mechanism: "PLAIN"}}, ""},
		{KafkaConfig{SASL: SASLConfig{Mechanism: "SCRAM-SHA-256"}}, ""},
	} {
		w := strings.Join(c.k.securityWarnings(), "; ")
		if (c.want == "") != (w == "") || !strings.Contains(w, c.want) {
			t.Errorf("%+v: warnings %q, want %q", c.k, w, c.want)
		}
	}
}
