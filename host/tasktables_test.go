package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// A stream-table join on a task table (#14 item 3): plugins/enrich, as for
// a global table, but the customers topic is co-partitioned with the
// orders (both keyed by customer id) and each task keeps its own
// partition of it in a store of the task. Table records never reach the
// plugin; an update and a tombstone show in later lookups; a restart on
// an empty state directory restores the table from its own topic (there
// is no changelog topic for it) up to the committed offset, and the
// records past it are read in timestamp order with the orders.
func TestTaskTableEnrichment(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/enrich"), OnErrorFail)
	customers, missing := p.b.Name(t, "customers"), p.b.Name(t, "missing")
	p.b.CreateTopic(t, customers, 3, map[string]string{"cleanup.policy": "compact"}) // as many as p.in
	p.b.CreateTopic(t, missing, 1, nil)
	pc := &p.cfg.Processors[0]
	pc.TaskTables = map[string]string{"customers": customers}
	pc.Outputs = map[string]OutputConfig{"out": {Topic: p.out}, "missing": {Topic: missing}}
	pc.Config = map[string]any{"table": "customers", "key_field": "customer_id", "as": "customer", "missing": "missing"}
	p.cfg.State.Dir = t.TempDir()
	if err := p.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Orders are keyed by customer id: co-partitioned with the table.
	order := func(id, customerID string) {
		p.b.Produce(t, customer(p.in, customerID, `{"order":"`+id+`","customer_id":"`+customerID+`"}`))
	}
	wantOut := func(id, want string) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			outs := p.b.ReadCommitted(t, p.out, 30*time.Second)
			for _, r := range outs {
				if string(r.Value) == want {
					return nil
				}
			}
			return fmt.Errorf("order %s: no output %s; outputs %v", id, want, latest(outs))
		})
	}

	p.b.Produce(t, customer(customers, "c1", `{"name":"Ann"}`), customer(customers, "c2", `{"name":"Bob"}`))
	_, stop := p.run(t)
	order("o1", "c1")
	order("o2", "c9")
	p.waitProcessed(t)
	wantOut("o1", `{"order":"o1","customer_id":"c1","customer":{"name":"Ann"}}`)
	if m := p.values(t, missing); len(m) != 1 || m["c9"] != `{"order":"o2","customer_id":"c9"}` {
		t.Fatalf("missing: %v (table records must not reach the plugin)", m)
	}

	// An update and a tombstone: orders written after them see them.
	p.b.Produce(t, customer(customers, "c1", `{"name":"Ann","tier":"gold"}`), customer(customers, "c2", ""))
	order("o3", "c1")
	order("o4", "c2")
	p.waitProcessed(t)
	wantOut("o3", `{"order":"o3","customer_id":"c1","customer":{"name":"Ann","tier":"gold"}}`)
	if m := p.values(t, missing); m["c2"] != `{"order":"o4","customer_id":"c2"}` {
		t.Fatalf("after the tombstone, missing: %v", m)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// An empty state directory: the table comes back from its topic, up
	// to the committed offset only. An order written while the host was
	// down, then an update after it: the order sees the table as it was
	// when it was written (restored to gold, then the order, then the
	// update, in timestamp order), not the update a restore to the
	// topic's end would have shown it.
	order("o5", "c1")
	time.Sleep(5 * time.Millisecond)
	p.b.Produce(t, customer(customers, "c1", `{"name":"Ann","tier":"platinum"}`))
	p.cfg.State.Dir = t.TempDir()
	h, stop := p.run(t)
	p.waitProcessed(t)
	wantOut("o5", `{"order":"o5","customer_id":"c1","customer":{"name":"Ann","tier":"gold"}}`)
	order("o6", "c1")
	p.waitProcessed(t)
	wantOut("o6", `{"order":"o6","customer_id":"c1","customer":{"name":"Ann","tier":"platinum"}}`)
	restoredFromTopic := false
	for _, m := range h.members {
		for _, pr := range m.r.RestoreProgress() {
			if pr.Store == "customers" {
				if pr.Topic != customers || !pr.Done {
					t.Fatalf("table store restore %+v: want done, from %s", pr, customers)
				}
				restoredFromTopic = restoredFromTopic || pr.Restored > 0
			}
		}
	}
	if !restoredFromTopic {
		t.Fatal("no task restored its table from the topic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := p.b.Admin(t).ListTopics(ctx, p.cfg.ChangelogTopic("customers"))
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(p.cfg.ChangelogTopic("customers")) {
		t.Fatalf("a changelog topic %s was created for the task table", p.cfg.ChangelogTopic("customers"))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// An update and an order of the same millisecond, written while the
	// host is down so that one fetch brings both: the update goes first (a
	// row stamped t is in effect for a record of time t).
	at := time.Now()
	upd := customer(customers, "c1", `{"name":"Ann","tier":"diamond"}`)
	upd.Timestamp = at
	p.b.Produce(t, upd)
	o7 := customer(p.in, "c1", `{"order":"o7","customer_id":"c1"}`)
	o7.Timestamp = at
	p.b.Produce(t, o7)
	_, stop = p.run(t)
	p.waitProcessed(t)
	wantOut("o7", `{"order":"o7","customer_id":"c1","customer":{"name":"Ann","tier":"diamond"}}`)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestTaskTableConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		tables map[string]string
		want   string
	}{
		{map[string]string{"counts": "t"}, `processors[0].task_tables.counts: table name "counts" is also one of the processor's stores or global tables`},
		{map[string]string{"rates": "t"}, `processors[0].task_tables.rates: table name "rates" is also one of the processor's stores or global tables`},
		{map[string]string{"out": "t"}, `processors[0].task_tables.out: table name "out" is also one of the processor's outputs`},
		{map[string]string{"_x": "t"}, `processors[0].task_tables._x: table name "_x": names starting with _ are the host's`},
		{map[string]string{"customers": "bad topic"}, `processors[0].task_tables.customers: "bad topic" is not a valid topic name`},
		{map[string]string{"customers": "in"}, `processors[0].task_tables.customers: topic "in" is already the input of processor "p"`},
		{map[string]string{"customers": "other-in"}, `processors[1].inputs[0]: topic "other-in" is already the input of processor "p"`},
	} {
		cfg := &Config{AppID: "app", Processors: []ProcessorConfig{
			{Name: "p", Plugin: "x.wasm", Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "o"}},
				Stores: []string{"counts"}, Tables: map[string]string{"rates": "r"}, TaskTables: tc.tables},
			{Name: "q", Plugin: "x.wasm", Inputs: []string{"other-in"}, Outputs: map[string]OutputConfig{"out": {Topic: "o2"}}},
		}}
		cfg.ApplyDefaults()
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.tables, err, tc.want)
		}
	}
}

// A task-table record the store cannot hold (a key over abi.MaxKeySize)
// fails like a record: under on_error: skip it is counted and skipped, and
// the task goes on with the rest of the table.
func TestTaskTableRecordTooLargeIsAFailedRecord(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/enrich"), OnErrorSkip)
	customers := p.b.Name(t, "customers")
	p.b.CreateTopic(t, customers, 3, map[string]string{"cleanup.policy": "compact"})
	pc := &p.cfg.Processors[0]
	pc.TaskTables = map[string]string{"customers": customers}
	pc.Config = map[string]any{"table": "customers", "key_field": "customer_id", "as": "customer"}
	p.cfg.State.Dir = t.TempDir()
	p.b.Produce(t, customer(customers, strings.Repeat("k", 5000), `{"name":"Huge"}`), customer(customers, "c1", `{"name":"Ann"}`))
	h, stop := p.run(t)
	p.b.Produce(t, customer(p.in, "c1", `{"order":"o1","customer_id":"c1"}`))
	p.waitProcessed(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		if vs := p.values(t, p.out); vs["c1"] != `{"order":"o1","customer_id":"c1","customer":{"name":"Ann"}}` {
			return fmt.Errorf("outputs %v", vs)
		}
		return nil
	})
	if n := h.members[0].r.Stats("proc").Skipped.Load(); n != 1 {
		t.Fatalf("%d records skipped, want the one table record", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
