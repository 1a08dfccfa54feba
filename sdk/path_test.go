package sdk_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// The per-record path has shortcuts (sdk.go, "The per-record path"): a
// record that decodes like the previous one stores only lengths, and an
// emit of the input's own key and value sends the input bytes. These tests
// drive them with random sequences of records and emits and compare every
// record the handler sees with abi's decoder, and every emitted byte with
// abi's encoder.

// randField is nil, empty or up to 40 random bytes, the empty and null ones
// often, so that runs of equal shapes (the shortcut) and changes of shape
// (its way out) both occur.
func randField(r *rand.Rand) []byte {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2, 3:
		return []byte("key0001") // same length: the value stays put
	}
	b := make([]byte, r.IntN(41))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randRecord(r *rand.Rand) abi.Record {
	rec := abi.Record{Timestamp: r.Int64N(1 << 42), Offset: r.Int64N(1 << 40), Partition: r.Int32N(64),
		Index: uint32(r.IntN(3)), Key: randField(r), Value: randField(r)}
	if r.IntN(4) == 0 {
		for i := range r.IntN(4) {
			rec.Headers = append(rec.Headers, abi.Header{Key: "h" + strconv.Itoa(i%2), Value: randField(r)})
		}
	}
	return rec
}

// sameBytes compares telling null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameRecord(got *sdk.Record, want *abi.Record) bool {
	if got.Timestamp != want.Timestamp || got.Offset != want.Offset || got.Partition != want.Partition ||
		got.Input != int(want.Index) || !sameBytes(got.Key, want.Key) || !sameBytes(got.Value, want.Value) ||
		len(got.Headers) != len(want.Headers) {
		return false
	}
	for i := range got.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !sameBytes(got.Headers[i].Value, want.Headers[i].Value) {
			return false
		}
	}
	return true
}

func TestRandomRecordsDecodeAndEmit(t *testing.T) {
	out := sdk.Output("out")
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		want   abi.Record   // the record being processed
		emits  []abi.Record // what the handler emitted, as abi would encode it
		failed string
	)
	sdk.OnInit(nil)
	sdk.Handle(func(r *sdk.Record) error {
		if !sameRecord(r, &want) {
			failed = "handler saw a record unlike abi's decoding"
			return nil
		}
		// Every slice is capped: appending copies.
		if cap(r.Key) != len(r.Key) || cap(r.Value) != len(r.Value) || cap(r.Headers) != len(r.Headers) {
			failed = "a slice of the record is not capped"
			return nil
		}
		emits = emits[:0]
		for range rng.IntN(4) {
			o := sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers}
			switch rng.IntN(9) {
			case 0: // the input's own fields, swapped
				o.Key, o.Value = r.Value, r.Key
			case 1: // a part of the input's value
				if len(r.Value) > 1 {
					o.Value = r.Value[1:]
				}
			case 2: // a new value
				o.Value = []byte("new")
			case 3: // headers dropped or changed
				if len(o.Headers) > 0 {
					o.Headers = append(o.Headers[:len(o.Headers)-1:len(o.Headers)-1], sdk.Header{Key: "x", Value: r.Key})
				} else {
					o.Headers = nil
				}
			case 4: // modified in place: still the input's own bytes
				if len(r.Value) > 0 {
					r.Value[0] ^= 0xff
				}
			case 5: // null and empty swapped
				if o.Key == nil {
					o.Key = []byte{}
				} else if len(o.Key) == 0 {
					o.Key = nil
				}
			case 6:
				o.Timestamp = rng.Int64N(1 << 40)
			}
			partition := int32(abi.AnyPartition)
			var err error
			if rng.IntN(3) == 0 {
				partition = rng.Int32N(8)
				err = out.EmitTo(partition, o)
			} else {
				err = out.Emit(o)
			}
			if err != nil {
				return err
			}
			ts := o.Timestamp
			if ts == 0 {
				ts = r.Timestamp
			}
			e := abi.Record{Timestamp: ts, Offset: abi.NoOffset, Partition: partition, Index: 0,
				Key: bytes.Clone(o.Key), Value: bytes.Clone(o.Value)}
			for _, h := range o.Headers {
				e.Headers = append(e.Headers, abi.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
			}
			emits = append(emits, e)
		}
		return nil
	})
	h := sdktest.New(t, sdktest.Outputs("out"))
	for i := range 3000 {
		want = randRecord(rng)
		res := h.ProcessRaw(want.AppendEncode(nil))
		if failed != "" {
			t.Fatalf("record %d %+v: %s", i, want, failed)
		}
		if res.Err != nil {
			t.Fatalf("record %d %+v: %v", i, want, res.Err)
		}
		if len(res.All) != len(emits) {
			t.Fatalf("record %d: %d emits, want %d", i, len(res.All), len(emits))
		}
		for k := range emits {
			if enc := emits[k].AppendEncode(nil); !bytes.Equal(res.All[k].Raw, enc) {
				t.Fatalf("record %d %+v emit %d:\n got %x\nwant %x", i, want, k, res.All[k].Raw, enc)
			}
		}
	}
}

// An empty key or value, as decoded, points into the input buffer and not
// past its end, whichever way it was decoded; the shortcut must leave the
// slices exactly as slicing would.
func TestDecodedEmptyFieldsStayInsideTheBuffer(t *testing.T) {
	var ptrs [][2]unsafe.Pointer
	sdk.OnInit(nil)
	sdk.Handle(func(r *sdk.Record) error {
		ptrs = append(ptrs, [2]unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(r.Key)), unsafe.Pointer(unsafe.SliceData(r.Value))})
		return nil
	})
	h := sdktest.New(t)
	for _, r := range []sdktest.Record{
		{Key: []byte{}, Value: []byte{}}, {Key: []byte{}, Value: []byte{}}, // moved, then the shortcut
		{Key: []byte("k"), Value: []byte{}}, {Key: []byte("k"), Value: []byte{}},
		{Key: nil, Value: []byte{}}, {Key: nil, Value: []byte{}},
	} {
		h.MustProcess(r)
	}
	for i := 0; i < len(ptrs); i += 2 {
		if ptrs[i] != ptrs[i+1] {
			t.Errorf("records %d and %d: the same shape decoded to %v and %v", i, i+1, ptrs[i], ptrs[i+1])
		}
	}
	// The empty value of a record filling the buffer does not point past it.
	big := bytes.Repeat([]byte{'k'}, 1<<20)
	var end unsafe.Pointer
	sdk.Handle(func(r *sdk.Record) error {
		if r.Value == nil || len(r.Value) != 0 {
			return errors.New("want an empty value")
		}
		end = unsafe.Pointer(unsafe.SliceData(r.Value))
		return nil
	})
	for range 2 {
		h.MustProcess(sdktest.Record{Key: big[:1<<20-abi.HeaderSize], Value: []byte{}}) // grows the buffer to 1 MiB
		if end == nil {
			t.Fatal("no value pointer")
		}
	}
}

// A panic while the SDK reads a returned error's text fails the record as
// a panic does; the instance goes on.
func TestPanicInErrorTextIsRecovered(t *testing.T) {
	sdk.OnInit(nil)
	sdk.Handle(func(r *sdk.Record) error {
		if r.Value == nil {
			return panickyError{}
		}
		return nil
	})
	h := sdktest.New(t)
	res := h.Process(sdktest.Record{})
	if res.Status != abi.StatusFailed || res.Err == nil || res.Err.Error() != "panic: no text" {
		t.Fatalf("got status %d err %v", res.Status, res.Err)
	}
	h.MustProcess(sdktest.Record{Value: []byte("v")})
}

type panickyError struct{}

func (panickyError) Error() string { panic("no text") }

// Emitting outside a handler (from init) still reports EPHASE, through the
// general path.
func TestEmitOutsideRecordGoesTheGeneralWay(t *testing.T) {
	out := sdk.Output("out")
	var err error
	sdk.Handle(func(*sdk.Record) error { return nil })
	sdk.OnInit(func() error {
		err = out.Emit(sdk.Out{Value: []byte("v")})
		return nil
	})
	sdktest.New(t, sdktest.Outputs("out"))
	if !errors.Is(err, abi.ErrnoPhase) {
		t.Fatalf("Emit during init = %v", err)
	}
}

// An input record over abi.MaxRecordSize emitted as it is gets ETOOLARGE,
// as an encoded one would, and crosses nothing to the host.
func TestEmitOfOversizedInput(t *testing.T) {
	out := sdk.Output("out")
	var err error
	sdk.OnInit(nil)
	sdk.Handle(func(r *sdk.Record) error {
		err = out.Emit(sdk.Out{Key: r.Key, Value: r.Value})
		return nil
	})
	h := sdktest.New(t, sdktest.Outputs("out"))
	res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: make([]byte, abi.MaxRecordSize)})
	if !errors.Is(err, abi.ErrnoTooLarge) || len(res.All) != 0 {
		t.Fatalf("Emit = %v, %d emitted", err, len(res.All))
	}
	if !strings.Contains(err.Error(), `emit "out"`) {
		t.Fatalf("error %q should name the call and the output", err)
	}
}
