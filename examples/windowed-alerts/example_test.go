// The windowed-alerts example, run the way its README says: its own
// pipeline.yaml, with the bundled plugins where `make plugins` puts them.
package windowedalerts_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// plugins are the bundled plugins, where `make plugins` puts them.
var plugins = map[string]string{
	"bin/plugins/windowcount.wasm": "./plugins/windowcount",
	"bin/plugins/alert.wasm":       "./plugins/alert",
}

// topics are the example's topics in cfg, by role.
type topics struct{ readings, counts, late, heartbeats, alerts string }

func topicsOf(t *testing.T, cfg *host.Config) topics {
	if len(cfg.Processors) != 2 {
		t.Fatalf("%d processors, want 2", len(cfg.Processors))
	}
	wc, al := &cfg.Processors[0], &cfg.Processors[1]
	return topics{
		readings: wc.Inputs[0], counts: wc.Outputs["counts"].Topic, late: wc.Outputs["late"].Topic,
		heartbeats: al.Inputs[0], alerts: al.Outputs["alerts"].Topic,
	}
}

// result is what the example wrote, decoded.
type result struct {
	counts []windowCount
	late   []*kgo.Record
	alerts []alert
}

// windowCount is one output record of readings-per-minute.
type windowCount struct {
	sensor     string
	timestamp  int64 // ms: the largest reading timestamp in the window
	Start, End int64 // ms, [start, end)
	Count      int64
}

// alert is one output record of sensor-watch.
type alert struct {
	sensor          string
	Status          string
	RecordTimestamp int64 `json:"record_timestamp"`
}

// runExample runs the pipeline, produces readings with known timestamps
// and heartbeats of two sensors (sensor-2's stop, then one comes after its
// alert), and returns what reached the output topics once the two closed
// windows, the late reading and both alerts are there.
func runExample(t *testing.T, cfg *host.Config, h *host.Host, read func(topic string) []*kgo.Record, produce func(...*kgo.Record)) (result, int64, int64) {
	tp := topicsOf(t, cfg)
	defer exampletest.Run(t, h)()

	// A minute start half an hour ago: a real broker's retention would
	// delete records with much older timestamps, and the window outputs
	// carry their readings' timestamps.
	t0 := (time.Now().UnixMilli()/60_000 - 30) * 60_000
	reading := func(sensor string, ms int64) *kgo.Record {
		return &kgo.Record{Topic: tp.readings, Key: []byte(sensor),
			Value: fmt.Appendf(nil, `{"celsius":21.%d}`, ms%10), Timestamp: time.UnixMilli(t0 + ms)}
	}
	// One batch: the order within a sensor (one key, one partition) is the
	// order written here; stream time is per partition.
	produce(
		reading("sensor-1", 0),
		reading("sensor-1", 20_000),
		reading("sensor-2", 30_000),
		reading("sensor-1", 50_000),
		reading("sensor-1", 59_999),
		reading("sensor-2", 65_000), // the next window; stream time at most 65s < 60s + grace
		reading("sensor-2", 40_000), // out of order, within the grace: counted in the first window
		reading("sensor-1", 75_000), // stream time 75s passes 60s + 10s: the first window closes
		reading("sensor-2", 75_000), // the same on sensor-2's partition, if it is another one
		reading("sensor-1", 5_000),  // after the close: late
	)

	heartbeat := func(sensor string) *kgo.Record {
		return &kgo.Record{Topic: tp.heartbeats, Key: []byte(sensor), Value: []byte("ok"),
			Timestamp: time.UnixMilli(time.Now().UnixMilli())}
	}
	hb2 := heartbeat("sensor-2")
	produce(heartbeat("sensor-1"), hb2)
	resolved := false
	var got result
	deadline := time.Now().Add(120 * time.Second)
	for {
		// sensor-1 keeps sending heartbeats, about one a second; sensor-2
		// is silent until its alert.
		next := time.Now().Add(time.Second)
		produce(heartbeat("sensor-1"))
		got = result{counts: decodeCounts(t, read(tp.counts)), late: read(tp.late), alerts: decodeAlerts(t, read(tp.alerts))}
		if len(got.alerts) > 0 && !resolved {
			produce(heartbeat("sensor-2")) // heard from again: a "resolved" alert
			resolved = true
		}
		if len(got.counts) >= 2 && len(got.late) >= 1 && len(got.alerts) >= 2 {
			return got, t0, hb2.Timestamp.UnixMilli()
		}
		if time.Now().After(deadline) {
			t.Fatalf("outputs after 120s: counts %+v, %d late, alerts %+v", got.counts, len(got.late), got.alerts)
		}
		time.Sleep(time.Until(next))
	}
}

func decodeCounts(t *testing.T, recs []*kgo.Record) []windowCount {
	var out []windowCount
	for _, r := range recs {
		w := windowCount{sensor: string(r.Key), timestamp: r.Timestamp.UnixMilli()}
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatalf("count %q: %v", r.Value, err)
		}
		out = append(out, w)
	}
	return out
}

func decodeAlerts(t *testing.T, recs []*kgo.Record) []alert {
	var out []alert
	for _, r := range recs {
		a := alert{sensor: string(r.Key)}
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Fatalf("alert %q: %v", r.Value, err)
		}
		out = append(out, a)
	}
	return out
}

// check compares the outputs with what the README says they are.
func check(t *testing.T, got result, t0, silentSince int64) {
	t.Helper()
	// One record per sensor for the closed window, with its final count;
	// the second window (readings at 65s and 75s) is still open.
	want := map[string]windowCount{
		"sensor-1": {sensor: "sensor-1", timestamp: t0 + 59_999, Start: t0, End: t0 + 60_000, Count: 4},
		"sensor-2": {sensor: "sensor-2", timestamp: t0 + 40_000, Start: t0, End: t0 + 60_000, Count: 2},
	}
	if len(got.counts) != len(want) {
		t.Errorf("counts: got %+v, want %+v", got.counts, want)
	}
	for _, c := range got.counts {
		if c != want[c.sensor] {
			t.Errorf("count of %s: got %+v, want %+v", c.sensor, c, want[c.sensor])
		}
	}
	if len(got.late) != 1 {
		t.Errorf("late: %d records, want 1", len(got.late))
	} else if r := got.late[0]; string(r.Key) != "sensor-1" || r.Timestamp.UnixMilli() != t0+5_000 || !hasHeader(r, "wasmstream-window-late", "wc") {
		t.Errorf("late: %s at %d (t0%+d) headers %v, want sensor-1 at t0+5000 with wasmstream-window-late: wc",
			r.Key, r.Timestamp.UnixMilli(), r.Timestamp.UnixMilli()-t0, r.Headers)
	}
	// Only sensor-2 went silent: first reported, then resolved. The silent
	// alert carries the timestamp of its last heartbeat before the silence.
	var statuses []string
	for _, a := range got.alerts {
		statuses = append(statuses, a.sensor+" "+a.Status)
	}
	if s := strings.Join(statuses, ", "); s != "sensor-2 silent, sensor-2 resolved" {
		t.Errorf("alerts: %s, want sensor-2 silent, sensor-2 resolved", s)
	} else if got.alerts[0].RecordTimestamp != silentSince {
		t.Errorf("silent alert: record_timestamp %d, want %d (sensor-2's last heartbeat)", got.alerts[0].RecordTimestamp, silentSince)
	}
}

func hasHeader(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key && string(h.Value) == value {
			return true
		}
	}
	return false
}

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.Setup(t, "windowed-alerts", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg)
	got, t0, silentSince := runExample(t, cfg, h, read, produce)
	check(t, got, t0, silentSince)
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.Setup(t, "windowed-alerts", plugins, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ","), "WASMSTREAM_KAFKA__CREATE_TOPICS=true"})
	// A shared real broker keeps topics between runs: give this run's app
	// (its group and changelogs) and topics unique names; everything else
	// is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	for i := range cfg.Processors {
		p := &cfg.Processors[i]
		p.Inputs = []string{b.Name(t, p.Inputs[0])}
		for k, v := range p.Outputs {
			v.Topic = b.Name(t, v.Topic)
			p.Outputs[k] = v
		}
	}
	h, produce, read := exampletest.OnTestBroker(t, b, cfg)
	got, t0, silentSince := runExample(t, cfg, h, read, produce)
	check(t, got, t0, silentSince)
}
