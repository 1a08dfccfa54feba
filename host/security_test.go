package host

import (
	"strings"
	"testing"
)

// The embedded broker is plaintext: security settings need brokers. (How
// kafka.tls and kafka.sasl load, and name their problems: internal/configload.)
func TestSecurityNeedsBrokers(t *testing.T) {
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
