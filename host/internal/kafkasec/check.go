package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CheckTimeout bounds Check: long enough for a TLS handshake and SASL
// exchange with a remote cluster, short enough that a wrong setting is
// reported before an operator gives up waiting.
const CheckTimeout = 20 * time.Second

// Check connects to the brokers with the config's options and asks for the
// cluster metadata (which, unlike ApiVersions, needs a finished SASL
// authentication). It returns nil or one line saying what is wrong and
// which setting to change (Explain). A broker that cannot be reached yet
// (refused, unresolvable, timed out: a cluster still starting) is tried
// again until CheckTimeout; an answer that proves a wrong setting (TLS,
// SASL) is reported at once.
func Check(ctx context.Context, brokers []string, c Config, extra ...kgo.Opt) error {
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	var lastDial error // the latest failed dial: what to report at the deadline
	for {
		err := checkOnce(ctx, brokers, append(opts, extra...))
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && lastDial != nil:
			return Explain(lastDial, brokers, c)
		case !unreachable(err) || ctx.Err() != nil:
			return Explain(err, brokers, c)
		}
		lastDial = err
		select {
		case <-ctx.Done():
			return Explain(lastDial, brokers, c)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkOnce makes one client and one metadata request, without retries:
// the first error is the one that says what is wrong.
func checkOnce(ctx context.Context, brokers []string, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequestRetries(0),
		kgo.DialTimeout(5 * time.Second),
	}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: no topic is needed to prove access
	_, err = req.RequestWith(ctx, cl)
	return err
}

// unreachable reports a dial that failed: nothing was learned about the
// security settings, and a later try may get through.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Explain turns a connection error into one line naming the cause and the
// setting that fixes it. Errors it does not recognize keep their text.
func Explain(err error, brokers []string, c Config) error {
	at := strings.Join(brokers, ",")
	mech := strings.ToUpper(c.SASL.Mechanism)
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		recErr    tls.RecordHeaderError
		certErr   *tls.CertificateVerificationError
		netOp     *net.OpError
		firstEOF  *kgo.ErrFirstReadEOF
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &certErr) && errors.As(certErr.Err, &unknownCA):
		where := "the system's roots"
		if c.TLS.CAFile != "" {
			where = c.TLS.CAFile
		}
		return fmt.Errorf("kafka: TLS to %s: the broker's certificate is signed by an authority not in %s (set kafka.tls.ca_file to the CA that signed it)", at, where)
	case errors.As(err, &hostErr):
		return fmt.Errorf("kafka: TLS to %s: the broker's certificate is not valid for %q (set kafka.tls.server_name to a name it carries)", at, hostErr.Host)
	case errors.As(err, &recErr):
		return fmt.Errorf("kafka: TLS to %s: the broker did not answer with TLS (a plaintext listener? use its TLS port or set kafka.tls.enabled: false)", at)
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("kafka: SASL %s authentication of user %q at %s failed: wrong username or password (kafka.sasl.username, kafka.sasl.password)", mech, c.SASL.Username, at)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("kafka: the brokers at %s do not accept SASL mechanism %s (kafka.sasl.mechanism)", at, mech)
	case errors.Is(err, ErrSecret):
		return fmt.Errorf("kafka: %v", err)
	case errors.As(err, &firstEOF) || (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)) && mech == "":
		// franz-go's ErrFirstReadEOF: the broker hung up on the very first
		// request (ApiVersions), the sign of a TLS listener spoken to in
		// plaintext, or of a listener that requires SASL.
		switch {
		case !c.TLS.Enabled && mech == "":
			return fmt.Errorf("kafka: the broker at %s closed the connection without answering: if the listener uses TLS set kafka.tls.enabled: true, if it needs SASL set kafka.sasl", at)
		case !c.TLS.Enabled:
			return fmt.Errorf("kafka: the broker at %s closed the connection without answering: if the listener uses TLS set kafka.tls.enabled: true", at)
		case mech == "":
			return fmt.Errorf("kafka: the broker at %s closed the connection without answering: if the listener needs SASL set kafka.sasl", at)
		}
		return fmt.Errorf("kafka: the broker at %s closed the connection without answering (check the listener's security protocol)", at)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		// A hang-up after the first request, with SASL configured: some
		// brokers (kfake) close the connection on failed credentials
		// rather than answer SASL_AUTHENTICATION_FAILED.
		return fmt.Errorf("kafka: SASL %s authentication of user %q at %s failed: the broker closed the connection (wrong username or password? kafka.sasl.username, kafka.sasl.password)", mech, c.SASL.Username, at)
	case strings.Contains(err.Error(), "appear to be a tls alert record"):
		// franz-go's guess (text only, no error type) when a plaintext
		// request is answered with a TLS alert, as real Kafka does.
		return fmt.Errorf("kafka: the broker at %s answered a plaintext request with a TLS alert: the listener uses TLS, set kafka.tls.enabled: true", at)
	case errors.As(err, &netOp) && netOp.Op == "dial":
		return fmt.Errorf("cannot reach Kafka at %s: %v (kafka.brokers)", at, netOp.Err)
	case c.TLS.Enabled && errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "unable to dial"):
		// The TLS handshake never got a ServerHello: a plaintext listener
		// reads the ClientHello as the start of a request and waits.
		return fmt.Errorf("kafka: TLS to %s: the broker did not answer the TLS handshake (a plaintext listener? use its TLS port or set kafka.tls.enabled: false)", at)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("kafka: no answer from %s within %s (kafka.brokers; is the listener's security protocol the one configured?)", at, CheckTimeout)
	}
	return fmt.Errorf("kafka: connecting to %s: %s", at, strings.ReplaceAll(err.Error(), "\n", " "))
}
