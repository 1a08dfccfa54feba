package runner

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// closeCounter counts closed clients (a kgo HookClientClosed).
type closeCounter struct{ n atomic.Int32 }

func (c *closeCounter) OnClientClosed(*kgo.Client) { c.n.Add(1) }

// Every error return of New after the restorer exists closes it (it holds
// a client). The restorer's client is the only one that sees the hook.
func TestNewClosesRestorerOnError(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cases := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"group protocol", func(o *Options) { o.GroupProtocol = GroupProtocol(9) }, "group protocol"},
		{"client at_least_once", func(o *Options) {
			o.ExtraOpts = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}
		}, "kafka client"},
		{"client exactly_once", func(o *Options) {
			o.Guarantee, o.TransactionalID = ExactlyOnce, "txn"
			o.ExtraOpts = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}
		}, "kafka client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			closed := &closeCounter{}
			opts := Options{
				AppID:         "app",
				Kafka:         kclient.Config{Brokers: []string{"127.0.0.1:1"}}, // never contacted
				GroupProtocol: ProtocolConsumer,
				Processors: []ProcessorSpec{{
					Name: "p", Inputs: []string{"in"}, Plugin: &goPlugin{},
					Stores: []string{"s"}, Changelogs: []string{"app-s-changelog"},
				}},
				State:   db,
				Restore: restore.Config{Kafka: kclient.Config{Brokers: []string{"127.0.0.1:1"}, Security: []kgo.Opt{kgo.WithHooks(closed)}}},
				Logger:  testLogger(t),
			}
			c.mutate(&opts)
			r, err := New(context.Background(), opts)
			if err == nil {
				r.cl.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("New: %v; want an error about the %s", err, c.wantErr)
			}
			if n := closed.n.Load(); n != 1 {
				t.Fatalf("restorer client closed %d times after New failed, want 1", n)
			}
		})
	}
}
