package sdk

import (
	"errors"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/fakeabi"
)

// nopHost answers every call with success and keeps nothing, so that
// AllocsPerRun counts the SDK's allocations only.
type nopHost struct{ value []byte }

func (nopHost) Emit([]byte) int32                       { return 0 }
func (nopHost) OutputIndex(string) int32                { return 0 }
func (nopHost) StoreIndex(string) int32                 { return 0 }
func (nopHost) Config([]byte) int32                     { return 0 }
func (nopHost) Log(uint32, string) int32                { return 0 }
func (nopHost) SetError(string) int32                   { return 0 }
func (nopHost) StatePut(uint32, []byte, []byte) int32   { return 0 }
func (nopHost) StateDelete(uint32, []byte) int32        { return 0 }
func (nopHost) ScanOpen(uint32, []byte, []byte) int32   { return 0 }
func (nopHost) ScanNext(uint32, []byte) int32           { return 0 }
func (nopHost) ScanClose(uint32) int32                  { return 0 }
func (nopHost) TimerSet(uint32, int64, []byte) int32    { return 0 }
func (nopHost) TimerCancel(uint32, int64, []byte) int32 { return 0 }
func (nopHost) TimeNow(uint32) int64                    { return 0 }
func (nopHost) CommitMark([]byte) int32                 { return 0 }
func (h nopHost) StateGet(_ uint32, _, out []byte) int32 {
	copy(out, h.value)
	return int32(len(h.value))
}

// The per-record path (decode, handler, encode, emit) must not allocate for
// a record without headers; a state read allocates exactly its result.
// Guards the SDK's weight (sdk/doc.go, "Weight"): no fmt in the hot path.
func TestPerRecordAllocations(t *testing.T) {
	prev := fakeabi.CurrentHost()
	fakeabi.SetHost(nopHost{value: []byte("12345678")})
	defer fakeabi.SetHost(prev)
	prevHandler, prevInit := handler, initHook
	defer func() { handler, initHook = prevHandler, prevInit }()
	reset()

	out := Output("out")
	st := Store("s")
	var withGet, withAppendGet bool
	var val []byte
	Handle(func(r *Record) error {
		if withGet {
			if _, _, err := st.Get(r.Key); err != nil {
				return err
			}
		}
		if withAppendGet {
			var err error
			if val, _, err = st.AppendGet(val[:0], r.Key); err != nil || string(val) != "12345678" {
				return errors.New("AppendGet: " + string(val))
			}
		}
		return out.Emit(Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
	})
	rec := abi.Record{Timestamp: 1, Offset: 2, Key: []byte("key"), Value: make([]byte, 100)}
	enc := rec.AppendEncode(nil)
	buf := input(uint32(len(enc)))
	copy(buf, enc)
	if st := process(uint32(len(enc))); st != abi.StatusOK {
		t.Fatalf("status %d", st)
	}
	if n := testing.AllocsPerRun(200, func() { process(uint32(len(enc))) }); n != 0 {
		t.Errorf("record without headers: %v allocations, want 0", n)
	}
	withGet = true
	if n := testing.AllocsPerRun(200, func() { process(uint32(len(enc))) }); n != 1 {
		t.Errorf("record with one Get: %v allocations, want 1 (the value)", n)
	}
	withGet, withAppendGet = false, true
	if n := testing.AllocsPerRun(200, func() {
		if st := process(uint32(len(enc))); st != abi.StatusOK {
			t.Fatalf("AppendGet: status %d", st)
		}
	}); n != 0 {
		t.Errorf("record with one AppendGet into a reused buffer: %v allocations, want 0", n)
	}
}

func TestInputBufferGrowth(t *testing.T) {
	prev := inputBuf
	defer func() { inputBuf = prev }()
	inputBuf = nil
	if b := input(4096); len(b) != minInput {
		t.Fatalf("first buffer %d bytes, want %d", len(b), minInput)
	}
	if b := input(minInput + 1); len(b) != 2*minInput {
		t.Fatalf("grown to %d, want doubling to %d", len(b), 2*minInput)
	}
	if b := input(10); len(b) != 2*minInput {
		t.Fatalf("a smaller request must keep the buffer, got %d", len(b))
	}
	if b := input(maxInput + 1); b != nil {
		t.Fatalf("over maxInput: %d bytes, want nil (the export returns 0)", len(b))
	}
}

// Header names are strings; decoding reuses the previous records' when the
// bytes are the same, so a steady stream of records with headers does not
// allocate either, however the handler emits them.
func TestPerRecordAllocationsWithHeaders(t *testing.T) {
	prev := fakeabi.CurrentHost()
	fakeabi.SetHost(nopHost{})
	defer fakeabi.SetHost(prev)
	prevHandler, prevInit := handler, initHook
	defer func() { handler, initHook = prevHandler, prevInit }()
	reset()

	out := Output("out")
	Handle(func(r *Record) error {
		if err := out.Emit(Out{Key: r.Key, Value: r.Value, Headers: r.Headers}); err != nil {
			return err
		}
		return out.Emit(Out{Key: r.Value, Value: r.Key, Headers: r.Headers[1:]})
	})
	rec := abi.Record{Timestamp: 1, Offset: 2, Key: []byte("key"), Value: make([]byte, 100),
		Headers: []abi.Header{{Key: "trace-id", Value: []byte("abc")}, {Key: "source", Value: nil}}}
	enc := rec.AppendEncode(nil)
	buf := input(uint32(len(enc)))
	copy(buf, enc)
	if st := process(uint32(len(enc))); st != abi.StatusOK {
		t.Fatalf("status %d", st)
	}
	if n := testing.AllocsPerRun(200, func() { process(uint32(len(enc))) }); n != 0 {
		t.Errorf("record with headers: %v allocations, want 0", n)
	}
}
