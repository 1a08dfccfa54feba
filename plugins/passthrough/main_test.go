package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestPassthroughEmitsUnchanged(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("out"))
	in := []sdktest.Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 1700000000000, Partition: 3, Offset: 7,
			Headers: []abi.Header{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{Key: nil, Value: nil, Timestamp: 1},           // null key, tombstone
		{Key: []byte{}, Value: []byte{}, Timestamp: 2}, // empty, not null
		{Value: bytes.Repeat([]byte{0xff}, 200_000)},   // larger than the first input buffer
	}
	for i, r := range in {
		res := h.MustProcess(r)
		got := res.Emitted["out"]
		if len(got) != 1 || len(res.All) != 1 {
			t.Fatalf("record %d: emitted %v", i, res.Emitted)
		}
		e := got[0]
		if !same(e.Key, r.Key) || !same(e.Value, r.Value) || e.Timestamp != r.Timestamp || e.Partition != abi.AnyPartition {
			t.Errorf("record %d: emitted key %q value %.20q ts %d partition %d", i, e.Key, e.Value, e.Timestamp, e.Partition)
		}
		if len(e.Headers) != len(r.Headers) {
			t.Fatalf("record %d: headers %v", i, e.Headers)
		}
		for j := range e.Headers {
			if e.Headers[j].Key != r.Headers[j].Key || !same(e.Headers[j].Value, r.Headers[j].Value) {
				t.Errorf("record %d header %d: %+v, want %+v", i, j, e.Headers[j], r.Headers[j])
			}
		}
	}
}

// same compares bytes telling null from empty.
func same(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestPassthroughConfig(t *testing.T) {
	for _, cfg := range []string{"", "null", "{}"} {
		sdktest.New(t, sdktest.Outputs("out"), sdktest.Config(cfg))
	}
	if _, err := sdktest.Start(t, sdktest.Outputs("out"), sdktest.Config(`{"output":"x"}`)); err == nil ||
		!strings.Contains(err.Error(), `passthrough: config: takes no config; got {"output":"x"}`) {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := sdktest.Start(t, sdktest.Outputs("other")); err == nil || !strings.Contains(err.Error(), `"out"`) {
		t.Fatalf("undeclared output: %v", err)
	}
}
