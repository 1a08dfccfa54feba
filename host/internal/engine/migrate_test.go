package engine

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// TestMigrate: wasmstream_migrate gets the version ID in its input buffer,
// may write state, may not emit (EPHASE), and fails like a record: FAILED,
// a trap, a loop past the time limit, writes past the state limit.
func TestMigrate(t *testing.T) {
	r, _ := newRuntime(t, Options{RecordTimeout: 200 * time.Millisecond, Record: RecordLimits{MaxStateBytes: 1 << 20}})
	m := compileFile(t, r, "migrate")
	if !m.Info().HasMigrate {
		t.Fatalf("info %+v: no HasMigrate", m.Info())
	}
	st := newMemState(1)
	i, sink := instantiate(t, m, Binding{Outputs: []string{"out"}, Stores: []string{"s"}, State: st})
	if err := i.Migrate(bg, "v1@0123456789ab"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := st.Get(0, []byte("from")); string(v) != "v1@0123456789ab" {
		t.Errorf("the migration read the version ID %q", v)
	}
	if v, _, _ := st.Get(0, []byte("emit")); len(v) != 4 || int32(binary.LittleEndian.Uint32(v)) != abi.ErrnoPhase.Result() {
		t.Errorf("emit during a migration returned %v, want -EPHASE", v)
	}
	if got := sink.take(); len(got) != 0 {
		t.Errorf("a migration emitted %d records", len(got))
	}
	for _, c := range []struct {
		from string
		kind FailureKind
		msg  string
	}{
		{"fail", PluginFailed, ""},
		{"trap", Trap, "wasmstream_migrate"},
		{"loop", Timeout, "interrupted"},
		{"bloat", LimitExceeded, "state bytes"},
	} {
		err := i.Migrate(bg, c.from)
		if KindOf(err) != c.kind || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("migration %q: %v, want %v containing %q", c.from, err, c.kind, c.msg)
		}
	}
	// A trap discarded the instance: the next migration revives it.
	if err := i.Migrate(bg, "v1"); err != nil {
		t.Fatalf("after failures: %v", err)
	}

	// A module without the export: a plain error, nothing runs.
	p, _ := instantiate(t, compileFile(t, r, "passthrough"), Binding{Outputs: []string{"out"}})
	if err := p.Migrate(bg, "v1"); err == nil || !strings.Contains(err.Error(), "does not export wasmstream_migrate") {
		t.Errorf("Migrate on a module without it: %v", err)
	}
	if err := i.Migrate(bg, strings.Repeat("x", abi.MaxMigrateFrom+1)); err == nil || !strings.Contains(err.Error(), "MaxMigrateFrom") {
		t.Errorf("an overlong version ID: %v", err)
	}
}

// TestMigrateSignature: a wasmstream_migrate of another signature is
// refused at load, naming the one wanted.
func TestMigrateSignature(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	_, err := r.Compile(bg, "migratesig", wasmFile(t, "migratesig"))
	if ModuleErrorKindOf(err) != WrongSignature || !strings.Contains(err.Error(), "wasmstream_migrate is func (i32, i32) -> i32, want func (i32) -> i32") {
		t.Fatalf("Compile: %v", err)
	}
	if _, err := Inspect(bg, wasmFile(t, "migratesig")); ModuleErrorKindOf(err) != WrongSignature {
		t.Fatalf("Inspect: %v", err)
	}
}
