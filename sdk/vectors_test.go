package sdk_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// The SDK side of the shared vectors (ABI.md section 5): every vector,
// written into the input buffer byte for byte, must decode to its fields in
// the handler, and emitting those fields back must produce its exact bytes
// (with the two fields emit itself sets: offset -1 and the output index).
func TestSharedVectorsThroughSDK(t *testing.T) {
	vs, bad, err := abitest.Load(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 || len(bad) == 0 {
		t.Fatal("no vectors loaded")
	}
	out := sdk.Output("out")
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			var got abi.Record
			sdk.OnInit(nil)
			sdk.Handle(func(r *sdk.Record) error {
				got = abi.Record{Timestamp: r.Timestamp, Offset: r.Offset, Partition: r.Partition,
					Index: uint32(r.Input), Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
				for _, h := range r.Headers {
					got.Headers = append(got.Headers, abi.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
				}
				return out.EmitTo(r.Partition, sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
			})
			h := sdktest.New(t, sdktest.Outputs("out"))
			res := h.ProcessRaw(v.Encoded)
			if res.Err != nil {
				t.Fatalf("record failed: %v", res.Err)
			}
			if !abitest.Equal(&got, &v.Record) {
				t.Fatalf("handler saw %+v, want %+v", got, v.Record)
			}
			want := bytes.Clone(v.Encoded)
			noOffset := int64(abi.NoOffset)
			binary.LittleEndian.PutUint64(want[8:], uint64(noOffset))
			binary.LittleEndian.PutUint32(want[20:], 0) // index of "out"
			if len(res.All) != 1 || !bytes.Equal(res.All[0].Raw, want) {
				t.Fatalf("emitted %x, want %x", res.All[0].Raw, want)
			}
		})
	}
	for name, enc := range bad {
		t.Run("malformed/"+name, func(t *testing.T) {
			called := false
			sdk.OnInit(nil)
			sdk.Handle(func(*sdk.Record) error { called = true; return nil })
			h := sdktest.New(t, sdktest.Outputs("out"))
			res := h.ProcessRaw(enc)
			if res.Status != abi.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "malformed") {
				t.Fatalf("got status %d, err %v; want FAILED with a malformed-record error", res.Status, res.Err)
			}
			if called {
				t.Fatal("the handler ran on a malformed record")
			}
		})
	}
}
