package plugin

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/engine"
)

// The size limit is inclusive, and its error names the setting in the
// config's own units.
func TestCheckSize(t *testing.T) {
	lim := Limits{MaxModuleSize: 1 << 10}
	if err := lim.CheckSize(make([]byte, 1<<10)); err != nil {
		t.Errorf("a module of exactly the limit: %v", err)
	}
	err := lim.CheckSize(make([]byte, 1<<10+1))
	if err == nil || !strings.Contains(err.Error(), "1025 bytes, over runtime.max_module_size (1KiB)") {
		t.Errorf("a module over the limit: %v", err)
	}
}

func TestVersionNames(t *testing.T) {
	v := control.NewVersion([]byte("module"), "v2")
	if got := VersionID(v); got != "v2@"+v.Short() {
		t.Errorf("VersionID %q", got)
	}
	if got := VersionID(control.NewVersion([]byte("module"), "")); got != v.Short() {
		t.Errorf("VersionID without a label %q", got)
	}
	if got := Info(v); got.ID != VersionID(v) || got.Hash != v.Hash || got.Label != "v2" || got.Size != v.Size {
		t.Errorf("Info %+v", got)
	}
	if got := Info(control.Version{}); got.ID != "(unreadable)" || got.Hash != "" {
		t.Errorf("Info of a version without a hash %+v", got)
	}
}

// A module that sets timers needs a store (ABI.md section 8.2): refused
// for a processor without one, with an error naming the processor, the
// import and why; accepted (its trial instance served a Time) with one.
func TestTimersNeedAStore(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "timers.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, stores := range [][]string{nil, {"s"}} {
		p, err := New(ctx, Spec{Name: "ticker", Outputs: map[string]string{"out": "topic"}, Stores: stores}, Limits{}, log)
		if err != nil {
			t.Fatal(err)
		}
		defer p.RT.Close(ctx)
		mod, err := p.Compile(ctx, wasm)
		if stores == nil {
			want := `processor "ticker": the plugin imports wasmstream.timer_set but the processor declares no store or task table: timers are kept in the task's state`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("without a store: %v, want %q", err, want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("with a store: %v", err)
		}
		_ = mod.Close(ctx)
	}
	if err := CheckStores(Spec{Name: "p"}, engine.Info{ImportsCommitMark: true, ImportsTimeNow: true}); err != nil {
		t.Errorf("commit_mark and time_now need no store: %v", err)
	}
}
