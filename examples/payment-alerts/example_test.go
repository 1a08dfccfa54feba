// The payment-alerts example, run the way its README says: its own
// pipeline.yaml, its own processor built to Wasm.
package paymentalerts_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// plugins is the example's own processor, built to processor.wasm next to
// pipeline.yaml (where the config names it), as the README's build command
// does.
var plugins = map[string]string{"examples/payment-alerts/processor.wasm": "./examples/payment-alerts/processor"}

var payments = map[string]string{
	"p1": "acct-1,1999",
	"p2": "acct-2,250000", // at the threshold: an alert
	"p3": "acct-3,not-a-number",
	"p4": "acct-4,9000000",
}

// runExample runs the pipeline, produces the sample payments and returns
// what reached each topic.
func runExample(t *testing.T, cfg *host.Config, read func(topic string) []*kgo.Record, produce func(...*kgo.Record), h *host.Host) map[string][]string {
	p := &cfg.Processors[0]
	in, audited, alerts, dlq := p.Inputs[0], p.Outputs["audited"].Topic, p.Outputs["alerts"].Topic, cfg.DeadLetterTopic(p)
	defer exampletest.Run(t, h)()
	var recs []*kgo.Record
	for k, v := range payments {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(v)})
	}
	produce(recs...)
	got := map[string][]string{}
	testutil.Eventually(t, 60*time.Second, func() error {
		for name, topic := range map[string]string{"audited": audited, "alerts": alerts, "dlq": dlq} {
			got[name] = nil
			for _, r := range read(topic) {
				got[name] = append(got[name], string(r.Key))
			}
			sort.Strings(got[name])
		}
		// Each topic is read at its own moment: wait for all three, or a
		// transaction that commits between two reads shows on one only.
		if len(got["audited"]) != 3 || len(got["alerts"]) != 2 || len(got["dlq"]) != 1 {
			return fmt.Errorf("outputs so far: %v", got)
		}
		return nil
	})
	return got
}

func check(t *testing.T, got map[string][]string) {
	want := map[string]string{
		"audited": "p1,p2,p4",
		"alerts":  "acct-2,acct-4",
		"dlq":     "p3", // the malformed payment, dead-lettered
	}
	for topic, w := range want {
		if g := strings.Join(got[topic], ","); g != w {
			t.Errorf("%s: got %s, want %s", topic, g, w)
		}
	}
}

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.Setup(t, "payment-alerts", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg)
	check(t, runExample(t, cfg, read, produce, h))
}

// The README's commands: its sample payments through "wasmstream topic
// produce -k :", its alerts read back with "wasmstream topic consume", on
// the running pipeline's embedded broker found from the config alone.
func TestReadmeTopicCommands(t *testing.T) {
	cfg := exampletest.Setup(t, "payment-alerts", plugins, nil)
	h, _, _ := exampletest.Embedded(t, cfg)
	defer exampletest.Run(t, h)()
	tool := exampletest.Topics(t, cfg)
	ctx := context.Background()
	in := "p1:acct-1,1999\np2:acct-2,250000\np3:acct-3,oops\n" // the README's printf
	if res, err := tool.Produce(ctx, strings.NewReader(in), host.ProduceOptions{Topic: "payments", KeySep: ":"}); err != nil || res.Records != 3 {
		t.Fatalf("topic produce: %+v, %v", res, err)
	}
	var out bytes.Buffer
	testutil.Eventually(t, 60*time.Second, func() error {
		out.Reset()
		if _, err := tool.Consume(ctx, &out, host.ConsumeOptions{Topic: "payment-alerts"}); err != nil {
			return err
		}
		if !strings.Contains(out.String(), "acct-2") {
			return fmt.Errorf("payment-alerts holds %q", out.String())
		}
		return nil
	})
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(strings.SplitN(lines[0], " ", 2)[1], "acct-2 ") {
		t.Errorf("topic consume payment-alerts printed %q; want the one alert, keyed acct-2", out.String())
	}
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.Setup(t, "payment-alerts", plugins, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ","), "WASMSTREAM_KAFKA__CREATE_TOPICS=true"})
	// A shared real broker keeps topics between runs: give this run's
	// app and topics unique names; everything else is as shipped.
	p := &cfg.Processors[0]
	cfg.AppID = b.Name(t, cfg.AppID)
	p.Inputs = []string{b.Name(t, p.Inputs[0])}
	for k, v := range p.Outputs {
		v.Topic = b.Name(t, v.Topic)
		p.Outputs[k] = v
	}
	h, produce, read := exampletest.OnTestBroker(t, b, cfg)
	check(t, runExample(t, cfg, read, produce, h))
}
