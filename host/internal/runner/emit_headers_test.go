package runner

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// An emitted record keeps the plugin's headers, in order, and gets
// HeaderVersion last, except on an internal output (a repartition topic),
// which gets the plugin's headers only.
func TestEmitVersionHeaderOnlyOnUserOutputs(t *testing.T) {
	ps := &procState{spec: ProcessorSpec{Name: "p", Outputs: []string{"out", "app-p-words-repartition"}, Internal: []bool{false, true}}}
	tk := &task{proc: ps, tk: &timekeeper{}, acct: testAccount(), ver: newVersion(&versions.Version[Plugin]{Info: versions.Info{ID: "v1@0123456789ab"}}, versions.Canary{})}
	version := kgo.RecordHeader{Key: HeaderVersion, Value: []byte("v1@0123456789ab")}
	trace := kgo.RecordHeader{Key: "trace", Value: []byte("abc")}
	for _, c := range []struct {
		output  int
		headers []abi.Header
		want    []kgo.RecordHeader
	}{
		{0, nil, []kgo.RecordHeader{version}},
		{0, []abi.Header{{Key: "trace", Value: []byte("abc")}}, []kgo.RecordHeader{trace, version}},
		{1, nil, nil},
		{1, []abi.Header{{Key: "trace", Value: []byte("abc")}}, []kgo.RecordHeader{trace}},
	} {
		tk.staged = tk.staged[:0]
		if err := tk.Emit(c.output, &abi.Record{Key: []byte("k"), Value: []byte("v"), Partition: abi.AnyPartition, Headers: c.headers}); err != nil {
			t.Fatal(err)
		}
		got := tk.staged[0].Headers
		if !slices.EqualFunc(got, c.want, func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
			t.Errorf("output %d (%s), plugin headers %v: record headers %v, want %v", c.output, ps.spec.Outputs[c.output], c.headers, got, c.want)
		}
	}
}
