// The ad-clicks example, run the way its README says: its own
// pipeline.yaml, with the bundled plugin where it names it.
package adclicks_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

var plugins = map[string]string{"bin/plugins/clickjoin.wasm": "./plugins/clickjoin"}

// topics are the example's topics as the config names them.
type topics struct{ impressions, clicks, joined string }

func topicsOf(cfg *host.Config) topics {
	p := cfg.Processors[0]
	return topics{impressions: p.Inputs[0], clicks: p.Inputs[1], joined: p.Outputs["joined"].Topic}
}

type result struct {
	ImpressionAt int64   `json:"impression_at"`
	Impression   string  `json:"impression"`
	ClickAt      *int64  `json:"click_at"`
	Click        *string `json:"click"`
	LatencyMS    *int64  `json:"latency_ms"`
}

// runExample writes 30 impressions an hour ago, a second apart, over
// every partition; clicks on every third, 4s after it (one 20 minutes
// after: outside the 10-minute window), and a click without an impression;
// then impressions half an hour later on 40 keys, to move every
// partition's stream time past the window and grace. Each impression must come out
// exactly once: clicked, with its latency, or unclicked.
func runExample(t *testing.T, cfg *host.Config, h *host.Host, produce func(...*kgo.Record), read func(string) []*kgo.Record) {
	tp := topicsOf(cfg)
	stop := exampletest.Run(t, h)
	defer stop()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const n = 30
	var recs []*kgo.Record
	for i := range n {
		id := "i" + strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: tp.impressions, Key: []byte(id), Value: []byte(`{"ad":"a` + strconv.Itoa(i%4) + `"}`), Timestamp: at(time.Duration(i) * time.Second)})
	}
	for i := 0; i < n; i += 3 {
		if i == 9 {
			continue
		}
		recs = append(recs, &kgo.Record{Topic: tp.clicks, Key: []byte("i" + strconv.Itoa(i)), Value: []byte("c" + strconv.Itoa(i)), Timestamp: at(time.Duration(i)*time.Second + 4*time.Second)})
	}
	recs = append(recs, &kgo.Record{Topic: tp.clicks, Key: []byte("nobody"), Value: []byte("c"), Timestamp: at(time.Minute)})
	// A click 20 minutes after its impression: outside the window. It is
	// written after the others: it moves its partition's stream time, and
	// clicks behind it by more than the grace would be late.
	recs = append(recs, &kgo.Record{Topic: tp.clicks, Key: []byte("i9"), Value: []byte("c9"), Timestamp: at(9*time.Second + 20*time.Minute)})
	produce(recs...)
	// Impressions half an hour later on many keys: every partition's
	// stream time passes the first impressions' window and grace.
	var ticks []*kgo.Record
	for i := range 40 {
		ticks = append(ticks, &kgo.Record{Topic: tp.impressions, Key: []byte("tick" + strconv.Itoa(i)), Value: []byte(`{}`), Timestamp: at(30 * time.Minute)})
	}
	produce(ticks...)

	want := map[string]result{}
	for i := range n {
		id := "i" + strconv.Itoa(i)
		r := result{ImpressionAt: at(time.Duration(i) * time.Second).UnixMilli(), Impression: `{"ad":"a` + strconv.Itoa(i%4) + `"}`}
		if i%3 == 0 && i != 9 {
			c, click, lat := r.ImpressionAt+4000, "c"+strconv.Itoa(i), int64(4000)
			r.ClickAt, r.Click, r.LatencyMS = &c, &click, &lat
		}
		want[id] = r
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := map[string][]result{}
		for _, rec := range read(tp.joined) {
			if strings.HasPrefix(string(rec.Key), "tick") {
				continue
			}
			var r result
			if err := json.Unmarshal(rec.Value, &r); err != nil {
				t.Fatalf("output %s: %v", rec.Value, err)
			}
			got[string(rec.Key)] = append(got[string(rec.Key)], r)
		}
		err := compare(got, want)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func compare(got map[string][]result, want map[string]result) error {
	for id, w := range want {
		g := got[id]
		if len(g) != 1 {
			return fmt.Errorf("impression %s reported %d times, want once: %s", id, len(g), show(g))
		}
		if show(g[:1]) != show([]result{w}) {
			return fmt.Errorf("impression %s: %s, want %s", id, show(g), show([]result{w}))
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			return fmt.Errorf("unexpected result for %s: %s", id, show(got[id]))
		}
	}
	return nil
}

func show(rs []result) string {
	b, _ := json.Marshal(rs)
	return string(b)
}

// As shipped: kafka.brokers is empty, so the host starts its embedded broker.
func TestExampleAsShippedOnEmbeddedBroker(t *testing.T) {
	cfg := exampletest.Setup(t, "ad-clicks", plugins, nil)
	h, produce, read := exampletest.Embedded(t, cfg)
	runExample(t, cfg, h, produce, read)
}

// The same example against the test broker (real Kafka under make test),
// pointed there with the environment as a user would.
func TestExampleOnTestBroker(t *testing.T) {
	b := testbroker.New(t)
	cfg := exampletest.Setup(t, "ad-clicks", plugins, []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")})
	// A shared real broker keeps topics between runs: this run's app and
	// topics get unique names; everything else is as shipped.
	cfg.AppID = b.Name(t, cfg.AppID)
	p := &cfg.Processors[0]
	imps, clicks, joined := b.Name(t, "impressions"), b.Name(t, "clicks"), b.Name(t, "ad-clicks")
	b.CreateTopic(t, imps, 3, nil)
	b.CreateTopic(t, clicks, 3, nil)
	b.CreateTopic(t, joined, 3, nil)
	p.Inputs = []string{imps, clicks}
	p.Outputs["joined"] = host.OutputConfig{Topic: joined}
	h, produce, read := exampletest.OnTestBroker(t, b, cfg)
	runExample(t, cfg, h, produce, read)
}
