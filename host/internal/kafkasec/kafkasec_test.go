package kafkasec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestSecretNeverPrintsItsValue(t *testing.T) {
	s := Secret("hunter2")
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "password", s)
	js, err := json.Marshal(struct{ P Secret }{s})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{s.String(), fmt.Sprint(s), fmt.Sprintf("%v %s %#v %+v", s, s, s, s), string(js), logged.String()} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("secret value printed: %q", out)
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%q does not say %s", out, Redacted)
		}
	}
	// A reference is not secret: it says where to look.
	if got := Secret("env:KAFKA_PASSWORD").String(); got != "env:KAFKA_PASSWORD" {
		t.Errorf("reference printed as %q", got)
	}
}

func TestSecretResolve(t *testing.T) {
	t.Setenv("WASMSTREAM_TEST_SECRET", "from-env")
	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[Secret]string{"plain": "plain", "env:WASMSTREAM_TEST_SECRET": "from-env", Secret("file:" + f): "from-file"} {
		got, err := in.Resolve()
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []Secret{"env:WASMSTREAM_TEST_UNSET_VAR", Secret("file:" + f + ".missing")} {
		if _, err := in.Resolve(); err == nil {
			t.Errorf("%s resolved", in)
		}
	}
}

func TestValidateNamesFieldPaths(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cfg  Config
		want []string // paths
	}{
		{Config{}, nil},
		{Config{TLS: TLS{CAFile: "x"}}, []string{"tls.ca_file"}},
		{Config{TLS: TLS{Enabled: true, CAFile: notPEM}}, []string{"tls.ca_file"}},
		{Config{TLS: TLS{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}}, []string{"tls.ca_file"}},
		{Config{TLS: TLS{Enabled: true, CertFile: "c.pem"}}, []string{"tls.cert_file"}},
		{Config{SASL: SASL{Mechanism: "GSSAPI"}}, []string{"sasl.mechanism"}},
		{Config{SASL: SASL{Mechanism: "scram-sha-256"}}, []string{"sasl.username", "sasl.password"}},
		{Config{SASL: SASL{Mechanism: Plain, Username: "u", Password: "env:WASMSTREAM_TEST_UNSET_VAR"}}, []string{"sasl.password"}},
		{Config{SASL: SASL{Mechanism: Plain, Username: "u", Password: "p"}}, nil},
		{Config{SASL: SASL{Mechanism: OAuthBearer}}, []string{"sasl.token"}},
		{Config{SASL: SASL{Mechanism: AWSMSKIAM, AccessKey: "a"}}, []string{"sasl.access_key"}},
		{Config{SASL: SASL{Mechanism: AWSMSKIAM, AccessKey: "a", SecretKey: "s"}}, nil},
		{Config{SASL: SASL{Username: "u"}}, []string{"sasl.username"}},
	}
	for i, c := range cases {
		var got []string
		for _, e := range c.cfg.Validate() {
			got = append(got, e.Path)
			if strings.Contains(e.Problem, "\n") {
				t.Errorf("case %d: problem is not one line: %q", i, e.Problem)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("case %d (%+v): paths %v, want %v (%v)", i, c.cfg, got, c.want, c.cfg.Validate())
		}
	}
}

// TestOAuthTokenReadAtEachAuth: the token file is read at every
// authentication, so an external refresher can rotate it under a running
// process.
func TestOAuthTokenReadAtEachAuth(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	c := Config{SASL: SASL{Mechanism: OAuthBearer, Token: Secret("file:" + f)}}
	for _, tok := range []string{"token-one", "token-two"} {
		if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, first, err := c.SASL.mechanism().Authenticate(context.Background(), "broker:9093")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(first, []byte("auth=Bearer "+tok+"\x01")) {
			t.Fatalf("first message %q does not carry %s", first, tok)
		}
	}
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SASL.mechanism().Authenticate(context.Background(), "broker:9093"); err == nil || !strings.Contains(err.Error(), "kafka.sasl.token") {
		t.Fatalf("missing token file: %v", err)
	}
}

func TestOpts(t *testing.T) {
	if opts, err := (Config{}).Opts(); err != nil || len(opts) != 0 {
		t.Fatalf("plaintext: %d opts, %v", len(opts), err)
	}
	for _, mech := range Mechanisms {
		c := Config{TLS: TLS{Enabled: true}, SASL: SASL{Mechanism: strings.ToLower(mech), Username: "u", Password: "p", Token: "t", AccessKey: "a", SecretKey: "s"}}
		opts, err := c.Opts()
		if err != nil || len(opts) != 2 {
			t.Fatalf("%s: %d opts, %v", mech, len(opts), err)
		}
		if got := c.SASL.mechanism().Name(); got != mech {
			t.Errorf("mechanism %s named %s", mech, got)
		}
	}
	if _, err := (Config{SASL: SASL{Mechanism: "nope"}}).Opts(); err == nil || !strings.HasPrefix(err.Error(), "kafka.sasl.mechanism: ") {
		t.Fatalf("bad mechanism: %v", err)
	}
}

// TestCheckWaitsForAStartingBroker: a broker that is not listening yet is
// tried again until it answers (a cluster still starting is not a
// misconfiguration).
func TestCheckWaitsForAStartingBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	started := make(chan *kfake.Cluster, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
		if err != nil {
			t.Error(err)
		}
		started <- c
	}()
	err = Check(context.Background(), []string{fmt.Sprintf("127.0.0.1:%d", port)}, Config{})
	if c := <-started; c != nil {
		defer c.Close()
	}
	if err != nil {
		t.Fatalf("Check gave up on a broker that started 1.5s later: %v", err)
	}
}

// TestCheckTLSToPlaintext: a TLS client at a plaintext listener is told so
// in one line.
func TestCheckTLSToPlaintext(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = Check(context.Background(), c.ListenAddrs(), Config{TLS: TLS{Enabled: true}})
	if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "kafka.tls.enabled: false") {
		t.Fatalf("TLS to a plaintext listener: %v", err)
	}
}
