package kclient

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Every client gets the brokers, the client id, the logger, the security
// options and MetadataMinAge (a produce retry waits for a refresh: not
// franz-go's 5 s); extra options come last and win.
func TestOpts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := Config{Brokers: []string{"127.0.0.1:1"}, ClientID: "app", Logger: log,
		Security: []kgo.Opt{kgo.DialTimeout(1234)}}
	cl, err := c.NewClient(kgo.ClientID("override"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.SeedBrokers); !equal(got.([]string), c.Brokers) {
		t.Errorf("seed brokers %v, want %v", got, c.Brokers)
	}
	if got := cl.OptValue(kgo.ClientID); got != "override" {
		t.Errorf("client id %v, want the extra option's", got)
	}
	if got := cl.OptValue(kgo.DialTimeout); got != time.Duration(1234) {
		t.Errorf("dial timeout %v: the security options were not applied", got)
	}
	if cl.OptValue(kgo.WithLogger) == nil {
		t.Error("no logger")
	}
	if got := cl.OptValue(kgo.MetadataMinAge); got != MetadataMinAge {
		t.Errorf("metadata min age %v, want %v", got, MetadataMinAge)
	}
	if cl2, _ := (Config{Brokers: c.Brokers}).NewClient(); cl2.OptValue(kgo.ClientID) != "kgo" {
		t.Errorf("an empty ClientID must leave franz-go's default, got %v", cl2.OptValue(kgo.ClientID))
	} else {
		cl2.Close()
	}
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// franz-go's info lines (every rebalance step) are logged at debug; its
// warnings stay warnings; every line says it comes from Kafka.
func TestLoggerDemotesInfo(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if l.Level() != kgo.LogLevelWarn {
		t.Errorf("level %v at slog info, want warn", l.Level())
	}
	l.Log(kgo.LogLevelInfo, "assigned", "group", "g")
	l.Log(kgo.LogLevelWarn, "broker gone", "broker", 1)
	out := buf.String()
	if strings.Contains(out, "assigned") || !strings.Contains(out, `level=WARN msg="kafka: broker gone" broker=1`) {
		t.Errorf("log at info:\n%s", out)
	}
	buf.Reset()
	l = NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if l.Level() != kgo.LogLevelDebug {
		t.Errorf("level %v at slog debug, want debug", l.Level())
	}
	l.Log(kgo.LogLevelInfo, "assigned", "group", "g")
	if !strings.Contains(buf.String(), `level=DEBUG msg="kafka: assigned" group=g`) {
		t.Errorf("log at debug:\n%s", buf.String())
	}
}
