package runner

import (
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// BenchmarkEmit measures staging one emitted record (100-byte value): the
// copy out of plugin memory and the kgo.Record. An emit without headers of
// its own shares its version's header list; one with a header pays for a
// list of its own (the baseline, same run).
func BenchmarkEmit(b *testing.B) {
	ps := &procState{spec: ProcessorSpec{Name: "p", Outputs: []string{"out"}}}
	t := &task{proc: ps, tk: &timekeeper{}, acct: (*account.Pool)(nil).Open(1<<60, nil), ver: newVersion(&versions.Version[Plugin]{Info: versions.Info{ID: "v1@0123456789ab"}}, versions.Canary{})}
	for _, c := range []struct {
		name    string
		headers []abi.Header
	}{
		{"headers=none", nil},
		{"headers=one", []abi.Header{{Key: "trace", Value: []byte("abc")}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rec := &abi.Record{Key: []byte("key-1"), Value: make([]byte, 100), Partition: abi.AnyPartition, Headers: c.headers}
			b.ReportAllocs()
			for b.Loop() {
				if err := t.Emit(0, rec); err != nil {
					b.Fatal(err)
				}
				t.staged = t.staged[:0]
			}
		})
	}
}
