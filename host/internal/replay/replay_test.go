package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// A failed record writes its error line and none of its emits, and
// processing goes on.
func TestTaskFailureLine(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	spec := plugin.Spec{Name: "proc", Outputs: map[string]string{"out": "out-topic"}, RecordTimeout: time.Second}
	p, err := plugin.New(ctx, spec, plugin.Limits{MaxModuleSize: 1 << 20}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.RT.Close(ctx)
	wasm, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "trap.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := p.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	var out bytes.Buffer
	c, err := Task(ctx, p, mod, []Input{
		{Topic: "in", Offset: 0, Timestamp: 1, Key: []byte("okay"), Value: []byte("a")},
		{Topic: "in", Offset: 1, Timestamp: 2, Key: []byte("boom"), Value: []byte("b")},
		{Topic: "in", Offset: 2, Timestamp: 3, Key: []byte("fine"), Value: []byte("c")},
	}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counts{Records: 3, Emitted: 2, Failed: 1}) {
		t.Fatalf("counts %+v", c)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), out.String())
	}
	var l Line
	if err := json.Unmarshal([]byte(lines[1]), &l); err != nil {
		t.Fatal(err)
	}
	if l.In.Offset != 1 || l.Error == "" || l.Output != "" || l.Value != nil {
		t.Fatalf("the failed record's line: %s", lines[1])
	}
}

// A record's writes are taken back when it fails; earlier records' stay.
func TestMemStateUndo(t *testing.T) {
	s := newMemState(1)
	s.begin()
	_ = s.Put(0, []byte("a"), []byte("1"))
	s.begin()
	_ = s.Put(0, []byte("a"), []byte("2"))
	_ = s.Put(0, []byte("b"), []byte("x"))
	_ = s.Delete(0, []byte("a"))
	s.undo()
	if v, ok, _ := s.Get(0, []byte("a")); !ok || string(v) != "1" {
		t.Fatalf("a = %q, %v after undo; want 1", v, ok)
	}
	if _, ok, _ := s.Get(0, []byte("b")); ok {
		t.Fatal("b survived the undo")
	}
	_ = s.Put(0, []byte("c"), []byte("3"))
	it, _ := s.Scan(0, []byte("a"), nil)
	var keys []string
	for {
		k, _, ok, _ := it.Next()
		if !ok {
			break
		}
		keys = append(keys, string(k))
	}
	if strings.Join(keys, ",") != "a,c" {
		t.Fatalf("scan: %v, want a,c in order", keys)
	}
}

// Timers in a replay (abi/ABI.md section 8.1): an event-time timer fires
// at the check after the record that brings the stream time to it, a
// processing-time one at the check after the record that brings the
// replay's wall clock (the largest record timestamp) to it, in
// abi.TimerLess order, each one call whose emits follow the record's
// lines; a cancel takes a timer back; a failing firing is a failure line
// and its timer stays removed; the timers still pending at the end of the
// range do not fire. Twice over the same records gives the same bytes.
func TestTaskTimers(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	spec := plugin.Spec{Name: "proc", Outputs: map[string]string{"out": "out-topic"}, Stores: []string{"counts"}, RecordTimeout: time.Second}
	p, err := plugin.New(ctx, spec, plugin.Limits{MaxModuleSize: 64 << 20}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.RT.Close(ctx)
	wasm, err := os.ReadFile(wasmbuild.Build(t, "./internal/testplugins/timerecho"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := p.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	if err := Check(mod.Info()); err != nil {
		t.Fatalf("a plugin with timers (sdk/timer) is refused: %v", err)
	}
	recs := []Input{
		{Topic: "in", Offset: 0, Timestamp: 1000, Key: []byte("a"), Value: []byte("x")},      // sets e@1010, p@1100
		{Topic: "in", Offset: 1, Timestamp: 1005, Key: []byte("boom"), Value: []byte("x")},   // sets e@1015, p@1105
		{Topic: "in", Offset: 2, Timestamp: 1005, Key: []byte("b"), Value: []byte("x")},      // sets e@1015, p@1105
		{Topic: "in", Offset: 3, Timestamp: 1005, Key: []byte("b"), Value: []byte("cancel")}, // cancels e@1015 of b
		{Topic: "in", Offset: 4, Timestamp: 1020, Key: []byte("c"), Value: []byte("x")},      // fires e@1010 a, e@1015 boom
		{Topic: "in", Offset: 5, Timestamp: 1100, Key: []byte("c"), Value: []byte("x")},      // fires e@1030 c, p@1100 a
	}
	var first, second bytes.Buffer
	c, err := Task(ctx, p, mod, recs, nil, &first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Task(ctx, p, mod, recs, nil, &second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("two replays differ:\n%s\n%s", first.String(), second.String())
	}
	var got []string
	for _, s := range strings.Split(strings.TrimSpace(first.String()), "\n") {
		var l Line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatal(err)
		}
		if l.Timer == nil {
			t.Fatalf("a line of a record: %s (the plugin emits only from timers)", s)
		}
		if l.Error != "" {
			got = append(got, "@"+strconv.FormatInt(l.In.Offset, 10)+" fail "+l.Timer.Kind+":"+string(l.Timer.Key))
			continue
		}
		got = append(got, "@"+strconv.FormatInt(l.In.Offset, 10)+" "+string(l.Value))
	}
	want := []string{
		"@4 event:1010:a:1",
		"@4 fail event:boom",
		"@5 event:1030:c:2",
		"@5 processing:1100:a:1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("firings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c.Records != 6 || c.Fired != 4 || c.Failed != 1 || c.Emitted != 3 {
		t.Fatalf("counts %+v", c)
	}
}
