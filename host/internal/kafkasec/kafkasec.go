// Package kafkasec turns the kafka.tls and kafka.sasl settings into franz-go
// client options: TLS with system roots or a CA file, an optional client
// certificate, and SASL PLAIN, SCRAM-SHA-256/512, OAUTHBEARER and AWS MSK
// IAM through franz-go's pkg/sasl packages. Every Kafka client the host
// makes gets the same options (Opts), so a secured cluster is reached by
// the consumer, the producer, the restorer, the admin and control clients
// alike.
//
// Credentials are Secrets (literal, env:NAME or file:PATH), resolved at
// each authentication so a rotated token or password is used by the next
// connection, and never printed.
package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is the security of the connections to Kafka. The zero value is a
// plaintext, unauthenticated connection.
type Config struct {
	TLS  TLS
	SASL SASL
}

// TLS configures encrypted connections.
type TLS struct {
	// Enabled turns TLS on. The other fields need it.
	Enabled bool
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates. "" means the system's roots.
	CAFile string
	// CertFile and KeyFile are the client's PEM certificate and key, for
	// brokers that require client authentication (mTLS). Both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name the broker's certificate must carry. ""
	// means the host name of the address dialed.
	ServerName string
	// InsecureSkipVerify accepts any broker certificate: development only,
	// it defeats what TLS is for.
	InsecureSkipVerify bool
}

// SASL mechanisms.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
	AWSMSKIAM   = "AWS_MSK_IAM"
)

// Mechanisms lists the supported SASL mechanisms.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer, AWSMSKIAM}

// SASL configures authentication.
type SASL struct {
	// Mechanism is "" (no SASL), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
	// OAUTHBEARER or AWS_MSK_IAM (case does not matter).
	Mechanism string
	// Username and Password are for PLAIN and SCRAM.
	Username string
	Password Secret
	// Token is the OAUTHBEARER token; a file: reference is read again at
	// every authentication, so an external refresher can rotate it.
	Token Secret
	// AccessKey, SecretKey and SessionToken are the AWS credentials for
	// AWS_MSK_IAM; unset, they come from AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	AccessKey    Secret
	SecretKey    Secret
	SessionToken Secret
}

// Enabled reports whether anything differs from a plaintext connection.
func (c Config) Enabled() bool { return c.TLS.Enabled || c.SASL.Mechanism != "" }

// FieldError is one problem, with the field path below kafka
// ("tls.ca_file", "sasl.password").
type FieldError struct {
	Path, Problem string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Problem }

// Validate returns every problem of the config. It reads the files and
// resolves the secrets it names, so a missing CA file or unset variable is
// reported before any connection is tried.
func (c Config) Validate() []FieldError {
	var errs []FieldError
	bad := func(path, format string, args ...any) {
		errs = append(errs, FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
	}
	t := c.TLS
	if !t.Enabled {
		for _, f := range []struct {
			name string
			set  bool
		}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
			{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				bad("tls."+f.name, "set, but tls.enabled is false (set kafka.tls.enabled: true)")
			}
		}
	} else {
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad("tls.cert_file", "cert_file and key_file go together (client certificate and its key)")
		}
		if t.CAFile != "" {
			if _, err := loadCA(t.CAFile); err != nil {
				bad("tls.ca_file", "%v", err)
			}
		}
		if t.CertFile != "" && t.KeyFile != "" {
			if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
				bad("tls.cert_file", "loading the client certificate and key: %v", err)
			}
		}
	}

	s := c.SASL
	secret := func(name string, v Secret, required bool) {
		if !v.IsSet() {
			if required {
				bad("sasl."+name, "required for mechanism %s", s.Mechanism)
			}
			return
		}
		if _, err := v.Resolve(); err != nil {
			bad("sasl."+name, "%v", err)
		}
	}
	switch mech := strings.ToUpper(s.Mechanism); mech {
	case "":
		for _, f := range []struct {
			name string
			set  bool
		}{{"username", s.Username != ""}, {"password", s.Password.IsSet()}, {"token", s.Token.IsSet()},
			{"access_key", s.AccessKey.IsSet()}, {"secret_key", s.SecretKey.IsSet()}, {"session_token", s.SessionToken.IsSet()}} {
			if f.set {
				bad("sasl."+f.name, "set, but sasl.mechanism is empty (one of %s)", strings.Join(Mechanisms, ", "))
			}
		}
	case Plain, ScramSHA256, ScramSHA512:
		if s.Username == "" {
			bad("sasl.username", "required for mechanism %s", mech)
		}
		secret("password", s.Password, true)
	case OAuthBearer:
		secret("token", s.Token, true)
	case AWSMSKIAM:
		if s.AccessKey.IsSet() != s.SecretKey.IsSet() {
			bad("sasl.access_key", "access_key and secret_key go together")
		}
		if !s.AccessKey.IsSet() && (os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "") {
			bad("sasl.access_key", "required for AWS_MSK_IAM (or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
		}
		secret("access_key", s.AccessKey, false)
		secret("secret_key", s.SecretKey, false)
		secret("session_token", s.SessionToken, false)
	default:
		bad("sasl.mechanism", "%q is not one of %s", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
	return errs
}

// Opts returns the franz-go options for the config: kgo.DialTLSConfig and
// kgo.SASL. It returns nil for a plaintext, unauthenticated config. Call
// Validate first; Opts reports only the first problem.
func (c Config) Opts() ([]kgo.Opt, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kafka.%w", errs[0])
	}
	var opts []kgo.Opt
	if c.TLS.Enabled {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL.Mechanism != "" {
		opts = append(opts, kgo.SASL(c.SASL.mechanism()))
	}
	return opts, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// config builds the TLS client config. franz-go fills in ServerName from
// the dialed host when it is empty.
func (t TLS) config() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // explicit, documented development switch
	}
	if t.CAFile != "" {
		pool, err := loadCA(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// mechanism returns the SASL mechanism. Each one resolves its secrets in
// the function franz-go calls at every authentication.
func (s SASL) mechanism() sasl.Mechanism {
	user := s.Username
	password := func(context.Context) (string, error) {
		p, err := s.Password.Resolve()
		if err != nil {
			return "", fmt.Errorf("kafka.sasl.password: %w", err)
		}
		return p, nil
	}
	switch strings.ToUpper(s.Mechanism) {
	case Plain:
		return plain.Plain(func(ctx context.Context) (plain.Auth, error) {
			p, err := password(ctx)
			return plain.Auth{User: user, Pass: p}, err
		})
	case ScramSHA256, ScramSHA512:
		fn := func(ctx context.Context) (scram.Auth, error) {
			p, err := password(ctx)
			return scram.Auth{User: user, Pass: p}, err
		}
		if strings.ToUpper(s.Mechanism) == ScramSHA256 {
			return scram.Sha256(fn)
		}
		return scram.Sha512(fn)
	case OAuthBearer:
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := s.Token.Resolve()
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("kafka.sasl.token: %w", err)
			}
			return oauth.Auth{Token: tok}, nil
		})
	case AWSMSKIAM:
		return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
			access, secret, session := s.AccessKey, s.SecretKey, s.SessionToken
			if !access.IsSet() {
				access, secret = "env:AWS_ACCESS_KEY_ID", "env:AWS_SECRET_ACCESS_KEY"
				if os.Getenv("AWS_SESSION_TOKEN") != "" {
					session = "env:AWS_SESSION_TOKEN"
				}
			}
			var a aws.Auth
			var err error
			if a.AccessKey, err = access.Resolve(); err != nil {
				return a, fmt.Errorf("kafka.sasl.access_key: %w", err)
			}
			if a.SecretKey, err = secret.Resolve(); err != nil {
				return a, fmt.Errorf("kafka.sasl.secret_key: %w", err)
			}
			if session.IsSet() {
				if a.SessionToken, err = session.Resolve(); err != nil {
					return a, fmt.Errorf("kafka.sasl.session_token: %w", err)
				}
			}
			return a, nil
		})
	}
	// Validate refuses any other mechanism before Opts gets here.
	panic("kafkasec: unknown SASL mechanism " + s.Mechanism)
}
