// The order-enrichment example, run the way its README says: its own
// pipeline.yaml, with the bundled plugin where it names it.
package orderenrichment_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

var plugins = map[string]string{"bin/plugins/enrich.wasm": "./plugins/enrich"}

// topics are the example's topics as the config names them.
type topics struct{ orders, customers, enriched, unknown string }

func topicsOf(cfg *host.Config) topics {
	p := cfg.Processors[0]
	return topics{orders: p.Inputs[0], customers: p.Tables["customers"], enriched: p.Outputs["out"].Topic, unknown: p.Outputs["missing"].Topic}
}

func rec(topic, key, value string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Timestamp: time.Now()}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func order(tp topics, id, customer string) *kgo.Record {
	return rec(tp.orders, id, `{"order":"`+id+`","customer_id":"`+customer+`","total":30}`)
}

// runExample writes two customers before the host runs (the table is
// loaded before any order is processed), joins two orders, then updates a
// customer and checks that later orders see the update.
func runExample(t *testing.T, cfg *host.Config, h *host.Host, produce func(...*kgo.Record), read func(string) []*kgo.Record) {
	tp := topicsOf(cfg)
	produce(rec(tp.customers, "c1", `{"name":"Ann"}`), rec(tp.customers, "c2", `{"name":"Bob"}`))
	defer exampletest.Run(t, h)()
	produce(order(tp, "o1", "c1"), order(tp, "o2", "c9"))
	wait(t, read, tp.enriched, "o1", `{"order":"o1","customer_id":"c1","total":30,"customer":{"name":"Ann"}}`)
	wait(t, read, tp.unknown, "o2", `{"order":"o2","customer_id":"c9","total":30}`)

	// The table follows its topic: orders after an update see it.
	produce(rec(tp.customers, "c1", `{"name":"Ann","tier":"gold"}`))
	want := `,"customer":{"name":"Ann","tier":"gold"}}`
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		id := "u" + strconv.Itoa(i)
		produce(order(tp, id, "c1"))
		time.Sleep(200 * time.Millisecond)
		for _, r := range read(tp.enriched) {
			if strings.HasSuffix(string(r.Value), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no order saw the customer's update within 60s")
		}
	}
}

// wait waits until topic has value want under key.
func wait(t *testing.T, read func(string) []*kgo.Record, topic, key, want string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		var got []string
		for _, r := range read(topic) {
			if string(r.Key) == key {
				got = append(got, string(r.Value))
			}
		}
		if len(got) > 1 {
			t.Fatalf("%s key %s: %q, want once %s", topic, key, got, want)
		}
		if len(got) != 1 || got[0] != want {
			return fmt.Errorf("%s key %s: %q, want once %s", topic, key, got, want)
		}
		return nil
	})
}

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.Setup(t, "order-enrichment", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg)
	runExample(t, cfg, h, produce, read)
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.Setup(t, "order-enrichment", plugins, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")})
	// A shared real broker keeps topics between runs: this run's app and
	// topics get unique names; everything else is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	p := &cfg.Processors[0]
	orders, customers := b.Name(t, "orders"), b.Name(t, "customers")
	enriched, unknown := b.Name(t, "orders-enriched"), b.Name(t, "orders-unknown-customer")
	b.CreateTopic(t, orders, 3, nil)
	b.CreateTopic(t, customers, 2, map[string]string{"cleanup.policy": "compact"})
	b.CreateTopic(t, enriched, 3, nil)
	b.CreateTopic(t, unknown, 1, nil)
	p.Inputs = []string{orders}
	p.Tables["customers"] = customers
	p.Outputs["out"], p.Outputs["missing"] = host.OutputConfig{Topic: enriched}, host.OutputConfig{Topic: unknown}
	h, produce, read := exampletest.OnTestBroker(t, b, cfg)
	runExample(t, cfg, h, produce, read)
}
