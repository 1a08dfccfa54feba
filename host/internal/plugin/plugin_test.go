package plugin

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/control"
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
