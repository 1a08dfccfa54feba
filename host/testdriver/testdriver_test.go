package testdriver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/configload"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// plugins are the Go packages of the plugins testdata/pipeline.yaml names.
var plugins = map[string]string{
	"split.wasm":       "./plugins/split",
	"wordcount.wasm":   "./plugins/wordcount",
	"windowcount.wasm": "./plugins/windowcount",
	"alert.wasm":       "./plugins/alert",
	"enrich.wasm":      "./plugins/enrich",
}

// pipelineDir lays out testdata/pipeline.yaml with its plugins built
// beside it and returns the config's path.
func pipelineDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"pipeline.yaml": filepath.Join("testdata", "pipeline.yaml")}
	for name, pkg := range plugins {
		files[name] = wasmbuild.Build(t, pkg)
	}
	for to, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "pipeline.yaml")
}

func at(sec int) time.Time { return DefaultStart.Add(time.Duration(sec) * time.Second) }

// step is one step of TestPipeline's script.
type step struct {
	pipe    string   // a topic to pipe recs into
	recs    []Record // ...
	advance time.Duration
	commit  bool
}

func rec(key, value string, ts time.Time) Record {
	return Record{Key: []byte(key), Value: []byte(value), Timestamp: ts}
}

// script runs steps and returns what each topic of want got, as
// "key=value" lines, after each step (a step that got nothing is
// absent).
func script(t *testing.T, d *Driver, steps []step, topics []string) map[int]map[string][]string {
	t.Helper()
	got := map[int]map[string][]string{}
	for i, s := range steps {
		var err error
		switch {
		case s.pipe != "":
			err = d.Pipe(s.pipe, s.recs...)
		case s.advance > 0:
			err = d.AdvanceWallTime(s.advance)
		case s.commit:
			err = d.Commit()
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		for _, topic := range topics {
			out, err := d.Output(topic)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			for _, r := range out {
				if got[i] == nil {
					got[i] = map[string][]string{}
				}
				got[i][topic] = append(got[i][topic], string(r.Key)+"="+string(r.Value))
			}
		}
	}
	return got
}

// TestPipeline runs a pipeline of five processors through the driver: a
// stream-table join with a global table, a word count through a
// repartition topic whose counts have a time to live of event time,
// windows closed by event-time timers, and a silence alert on
// processing-time timers. Outputs appear at the commit points the test
// asks for, not before, and the same script gives the same outputs twice.
func TestPipeline(t *testing.T) {
	w0 := DefaultStart.UnixMilli()
	steps := []step{
		0:  {pipe: "customers", recs: []Record{rec("c1", `{"name":"Ann"}`, at(0))}},
		1:  {pipe: "orders", recs: []Record{rec("o1", `{"customer_id":"c1"}`, at(1)), rec("o2", `{"customer_id":"c9"}`, at(1))}},
		2:  {pipe: "lines", recs: []Record{rec("l1", "the cat the", at(1))}},
		3:  {pipe: "readings", recs: []Record{rec("s1", "r", at(10)), rec("s1", "r", at(20))}},
		4:  {pipe: "heartbeats", recs: []Record{{Key: []byte("h1"), Value: []byte("up")}}}, // at the wall time
		5:  {commit: true},
		6:  {pipe: "lines", recs: []Record{rec("l2", "the", at(30))}},
		7:  {pipe: "readings", recs: []Record{rec("s1", "r", at(70))}},
		8:  {advance: 29 * time.Second},
		9:  {commit: true},
		10: {pipe: "lines", recs: []Record{rec("l3", "cat", at(90))}},
		11: {advance: 2 * time.Second},
		12: {commit: true},
	}
	want := map[int]map[string][]string{
		5: {
			"orders-enriched": {`o1={"customer_id":"c1","customer":{"name":"Ann"}}`},
			"orders-unknown":  {`o2={"customer_id":"c9"}`},
			"word-counts":     {"the=1", "cat=1", "the=2"},
		},
		9: {
			"word-counts": {"the=3"},
			// The window [0s, 60s) closed when a reading at 70s moved the
			// stream time past its end.
			"readings-per-minute": {fmt.Sprintf(`s1={"start":%d,"end":%d,"count":2}`, w0, w0+60_000)},
		},
		12: {
			// cat was last counted at 1s, a minute of event time ago:
			// its count expired and starts again.
			"word-counts": {"cat=1"},
			// 31s of wall time without a heartbeat, past the 30s timeout:
			// the timer fired at the commit point.
			"alerts": {fmt.Sprintf(`h1={"status":"silent","last_seen":%d,"silent_ms":31000,"record_timestamp":%d}`, w0, w0)},
		},
	}
	topics := []string{"orders-enriched", "orders-unknown", "word-counts", "readings-per-minute", "alerts"}
	path := pipelineDir(t)
	for run := range 2 {
		d, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := script(t, d, steps, topics)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("run %d: outputs after each step:\ngot  %v\nwant %v", run, got, want)
		}
		counts, err := d.Store("count", "counts")
		if err != nil {
			t.Fatal(err)
		}
		// "the" (last written at 30s) expired at 90s too: hidden, and
		// deleted by the commit point's sweep.
		if len(counts) != 1 || string(counts[0].Key) != "cat" || binary.BigEndian.Uint64(counts[0].Value) != 1 {
			t.Errorf("run %d: store counts: got %v, want only cat=1", run, counts)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestCases runs testdata/cases.yaml, and a case that expects a wrong
// output fails with a diff naming the step, the topic, and the records
// wanted and got.
func TestCases(t *testing.T) {
	path := pipelineDir(t)
	cs, err := LoadCases(filepath.Join("testdata", "cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if failed := RunCases(context.Background(), path, cs, Options{}, &out); failed != 0 {
		t.Errorf("%d cases failed:\n%s", failed, out.String())
	}
	cs, err = LoadCases(filepath.Join("testdata", "failing.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if failed := RunCases(context.Background(), path, cs, Options{}, &out); failed != 1 {
		t.Errorf("failing.yaml: %d cases failed, want 1:\n%s", failed, out.String())
	}
	want := `FAIL a wrong count
    steps[2] (expect): output word-counts (- want, + got):
      key="the" value="1"
    - key="dog" value="1"
    + key="cat" value="1"
      key="the" value="2"
`
	if out.String() != want {
		t.Errorf("failing.yaml's report:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestFailures: a record a plugin fails goes to the dead-letter topic
// under on_error: dead_letter, committed with the window, and stops its
// task under on_error: fail, which the next step reports.
func TestFailures(t *testing.T) {
	dir := t.TempDir()
	for to, from := range map[string]string{"pipeline.yaml": filepath.Join("testdata", "mask.yaml"), "mask.wasm": wasmbuild.Build(t, "./plugins/mask")} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(context.Background(), filepath.Join(dir, "pipeline.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Pipe("signups", rec("u1", `{"email":"a@b.c"}`, at(1)), rec("u2", "not json", at(2))); err != nil {
		t.Fatal(err)
	}
	if dl, err := d.DeadLetters("lenient"); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters before the commit: %v, %v; want none", dl, err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	out, err := d.Output("signups-masked")
	if err != nil || len(out) != 1 || string(out[0].Value) != `{"email":"***"}` {
		t.Errorf("masked: %v, %v; want u1 masked", out, err)
	}
	dl, err := d.DeadLetters("lenient")
	if err != nil || len(dl) != 1 || string(dl[0].Key) != "u2" || string(dl[0].Value) != "not json" || !dl[0].Timestamp.Equal(at(2)) {
		t.Fatalf("dead letters: %v, %v; want u2 as it came", dl, err)
	}
	if kind := header(dl[0], "wasmstream-error-kind"); kind == "" {
		t.Errorf("dead letter without its error kind: %v", dl[0].Headers)
	}
	if _, err := d.DeadLetters("strict"); err == nil {
		t.Error("DeadLetters of a processor without a dead-letter topic: no error")
	}
	err = d.Pipe("payments", rec("p1", "not json", at(3)))
	var stopped *StoppedError
	if !errors.As(err, &stopped) || stopped.Task != "strict/payments/0" {
		t.Errorf("piping a record the strict processor fails: %v; want its task stopped", err)
	}
}

func header(r Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestAtLeastOnce: under at_least_once outputs leave as they are produced,
// so a repartition hop runs before any commit point, and Pipe waits for
// the processor downstream too.
func TestAtLeastOnce(t *testing.T) {
	cfg, err := configload.Load(pipelineDir(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Guarantee = host.AtLeastOnce
	d, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Pipe("lines", rec("l1", "the cat the", at(1))); err != nil {
		t.Fatal(err)
	}
	out, err := d.Output("word-counts")
	if err != nil || len(out) != 3 || string(out[2].Key) != "the" || string(out[2].Value) != "2" {
		t.Fatalf("word counts before a commit point: %v, %v; want the=1 cat=1 the=2", out, err)
	}
	if counts, err := d.Store("count", "counts"); err != nil || len(counts) != 0 {
		t.Errorf("store before a commit point: %v, %v; want it empty (state is applied at commit points)", counts, err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if counts, err := d.Store("count", "counts"); err != nil || len(counts) != 2 {
		t.Errorf("store after the commit point: %v, %v; want cat and the", counts, err)
	}
}
