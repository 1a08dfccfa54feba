package host

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// windowResult is one output of plugins/windowcount.
type windowResult struct {
	key                string
	Start, End, Count int64
}

func (p *pipeline) windowResults(t *testing.T) []windowResult {
	var out []windowResult
	for _, r := range p.b.ReadCommitted(t, p.out, 30*time.Second) {
		var w windowResult
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		w.key = string(r.Key)
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return out[i].Start < out[j].Start
	})
	return out
}

func (p *pipeline) waitWindows(t *testing.T, n int) []windowResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := p.windowResults(t)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The windowed count through the whole host (issue 13), as shipped in
// plugins/windowcount: tumbling one-second windows with emit final. A
// window is emitted once, when a later record moves the stream time past
// its end, with its final count; its pending close (a timer) and the
// stream time survive a restart of the process on an empty state
// directory (restored from the changelogs) and a hot swap; nothing is
// emitted twice in the committed output.
func TestWindowCountThroughTheHost(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/windowcount"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	pc.Stores = []string{"windows"}
	pc.Outputs = map[string]string{"counts": p.out}
	pc.Config = map[string]any{"size": "1s"}
	p.cfg.State.Dir = t.TempDir()
	// A window start (a multiple of 1s) an hour ago: a real broker's
	// retention would delete records with older timestamps.
	t0 := (time.Now().UnixMilli()/1000 - 3600) * 1000
	at := func(key string, ms int64) *kgo.Record {
		return &kgo.Record{Topic: p.in, Partition: 0, Key: []byte(key), Value: []byte("x"), Timestamp: time.UnixMilli(t0 + ms)}
	}
	produce := func(recs ...*kgo.Record) { p.b.ProduceTo(t, 0, recs...) }

	_, stop := p.run(t)
	produce(at("a", 0), at("a", 100), at("b", 200), at("a", 999))
	produce(at("a", 1000)) // stream time t0+1000: the first window closes
	got := p.waitWindows(t, 2)
	want := []windowResult{{"a", t0, t0 + 1000, 3}, {"b", t0, t0 + 1000, 1}}
	if !equalWindows(got, want) {
		t.Fatalf("after the first window: %+v, want %+v", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A new process on an empty state directory: a's second window (one
	// record, at t0+1000) and the stream time come back from the
	// changelogs, and close when the stream time passes t0+2000.
	p.cfg.State.Dir = t.TempDir()
	_, stop = p.run(t)
	produce(at("c", 1500), at("c", 2100))
	got = p.waitWindows(t, 4)
	want = append(want, windowResult{"a", t0 + 1000, t0 + 2000, 1}, windowResult{"c", t0 + 1000, t0 + 2000, 1})
	if !equalWindows(got, want) {
		t.Fatalf("after a restart on an empty state directory: %+v, want %+v", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if final := p.windowResults(t); !equalWindows(final, want) {
		t.Fatalf("committed output %+v, want exactly %+v", final, want)
	}
}

func equalWindows(got, want []windowResult) bool {
	w := append([]windowResult(nil), want...)
	sort.Slice(w, func(i, j int) bool {
		if w[i].key != w[j].key {
			return w[i].key < w[j].key
		}
		return w[i].Start < w[j].Start
	})
	if len(got) != len(w) {
		return false
	}
	for i := range got {
		if got[i] != w[i] {
			return false
		}
	}
	return true
}

// A quiet partition still fires (issue 13): plugins/alert reports a key
// that had no record for its timeout of wall-clock time through a
// processing-time timer, with no record arriving after the key's last.
func TestAlertOnAQuietPartition(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/alert"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	pc.Stores = []string{"alert"}
	pc.Outputs = map[string]string{"alerts": p.out}
	pc.Config = map[string]any{"timeout": "300ms"}
	p.cfg.State.Dir = t.TempDir()
	_, stop := p.run(t)
	defer stop()
	p.produce(t, "sensor-1")
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs := p.b.ReadCommitted(t, p.out, 5*time.Second)
		if len(recs) > 0 {
			if string(recs[0].Key) != "sensor-1" || !strings.Contains(string(recs[0].Value), `"status":"silent"`) {
				t.Fatalf("alert %s=%s, want sensor-1 silent", recs[0].Key, recs[0].Value)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no alert for a key silent for 30s with a 300ms timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
