package kafkasec_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/host/internal/kafkasec"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// The real broker's SASL_SSL listener, as scripts/kafka.sh starts it:
// EnvSASLBrokers is its address, EnvSASLDir the directory holding ca.pem
// (the CA that signed the broker's certificate) and the SCRAM user's
// "scram-user" and "scram-password" files. make test-real sets both.
const (
	EnvSASLBrokers = "WASMSTREAM_TEST_SASL_BROKERS"
	EnvSASLDir     = "WASMSTREAM_TEST_SASL_DIR"
)

// secureBroker is a TLS listener that requires SCRAM authentication: the
// real broker's SASL_SSL listener when the suite runs against real Kafka,
// else a kfake cluster with kfake.TLS and kfake.EnableSASL.
type secureBroker struct {
	addrs      []string
	caFile     string
	user, pass string
	real       bool
}

func newSecureBroker(t *testing.T) *secureBroker {
	t.Helper()
	if os.Getenv(testbroker.EnvBrokers) != "" {
		addr, dir := os.Getenv(EnvSASLBrokers), os.Getenv(EnvSASLDir)
		if addr == "" || dir == "" {
			t.Fatalf("%s is set (real broker) but %s or %s is not: the SASL_SSL tests need the listener scripts/kafka.sh starts (make test-real sets them)",
				testbroker.EnvBrokers, EnvSASLBrokers, EnvSASLDir)
		}
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b))
		}
		t.Logf("SASL_SSL listener of the real broker at %s", addr)
		return &secureBroker{addrs: strings.Split(addr, ","), caFile: filepath.Join(dir, "ca.pem"),
			user: read("scram-user"), pass: read("scram-password"), real: true}
	}
	dir := t.TempDir()
	ca, caKey := newCA(t, dir, "ca.pem")
	certPEM, keyPEM := leafCert(t, ca, caKey)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	sb := &secureBroker{caFile: filepath.Join(dir, "ca.pem"), user: "wasmstream", pass: "s3cret-" + t.Name()}
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser(kafkasec.ScramSHA256, sb.user, sb.pass),
		kfake.Superuser(kafkasec.ScramSHA512, sb.user, sb.pass),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sb.addrs = c.ListenAddrs()
	t.Logf("kfake with TLS and SCRAM at %s", sb.addrs)
	return sb
}

// security is the client side of the listener: TLS with its CA, SCRAM.
func (sb *secureBroker) security(mech string) kafkasec.Config {
	return kafkasec.Config{
		TLS:  kafkasec.TLS{Enabled: true, CAFile: sb.caFile},
		SASL: kafkasec.SASL{Mechanism: mech, Username: sb.user, Password: kafkasec.Secret(sb.pass)},
	}
}

func newCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "wasmstream test CA " + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// leafCert is a server certificate for 127.0.0.1 and localhost.
func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// hostSecurity is sec as host config.
func hostSecurity(sec kafkasec.Config) (host.TLSConfig, host.SASLConfig) {
	return host.TLSConfig{Enabled: sec.TLS.Enabled, CAFile: sec.TLS.CAFile, ServerName: sec.TLS.ServerName},
		host.SASLConfig{Mechanism: sec.SASL.Mechanism, Username: sec.SASL.Username, Password: host.Secret(sec.SASL.Password)}
}

func name(t *testing.T, prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), time.Now().UnixNano())
}

// TestPipelineOverSASLSSL runs a stateful pipeline (exactly_once, the
// statecounter plugin, a store backed by its changelog) through a TLS
// listener that requires SCRAM: the host creates the topics, consumes,
// produces transactionally and commits; a second host on an empty state
// directory then restores the store from its changelog — every client
// (group, producer, restorer, control topic, admin) through TLS and SASL;
// a secured client reads every output. The password comes from a file, as
// an operator would give it.
func TestPipelineOverSASLSSL(t *testing.T) {
	sb := newSecureBroker(t)
	for _, mech := range []string{kafkasec.ScramSHA256, kafkasec.ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			sec := sb.security(mech)
			pwFile := filepath.Join(t.TempDir(), "password")
			if err := os.WriteFile(pwFile, []byte(sb.pass+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sec.SASL.Password = kafkasec.Secret("file:" + pwFile)
			in, out := name(t, "in"), name(t, "out")
			tlsCfg, saslCfg := hostSecurity(sec)
			cfg := &host.Config{
				AppID: name(t, "app"),
				Kafka: host.KafkaConfig{Brokers: sb.addrs, CreateTopics: true, TopicPartitions: 2,
					CommitInterval: 50 * time.Millisecond, TLS: tlsCfg, SASL: saslCfg},
				Processors: []host.ProcessorConfig{{Name: "proc", Plugin: filepath.Join("..", "engine", "testdata", "statecounter.wasm"),
					Inputs: []string{in}, Outputs: map[string]host.OutputConfig{"out": {Topic: out}}, Stores: []string{"counts"}}},
				Runtime: host.RuntimeConfig{CacheDir: "off"},
			}
			cfg.ApplyDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			opts, err := sec.Opts()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(sb.addrs...), kgo.ConsumeTopics(out),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			seen := map[string]bool{}
			produceAndRead := func(from, to int) {
				t.Helper()
				for i := from; i < to; i++ {
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i % 10)), Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
						t.Fatalf("produce over SASL_SSL: %v", err)
					}
				}
				for len(seen) < to {
					fs := cl.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						t.Fatalf("read %d of %d outputs: %v", len(seen), to, err)
					}
					fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume over SASL_SSL: %v", err) })
					fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
				}
			}
			// run starts a host on stateDir and returns its stop function
			// and the changelog records its restores applied.
			run := func(stateDir string) (stop func(), restored *atomic.Int64) {
				t.Helper()
				restored = new(atomic.Int64)
				cfg.State.Dir = stateDir
				h, err := host.New(ctx, cfg, host.WithLogger(testbroker.Logger(t, slog.LevelWarn)),
					host.WithRestoreProgress(func(p host.RestoreProgress) {
						if p.Done {
							restored.Add(p.Restored)
						}
					}))
				if err != nil {
					t.Fatalf("host.New over SASL_SSL: %v", err)
				}
				rctx, cancelRun := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- h.Run(rctx) }()
				return func() {
					cancelRun()
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
					h.Close()
				}, restored
			}

			stop, _ := run(t.TempDir())
			produceAndRead(0, 50)
			stop()
			// An empty state directory: the store comes back from its
			// changelog through the restorer's own (secured) clients.
			stop, restored := run(t.TempDir())
			defer stop()
			produceAndRead(50, 60)
			if restored.Load() == 0 {
				t.Fatal("the second host restored no changelog record over SASL_SSL")
			}
			t.Logf("second host restored %d changelog records over SASL_SSL", restored.Load())
		})
	}
}

// newHostErr returns host.New's error for a config reaching the secured
// listener with the given security.
func newHostErr(t *testing.T, sb *secureBroker, tlsCfg host.TLSConfig, saslCfg host.SASLConfig) error {
	t.Helper()
	cfg := secureConfig(t, sb, tlsCfg, saslCfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := host.New(ctx, cfg, host.WithLogger(testbroker.Logger(t, slog.LevelWarn)))
	if err == nil {
		h.Close()
		t.Fatal("host.New succeeded")
	}
	return err
}

// deployErrs returns the errors of host.Deploy and host.Rollback for a
// config reaching the secured listener with the given security.
func deployErrs(t *testing.T, sb *secureBroker, tlsCfg host.TLSConfig, saslCfg host.SASLConfig) (deploy, rollback error) {
	t.Helper()
	cfg := secureConfig(t, sb, tlsCfg, saslCfg)
	wasm, err := os.ReadFile(cfg.Processors[0].Plugin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := testbroker.Logger(t, slog.LevelWarn)
	if _, deploy = host.Deploy(ctx, cfg, "proc", wasm, "v2", log); deploy == nil {
		t.Fatal("host.Deploy succeeded")
	}
	if _, rollback = host.Rollback(ctx, cfg, "proc", log); rollback == nil {
		t.Fatal("host.Rollback succeeded")
	}
	return deploy, rollback
}

func secureConfig(t *testing.T, sb *secureBroker, tlsCfg host.TLSConfig, saslCfg host.SASLConfig) *host.Config {
	t.Helper()
	cfg := &host.Config{
		AppID: name(t, "app"),
		Kafka: host.KafkaConfig{Brokers: sb.addrs, CreateTopics: true, TLS: tlsCfg, SASL: saslCfg},
		Processors: []host.ProcessorConfig{{Name: "proc", Plugin: filepath.Join("..", "engine", "testdata", "passthrough.wasm"),
			Inputs: []string{name(t, "in")}, Outputs: map[string]host.OutputConfig{"out": {Topic: name(t, "out")}}}},
		Runtime: host.RuntimeConfig{CacheDir: "off"},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSecurityErrors: each misconfiguration fails host.New, and deploy
// and rollback, with one line that names the cause and the setting to
// change, and never the password.
func TestSecurityErrors(t *testing.T) {
	sb := newSecureBroker(t)
	good := sb.security(kafkasec.ScramSHA256)
	check := func(t *testing.T, err error, want ...string) {
		t.Helper()
		msg := err.Error()
		t.Logf("error: %s", msg)
		if strings.Contains(msg, "\n") {
			t.Errorf("error is not one line: %q", msg)
		}
		if strings.Contains(msg, sb.pass) || strings.Contains(msg, "wrong-password") {
			t.Errorf("error shows the password: %q", msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("error %q does not contain %q", msg, w)
			}
		}
	}
	t.Run("wrong password", func(t *testing.T) {
		sec := good
		sec.SASL.Password = "wrong-password"
		tlsCfg, saslCfg := hostSecurity(sec)
		want := []string{"SASL SCRAM-SHA-256 authentication", "wrong username or password", "kafka.sasl.password"}
		check(t, newHostErr(t, sb, tlsCfg, saslCfg), want...)
		deploy, rollback := deployErrs(t, sb, tlsCfg, saslCfg)
		check(t, deploy, want...)
		check(t, rollback, want...)
	})
	t.Run("unknown CA", func(t *testing.T) {
		dir := t.TempDir()
		newCA(t, dir, "other-ca.pem")
		sec := good
		sec.TLS.CAFile = filepath.Join(dir, "other-ca.pem")
		tlsCfg, saslCfg := hostSecurity(sec)
		check(t, newHostErr(t, sb, tlsCfg, saslCfg), "signed by an authority not in", "kafka.tls.ca_file")
		deploy, rollback := deployErrs(t, sb, tlsCfg, saslCfg)
		check(t, deploy, "signed by an authority not in", "kafka.tls.ca_file")
		check(t, rollback, "signed by an authority not in", "kafka.tls.ca_file")
	})
	t.Run("plaintext to TLS", func(t *testing.T) {
		check(t, newHostErr(t, sb, host.TLSConfig{}, host.SASLConfig{}), "the broker at", "kafka.tls.enabled: true")
		deploy, rollback := deployErrs(t, sb, host.TLSConfig{}, host.SASLConfig{})
		check(t, deploy, "the broker at", "kafka.tls.enabled: true")
		check(t, rollback, "the broker at", "kafka.tls.enabled: true")
	})
}
