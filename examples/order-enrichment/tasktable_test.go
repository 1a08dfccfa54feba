package orderenrichment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

func taskTableTopics(cfg *host.Config) topics {
	p := cfg.Processors[0]
	return topics{orders: p.Inputs[0], customers: p.TaskTables["customers"], enriched: p.Outputs["out"].Topic, unknown: p.Outputs["missing"].Topic}
}

// runTaskTable is runExample for pipeline-task-table.yaml: orders are
// keyed by customer id, so each lands in the task holding its customer.
// An update of a customer is seen by the orders written after it.
func runTaskTable(t *testing.T, cfg *host.Config, h *host.Host, produce func(...*kgo.Record), read func(string) []*kgo.Record) {
	tp := taskTableTopics(cfg)
	byCustomer := func(id, customer string) *kgo.Record {
		return rec(tp.orders, customer, `{"order":"`+id+`","customer_id":"`+customer+`","total":30}`)
	}
	produce(rec(tp.customers, "c1", `{"name":"Ann"}`), rec(tp.customers, "c2", `{"name":"Bob"}`))
	defer exampletest.Run(t, h)()
	produce(byCustomer("o1", "c1"), byCustomer("o2", "c9"))
	wait(t, read, tp.enriched, "c1", `{"order":"o1","customer_id":"c1","total":30,"customer":{"name":"Ann"}}`)
	wait(t, read, tp.unknown, "c9", `{"order":"o2","customer_id":"c9","total":30}`)

	time.Sleep(5 * time.Millisecond) // the update's timestamp is after o1's
	produce(rec(tp.customers, "c2", `{"name":"Bob","tier":"gold"}`))
	time.Sleep(5 * time.Millisecond)
	produce(byCustomer("o3", "c2"))
	wait(t, read, tp.enriched, "c2", `{"order":"o3","customer_id":"c2","total":30,"customer":{"name":"Bob","tier":"gold"}}`)
}

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestTaskTableAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.SetupFile(t, "order-enrichment", "pipeline-task-table.yaml", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg)
	runTaskTable(t, cfg, h, produce, read)
}

// The same against the test broker (real Kafka under make test).
func TestTaskTableOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.SetupFile(t, "order-enrichment", "pipeline-task-table.yaml", plugins,
		[]string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")})
	cfg.AppID = b.Name(t, cfg.AppID)
	p := &cfg.Processors[0]
	orders, customers := b.Name(t, "orders"), b.Name(t, "customers")
	enriched, unknown := b.Name(t, "orders-enriched"), b.Name(t, "orders-unknown-customer")
	b.CreateTopic(t, orders, 3, nil)
	b.CreateTopic(t, customers, 3, map[string]string{"cleanup.policy": "compact"})
	b.CreateTopic(t, enriched, 3, nil)
	b.CreateTopic(t, unknown, 1, nil)
	p.Inputs = []string{orders}
	p.TaskTables["customers"] = customers
	p.Outputs["out"], p.Outputs["missing"] = host.OutputConfig{Topic: enriched}, host.OutputConfig{Topic: unknown}
	h, produce, read := exampletest.OnTestBroker(t, b, cfg)
	runTaskTable(t, cfg, h, produce, read)
}
