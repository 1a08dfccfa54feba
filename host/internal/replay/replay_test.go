package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/plugin"
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
	}, &out)
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
