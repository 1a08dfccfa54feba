package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/kafkasec"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// TLSConfig is kafka.tls: encrypted connections to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on; the other fields need it. Default false.
	Enabled bool `koanf:"enabled"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates. Default "": the system's roots.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are the client's PEM certificate and key, for
	// brokers that require client certificates (mTLS). Both or neither.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName is the name the brokers' certificates must carry.
	// Default "": the host name of each broker address.
	ServerName string `koanf:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. Development
	// only: anyone on the path can then read and change the traffic.
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
}

// SASLConfig is kafka.sasl: authentication to the brokers.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or
	// AWS_MSK_IAM. Default "": no SASL.
	Mechanism string `koanf:"mechanism"`
	// Username is the PLAIN or SCRAM user.
	Username string `koanf:"username"`
	// Password is the PLAIN or SCRAM password (a Secret: env:NAME,
	// file:PATH or the value itself).
	Password Secret `koanf:"password"`
	// Token is the OAUTHBEARER token, usually file:PATH: the file is read
	// again at every authentication, so rotating it needs no restart.
	Token Secret `koanf:"token"`
	// AccessKey, SecretKey and SessionToken are AWS_MSK_IAM credentials.
	// Default: the AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	// AWS_SESSION_TOKEN environment variables.
	AccessKey    Secret `koanf:"access_key"`
	SecretKey    Secret `koanf:"secret_key"`
	SessionToken Secret `koanf:"session_token"`
}

// Secret is a credential: "env:NAME" (read from environment variable
// NAME), "file:PATH" (read from the file; one trailing newline dropped) or
// the value itself. References are read at each authentication, so a
// rotated value is used by the next connection. A Secret never prints its
// value (String, JSON, YAML and slog give "[redacted]" or the reference).
type Secret string

// String returns the reference (env:NAME, file:PATH) or "[redacted]".
func (s Secret) String() string { return kafkasec.Secret(s).String() }

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return kafkasec.Secret(s).GoString() }

// MarshalText redacts the value in JSON, YAML and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return kafkasec.Secret(s).MarshalText() }

// LogValue redacts the value in slog output.
func (s Secret) LogValue() slog.Value { return kafkasec.Secret(s).LogValue() }

// security converts kafka.tls and kafka.sasl for kafkasec.
func (k *KafkaConfig) security() kafkasec.Config {
	return kafkasec.Config{
		TLS: kafkasec.TLS{
			Enabled: k.TLS.Enabled, CAFile: k.TLS.CAFile, CertFile: k.TLS.CertFile, KeyFile: k.TLS.KeyFile,
			ServerName: k.TLS.ServerName, InsecureSkipVerify: k.TLS.InsecureSkipVerify,
		},
		SASL: kafkasec.SASL{
			Mechanism: k.SASL.Mechanism, Username: k.SASL.Username,
			Password: kafkasec.Secret(k.SASL.Password), Token: kafkasec.Secret(k.SASL.Token),
			AccessKey: kafkasec.Secret(k.SASL.AccessKey), SecretKey: kafkasec.Secret(k.SASL.SecretKey),
			SessionToken: kafkasec.Secret(k.SASL.SessionToken),
		},
	}
}

// kafkaClient is what every Kafka client of the host starts from
// (kclient): the brokers, the client id, the logger, and TLS and SASL.
func (c *Config) kafkaClient(brokers []string, log *slog.Logger) (kclient.Config, error) {
	sec, err := c.Kafka.security().Opts()
	if err != nil {
		return kclient.Config{}, fmt.Errorf("kafka security: %w", err)
	}
	return kclient.Config{Brokers: brokers, ClientID: c.Kafka.ClientID, Logger: log, Security: sec}, nil
}

// reachKafka waits up to wait for the brokers (kclient.Reach) and turns an
// error that proves a wrong setting (TLS, SASL) into one line naming the
// setting to change (kafkasec.Explain).
func (c *Config) reachKafka(ctx context.Context, kafka kclient.Config, wait time.Duration, log *slog.Logger) error {
	err := kclient.Reach(ctx, kafka, wait, log)
	if err == nil {
		return nil
	}
	var unreachable *kclient.UnreachableError
	if errors.As(err, &unreachable) {
		return err
	}
	return kafkasec.Explain(err, kafka.Brokers, c.Kafka.security())
}

// securityWarnings are the settings that work but expose the connection:
// New logs each one.
func (k *KafkaConfig) securityWarnings() []string {
	var w []string
	if k.TLS.Enabled && k.TLS.InsecureSkipVerify {
		w = append(w, "kafka.tls.insecure_skip_verify: the brokers' certificates are not checked; anyone on the path can read and change the traffic (development only)")
	}
	if mech := strings.ToUpper(k.SASL.Mechanism); mech == kafkasec.Plain && !k.TLS.Enabled {
		w = append(w, "kafka.sasl.mechanism PLAIN without kafka.tls: the password crosses the network in clear text")
	}
	return w
}
