package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// withSection appends a custom section called name with payload to a
// module (custom sections may come anywhere).
func withSection(wasm []byte, name string, payload []byte) []byte {
	body := appendU32(nil, uint32(len(name)))
	body = append(body, name...)
	body = append(body, payload...)
	out := append([]byte(nil), wasm...)
	out = append(out, secCustom)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

// entry is one declaration record: kind, length, name.
func entry(kind byte, name string) []byte {
	return append([]byte{kind, byte(len(name))}, name...)
}

// A module's declared handles are checked before any of its code runs:
// one the processor lacks fails the start with every missing name (a
// store may be a table), which the host turns into the config fields to
// add; with all declared, the start goes on (here into the fixture's own
// failing init).
func TestDeclaredHandlesAreCheckedAtStart(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	src := wasmFile(t, "initfail")
	// Two sections, as a linker concatenating two crates' would leave,
	// with a duplicate.
	wasm := withSection(src, handlesSection, slices.Concat(entry('o', "out"), entry('o', "alerts"), entry('s', "seen")))
	wasm = withSection(wasm, handlesSection, slices.Concat(entry('s', "cards"), entry('o', "alerts"), entry('s', "rates")))
	m, err := r.Compile(context.Background(), "declared", wasm)
	if err != nil {
		t.Fatal(err)
	}
	want := []Handle{{"output", "out"}, {"output", "alerts"}, {"store", "seen"}, {"store", "cards"}, {"store", "rates"}}
	if got := m.Info().Handles; !slices.Equal(got, want) {
		t.Fatalf("handles %v, want %v", got, want)
	}

	b := Binding{Name: "proc", Outputs: []string{"out"}, Sink: &sinkCapture{},
		Stores: []string{"seen"}, State: newMemState(1), Tables: []string{"rates"}, TableState: newMemState(1)}
	_, err = m.Instantiate(context.Background(), b)
	var me *ModuleError
	if !errors.As(err, &me) || me.Kind != InitFailed {
		t.Fatalf("start: %v", err)
	}
	wantMissing := []Undeclared{{"output", "alerts"}, {"store", "cards"}}
	if !slices.Equal(me.Undeclared, wantMissing) || !strings.Contains(me.Msg, `output "alerts", store "cards"`) {
		t.Fatalf("undeclared %v (%s), want %v", me.Undeclared, me.Msg, wantMissing)
	}

	b.Outputs = append(b.Outputs, "alerts")
	b.Stores = append(b.Stores, "cards")
	b.State = newMemState(2)
	_, err = m.Instantiate(context.Background(), b)
	if !errors.As(err, &me) || len(me.Undeclared) != 0 || !strings.Contains(err.Error(), "StatusFailed") {
		t.Fatalf("start with every handle declared: %v, want the fixture's own init failure", err)
	}
}

// A malformed declaration section refuses the module at compile, naming
// the entry; a module without one has no handles.
func TestDeclaredHandlesMalformed(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	src := wasmFile(t, "passthrough")
	if m := compileFile(t, r, "passthrough"); len(m.Info().Handles) != 0 {
		t.Fatalf("handles %v in a module without the section", m.Info().Handles)
	}
	many := []byte{}
	for k := range maxHandles + 1 {
		many = append(many, entry('o', strings.Repeat("x", 1+k%200)+string(rune('a'+k%26))+strings.Repeat("y", k/200))...)
	}
	for _, c := range []struct {
		name, payload, want string
	}{
		{"bad kind", string(slices.Concat(entry('o', "out"), entry('t', "t"))), "entry 1 at byte 5 has kind 0x74"},
		{"cut short", string(slices.Concat(entry('o', "out"), []byte{'s'})), "entry 1 at byte 5 is cut short"},
		{"empty name", string([]byte{'o', 0}), "a name of 0 bytes"},
		{"name past the end", string([]byte{'o', 9, 'a'}), "a name of 9 bytes, with 1 left"},
		{"too many", string(many), "more than 1024 distinct names"},
	} {
		_, err := r.Compile(context.Background(), c.name, withSection(src, handlesSection, []byte(c.payload)))
		if ModuleErrorKindOf(err) != CompileFailed || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), handlesSection) {
			t.Errorf("%s: %v, want a compile failure saying %q", c.name, err, c.want)
		}
	}
}
