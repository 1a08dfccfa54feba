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

// MetadataMinAge is the kgo.MetadataMinAge of the clients that list a
// topic created a moment before, by this process or another, and ask again
// until the listing shows it: topics.Ensure's at startup, the control
// topic's (EnsureTopic and its reader). franz-go answers a repeated listing
// from a cached response younger than the age, 5 s by default, so a first
// listing that came before the new topic reached the broker's metadata
// held the caller for 5 s: TestEnsure took 5 s, and about one process
// start in ten on a busy Kafka broker waited 5.1 s for the control topic.
const MetadataMinAge = 250 * time.Millisecond

// Opts returns the base options followed by extra (later options win, so
// extra may override the client id, say).
func (c Config) Opts(extra ...kgo.Opt) []kgo.Opt {
	opts := make([]kgo.Opt, 0, 3+len(c.Security)+len(extra))
	opts = append(opts, kgo.SeedBrokers(c.Brokers...))
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
