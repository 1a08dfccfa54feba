package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// enrichPipeline is plugins/enrich reading orders from p.in, joined with
// a global table "customers" of its own topic; misses go to missing.
func enrichPipeline(t *testing.T) (p *pipeline, customers, missing string) {
	p = newPipeline(t, wasmbuild.Build(t, "./plugins/enrich"), OnErrorFail)
	customers, missing = p.b.Name(t, "customers"), p.b.Name(t, "missing")
	p.b.CreateTopic(t, customers, 2, map[string]string{"cleanup.policy": "compact"})
	p.b.CreateTopic(t, missing, 1, nil)
	pc := &p.cfg.Processors[0]
	pc.Tables = map[string]string{"customers": customers}
	pc.Outputs = map[string]OutputConfig{"out": {Topic: p.out}, "missing": {Topic: missing}}
	pc.Config = map[string]any{"table": "customers", "key_field": "customer_id", "as": "customer", "missing": "missing"}
	return p, customers, missing
}

func customer(topic, id, value string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(id), Timestamp: time.Now()}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func (p *pipeline) order(t *testing.T, id, customerID string) {
	p.b.Produce(t, &kgo.Record{Topic: p.in, Key: []byte(id), Timestamp: time.Now(),
		Value: []byte(`{"order":"` + id + `","customer_id":"` + customerID + `"}`)})
}

// values are the committed records of topic, key -> value.
func (p *pipeline) values(t *testing.T, topic string) map[string]string {
	return latest(p.b.ReadCommitted(t, topic, 30*time.Second))
}

// waitTable waits until the host's table of topic has want for key ("" =
// absent).
func waitTable(t *testing.T, h *Host, topic, key, want string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		v, ok, err := h.tables[topic].Get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if (want == "" && !ok) || (ok && string(v) == want) {
			return nil
		}
		return fmt.Errorf("table %s key %s = %q (found %v), want %q", topic, key, v, ok, want)
	})
}

// A stream-table join through the host: orders enriched from a global
// table loaded before processing starts; an update and a tombstone show in
// later lookups; a restart on the same state directory reads only the
// table's tail; an empty state directory rebuilds it.
func TestGlobalTableEnrichment(t *testing.T) {
	p, customers, missing := enrichPipeline(t)
	p.b.Produce(t, customer(customers, "c1", `{"name":"Ann"}`), customer(customers, "c2", `{"name":"Bob"}`))
	dirA := t.TempDir()
	p.cfg.State.Dir = dirA

	h, stop := p.run(t)
	p.order(t, "o1", "c1")
	p.order(t, "o2", "c9")
	p.waitProcessed(t)
	if !h.Ready() {
		t.Fatal("processed records but not ready")
	}
	out := p.values(t, p.out)
	if out["o1"] != `{"order":"o1","customer_id":"c1","customer":{"name":"Ann"}}` {
		t.Fatalf("o1 = %s", out["o1"])
	}
	if m := p.values(t, missing); m["o2"] != `{"order":"o2","customer_id":"c9"}` {
		t.Fatalf("missing: %v", m)
	}

	// An update and a tombstone, then orders that see them.
	p.b.Produce(t, customer(customers, "c1", `{"name":"Ann","tier":"gold"}`), customer(customers, "c2", ""))
	waitTable(t, h, customers, "c1", `{"name":"Ann","tier":"gold"}`)
	waitTable(t, h, customers, "c2", "")
	p.order(t, "o3", "c1")
	p.order(t, "o4", "c2")
	p.waitProcessed(t)
	if out := p.values(t, p.out); out["o3"] != `{"order":"o3","customer_id":"c1","customer":{"name":"Ann","tier":"gold"}}` {
		t.Fatalf("o3 = %s", out["o3"])
	}
	if m := p.values(t, missing); m["o4"] != `{"order":"o4","customer_id":"c2"}` {
		t.Fatalf("after the tombstone, missing: %v", m)
	}
	if n := h.tables[customers].Applied(); n != 4 {
		t.Fatalf("first run applied %d table records, want 4", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Restart on the same state: only the record written meanwhile is read.
	p.b.Produce(t, customer(customers, "c3", `{"name":"Cy"}`))
	h, stop = p.run(t)
	p.order(t, "o5", "c3")
	p.waitProcessed(t)
	if n := h.tables[customers].Applied(); n != 1 {
		t.Fatalf("restart applied %d table records, want only the 1 of the tail", n)
	}
	if out := p.values(t, p.out); out["o5"] != `{"order":"o5","customer_id":"c3","customer":{"name":"Cy"}}` {
		t.Fatalf("o5 = %s", out["o5"])
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// An empty state directory: the whole topic is read again.
	p.cfg.State.Dir = t.TempDir()
	h, stop = p.run(t)
	p.order(t, "o6", "c1")
	p.waitProcessed(t)
	if n := h.tables[customers].Applied(); n != 5 {
		t.Fatalf("rebuild applied %d table records, want all 5", n)
	}
	if out := p.values(t, p.out); out["o6"] != `{"order":"o6","customer_id":"c1","customer":{"name":"Ann","tier":"gold"}}` {
		t.Fatalf("o6 = %s", out["o6"])
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A table topic that does not exist is refused at start, naming the
// table, unless create_topics creates it (compacted).
func TestGlobalTableTopicMustExist(t *testing.T) {
	p, _, _ := enrichPipeline(t)
	gone := p.b.Name(t, "nocustomers")
	p.cfg.Processors[0].Tables = map[string]string{"customers": gone}
	p.cfg.State.Dir = t.TempDir()
	_, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), `table "customers" of processor "proc"`) {
		t.Fatalf("New with a missing table topic: %v", err)
	}
	p.cfg.Kafka.CreateTopics = true
	h, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Ready() {
		t.Fatal("ready before the table was loaded")
	}
	if policy := topicConfig(t, p, gone, "cleanup.policy"); policy != "compact" {
		t.Fatalf("created table topic has cleanup.policy %q, want compact", policy)
	}
}

func topicConfig(t *testing.T, p *pipeline, topic, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := p.b.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

func TestGlobalTableConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		tables map[string]string
		want   string
	}{
		{map[string]string{"counts": "t"}, `processors[0].tables.counts: table name "counts" is also one of the processor's stores`},
		{map[string]string{"out": "t"}, `processors[0].tables.out: table name "out" is also one of the processor's outputs`},
		{map[string]string{"_x": "t"}, `processors[0].tables._x: table name "_x": names starting with _ are the host's`},
		{map[string]string{"a b": "t"}, `processors[0].tables.a b: table name "a b" must be made of`},
		{map[string]string{"customers": "bad topic"}, `processors[0].tables.customers: "bad topic" is not a valid topic name`},
	} {
		cfg := &Config{AppID: "app", Processors: []ProcessorConfig{{Name: "p", Plugin: "x.wasm", Inputs: []string{"in"},
			Outputs: map[string]OutputConfig{"out": {Topic: "o"}}, Stores: []string{"counts"}, Tables: tc.tables}}}
		cfg.ApplyDefaults()
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.tables, err, tc.want)
		}
	}
}
