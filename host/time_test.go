package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// windowResult is one output of plugins/windowcount.
type windowResult struct {
	key               string
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

// The windowed count through the whole host, as shipped in
// plugins/windowcount: tumbling one-second windows with emit final. A
// window is emitted once, when a later record moves the stream time past
// its end, with its final count; its pending close (a timer) and the
// stream time survive a restart of the process on an empty state
// directory (restored from the changelogs) and a hot swap; nothing is
// emitted twice in the committed output.
func TestWindowCountThroughTheHost(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/windowcount"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	late := p.b.Name(t, "late")
	p.b.CreateTopic(t, late, 1, nil)
	pc.Stores = []string{"windows"}
	pc.Outputs = map[string]OutputConfig{"counts": {Topic: p.out}, "late": {Topic: late}}
	pc.Config = map[string]any{"size": "1s", "late_output": "late"}
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
	// A record for a closed window (the stream time is t0+2100, grace 0)
	// is late: not counted, routed unchanged to the late output.
	produce(at("late-key", 500))
	testutil.Eventually(t, 30*time.Second, func() error {
		recs := p.b.ReadCommitted(t, late, 30*time.Second)
		if len(recs) > 1 {
			t.Fatalf("late output holds %d records, want the one late record", len(recs))
		}
		if len(recs) != 1 || string(recs[0].Key) != "late-key" {
			return fmt.Errorf("late output holds %d records, want the one late record", len(recs))
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
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

// A quiet partition still fires: plugins/alert reports a key
// that had no record for its timeout of wall-clock time through a
// processing-time timer, with no record arriving after the key's last.
func TestAlertOnAQuietPartition(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/alert"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	pc.Stores = []string{"alert"}
	pc.Outputs = map[string]OutputConfig{"alerts": {Topic: p.out}}
	pc.Config = map[string]any{"timeout": "300ms"}
	p.cfg.State.Dir = t.TempDir()
	_, stop := p.run(t)
	defer stop()
	p.produce(t, "sensor-1")
	testutil.Eventually(t, 30*time.Second, func() error {
		recs := p.b.ReadCommitted(t, p.out, 5*time.Second)
		if len(recs) == 0 {
			return errors.New("no alert for a key silent for 30s with a 300ms timeout")
		}
		if string(recs[0].Key) != "sensor-1" || !strings.Contains(string(recs[0].Value), `"status":"silent"`) {
			t.Fatalf("alert %s=%s, want sensor-1 silent", recs[0].Key, recs[0].Value)
		}
		return nil
	})
}

// State expiry through the host (abi/ABI.md section 8.7), with
// plugins/wordcount and a TTL of 1s of event time on its store: a word not
// seen for 1s of stream time is gone (its count starts again at 1), its
// deletion is a tombstone in the store's changelog, and a new process
// restoring the store on an empty state directory does not bring it back.
func TestStoreExpiryThroughTheHost(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/wordcount"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	pc.Stores = []string{"counts"}
	pc.Outputs = map[string]OutputConfig{"counts": {Topic: p.out}}
	pc.Expire = map[string]StoreExpiry{"counts": {After: time.Second}}
	p.cfg.State.Dir = t.TempDir()
	t0 := (time.Now().UnixMilli()/1000 - 3600) * 1000
	line := func(words string, ms int64) *kgo.Record {
		return &kgo.Record{Topic: p.in, Partition: 0, Value: []byte(words), Timestamp: time.UnixMilli(t0 + ms)}
	}
	counts := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got []string
			for _, r := range p.b.ReadCommitted(t, p.out, 30*time.Second) {
				got = append(got, string(r.Key)+"="+string(r.Value))
			}
			if len(got) >= n || time.Now().After(deadline) {
				sort.Strings(got) // outputs are spread over partitions by word
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sorted := func(s []string) string {
		s = append([]string(nil), s...)
		sort.Strings(s)
		return strings.Join(s, " ")
	}

	_, stop := p.run(t)
	p.b.ProduceTo(t, 0, line("old kept", 0), line("kept", 900))
	// Stream time 2000: "old" (written at 0) has expired; "kept" (900)
	// too, by 1900. A new "old" counts from 1.
	p.b.ProduceTo(t, 0, line("old", 2000))
	got := counts(4)
	want := []string{"old=1", "kept=1", "kept=2", "old=1"}
	if strings.Join(got, " ") != sorted(want) {
		t.Fatalf("counts %q, want %q", got, want)
	}
	// The sweep at a commit point deletes what expired: "kept" gets a
	// tombstone in the changelog (once the stream time passes 1900).
	changelog := p.cfg.ChangelogTopic("counts")
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, r := range p.b.ReadCommitted(t, changelog, 30*time.Second) {
			if string(r.Key) == "kept" && r.Value == nil {
				return nil
			}
		}
		return errors.New("no tombstone for the expired key \"kept\" in the changelog")
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A new process on an empty directory restores "old" (written at
	// 2000); at stream time 3100 it has expired, so it counts from 1 again,
	// while a word written at 2500 is still alive at 3100.
	p.cfg.State.Dir = t.TempDir()
	_, stop = p.run(t)
	p.b.ProduceTo(t, 0, line("fresh", 2500), line("old fresh", 3100))
	got = counts(7)
	want = append(want, "fresh=1", "old=1", "fresh=2")
	if strings.Join(got, " ") != sorted(want) {
		t.Fatalf("after a restore: counts %q, want %q", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A store's TTL cannot be added to a store that holds data written without
// one (its values carry no expiry stamp): the task stops with an error
// that says so, instead of misreading the values.
func TestStoreExpiryAddedToAFullStoreIsRefused(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/wordcount"), OnErrorFail)
	pc := &p.cfg.Processors[0]
	pc.Stores = []string{"counts"}
	pc.Outputs = map[string]OutputConfig{"counts": {Topic: p.out}}
	p.cfg.State.Dir = t.TempDir()
	p.b.ProduceTo(t, 0, &kgo.Record{Topic: p.in, Partition: 0, Value: []byte("a b")})
	_, stop := p.run(t)
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	pc.Expire = map[string]StoreExpiry{"counts": {After: time.Hour, Clock: "wall"}}
	h, stop := p.run(t)
	defer stop()
	p.b.ProduceTo(t, 0, &kgo.Record{Topic: p.in, Partition: 0, Value: []byte("c")})
	testutil.Eventually(t, 30*time.Second, func() error {
		if st, _ := h.Stats("proc"); st.FailedTasks == 0 {
			return errors.New("a TTL added to a store holding unstamped data did not stop its task")
		}
		return nil
	})
}
