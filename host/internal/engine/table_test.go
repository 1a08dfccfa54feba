package engine

import (
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// readOnly is a TableState that fails the test if it is ever written.
type readOnly struct {
	*memState
	t *testing.T
}

func (r readOnly) Put(int, []byte, []byte) error { r.t.Error("Put on a table"); return nil }
func (r readOnly) Delete(int, []byte) error      { r.t.Error("Delete on a table"); return nil }

// Tables resolve after the stores, are read through TableState, and a
// write to one returns EINVAL to the plugin without failing the record.
func TestGlobalTablesReadOnly(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	st, tables := newMemState(1), newMemState(1)
	_ = tables.Put(0, []byte("k"), []byte("table value"))
	i, sink := instantiate(t, compileFile(t, r, "tableops"), Binding{
		Outputs: []string{"out"}, Stores: []string{"s"}, State: st,
		Tables: []string{"t"}, TableState: readOnly{tables, t},
	})
	if err := i.Process(bg, rec("x", "y")); err != nil {
		t.Fatalf("the record failed: %v", err)
	}
	entry := abi.EncodeScanEntry(nil, []byte("k"), []byte("table value"))
	want := []struct {
		code  int32
		value string
	}{
		{0, ""},                            // store_index("s")
		{1, ""},                            // store_index("t"): after the stores
		{abi.ErrnoNoName.Result(), ""},     // store_index("zz")
		{abi.ErrnoInval.Result(), ""},      // state_put on the table
		{abi.ErrnoInval.Result(), ""},      // state_delete on the table
		{11, "table value"},                // state_get on the table
		{0, ""},                            // state_put on the store
		{int32(len(entry)), string(entry)}, // scan of the table
	}
	got := sink.take()
	if len(got) != len(want) {
		t.Fatalf("%d reports, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k].rec.Partition != w.code || string(got[k].rec.Value) != w.value {
			t.Errorf("call %d: got %d %q, want %d %q", k, got[k].rec.Partition, got[k].rec.Value, w.code, w.value)
		}
	}
	if string(st.stores[0]["k"]) != "w" || string(tables.stores[0]["k"]) != "table value" {
		t.Errorf("store %q, table %q", st.stores[0]["k"], tables.stores[0]["k"])
	}
}

// A binding with tables needs a TableState.
func TestGlobalTablesNeedTableState(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	m := compileFile(t, r, "tableops")
	if _, err := m.Instantiate(bg, Binding{Name: "p", Outputs: []string{"out"}, Sink: &sinkCapture{}, Tables: []string{"t"}}); err == nil {
		t.Fatal("instantiated tables without a TableState")
	}
}
