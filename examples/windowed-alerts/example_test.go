// The windowed-alerts example, run the way its README says: its own
// pipeline.yaml, with the bundled plugins where `make plugins` puts them.
package windowedalerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// setup lays out a copy of the repository's relevant part in a temporary
// directory (examples/windowed-alerts/pipeline.yaml next to
// bin/plugins/*.wasm, as `make plugins` leaves them) and loads the config
// with environ, so the plugin paths resolve as shipped.
func setup(t *testing.T, environ []string) *host.Config {
	root := t.TempDir()
	files := map[string]string{}
	for _, p := range []string{"windowcount", "alert"} {
		files[filepath.Join("bin", "plugins", p+".wasm")] = wasmbuild.Build(t, "./plugins/"+p)
	}
	files[filepath.Join("examples", "windowed-alerts", "pipeline.yaml")] = "pipeline.yaml"
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst = filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := host.LoadConfig(filepath.Join(root, "examples", "windowed-alerts", "pipeline.yaml"), environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.CacheDir = "off"
	// The default state directory is relative to the working directory:
	// each run starts on an empty one, as a new installation would.
	cfg.State.Dir = t.TempDir()
	return cfg
}

// topics are the example's topics in cfg, by role.
type topics struct{ readings, counts, late, heartbeats, alerts string }

func topicsOf(t *testing.T, cfg *host.Config) topics {
	if len(cfg.Processors) != 2 {
		t.Fatalf("%d processors, want 2", len(cfg.Processors))
	}
	wc, al := &cfg.Processors[0], &cfg.Processors[1]
	return topics{
		readings: wc.Inputs[0], counts: wc.Outputs["counts"], late: wc.Outputs["late"],
		heartbeats: al.Inputs[0], alerts: al.Outputs["alerts"],
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

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

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := setup(t, nil)
	h, err := host.New(context.Background(), cfg, host.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Embedded() {
		t.Fatal("the example config should use the embedded broker")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(recs ...*kgo.Record) {
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(topic string) []*kgo.Record { return readAll(t, h.Brokers(), topic) }
	got, t0, silentSince := runExample(t, cfg, h, read, produce)
	check(t, got, t0, silentSince)
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := setup(t, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ","), "WASMSTREAM_KAFKA__CREATE_TOPICS=true"})
	// A shared real broker keeps topics between runs: give this run's app
	// (its group and changelogs) and topics unique names; everything else
	// is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	for i := range cfg.Processors {
		p := &cfg.Processors[i]
		p.Inputs = []string{b.Name(t, p.Inputs[0])}
		for k, v := range p.Outputs {
			p.Outputs[k] = b.Name(t, v)
		}
	}
	h, err := host.New(context.Background(), cfg, host.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	produce := func(recs ...*kgo.Record) { b.Produce(t, recs...) }
	read := func(topic string) []*kgo.Record { return b.ReadCommitted(t, topic, 30*time.Second) }
	got, t0, silentSince := runExample(t, cfg, h, read, produce)
	check(t, got, t0, silentSince)
}

// readAll reads a topic's committed records from the start to its current
// end.
func readAll(t *testing.T, brokers []string, topic string) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out []*kgo.Record
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
