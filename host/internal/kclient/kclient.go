// Package kclient builds the options every Kafka client of the host starts
// from: the runner's group member and producer, the restorer's consumers
// and admin client, the control-topic reader and publisher, the topic
// admin of startup and deploy, and the group-protocol probe. What a
// deployment must set once for all of them (brokers, client id, logging
// and, later, TLS and SASL) is set here and nowhere else.
package kclient

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// Config is what every client of one host shares.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientID is sent to the brokers; "" leaves franz-go's default.
	ClientID string
	// Logger receives franz-go's log lines (see NewLogger); nil: none.
	Logger *slog.Logger
	// Security holds the options that secure the connection (kgo.DialTLSConfig,
	// kgo.SASL), given to every client. Empty: plaintext, no authentication.
	Security []kgo.Opt
}

// MetadataMinAge is the kgo.MetadataMinAge of every client (Opts): the
// least time between two of its metadata requests, 5 s by default in
// franz-go. franz-go waits for a metadata refresh both before it answers a
// repeated topic listing from anything but its cache and before it resends
// a produce batch the broker asked it to retry, so at 5 s:
//   - a listing of a topic created a moment before (topics.Ensure at
//     startup, the control topic's EnsureTopic and its reader) that came
//     before the topic reached the broker's metadata held its caller 5 s
//     (about one process start in ten on a busy Kafka broker);
//   - a produce answered with a retriable error stalled its partition, and
//     so the commit point's flush, up to 5 s. On Kafka 4 with transactions
//     v2 the first produce of a transaction to a partition is sometimes
//     answered CONCURRENT_TRANSACTIONS while the previous transaction's
//     markers are written: about one run in seven of the benchmark's word
//     count met it, and lost 4.5 s to it (RATIONALE.md, "Kafka I/O").
const MetadataMinAge = 250 * time.Millisecond

// Opts returns the base options followed by extra (later options win, so
// extra may override the client id, say).
func (c Config) Opts(extra ...kgo.Opt) []kgo.Opt {
	opts := make([]kgo.Opt, 0, 4+len(c.Security)+len(extra))
	opts = append(opts, kgo.SeedBrokers(c.Brokers...), kgo.MetadataMinAge(MetadataMinAge))
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(NewLogger(c.Logger)))
	}
	opts = append(opts, c.Security...)
	return append(opts, extra...)
}

// NewClient makes a client from the base options and extra.
func (c Config) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(c.Opts(extra...)...)
}

// NewLogger routes franz-go's log lines to l through franz-go's kslog
// plugin. franz-go logs every step of a rebalance at info: those lines go
// to debug, so a host at info logs only franz-go's warnings and errors.
// Messages are prefixed "kafka: ".
func NewLogger(l *slog.Logger) kgo.Logger {
	return kslog.New(slog.New(demoted{l.Handler()}))
}

// demoted is a slog handler that logs info records at debug.
type demoted struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, demote(r.Level), "kafka: "+r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(as)} }
func (d demoted) WithGroup(name string) slog.Handler    { return demoted{d.h.WithGroup(name)} }
