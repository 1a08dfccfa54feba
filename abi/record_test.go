package abi_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
)

func loadVectors(t *testing.T) ([]abitest.Vector, map[string][]byte) {
	t.Helper()
	vs, bad, err := abitest.Load(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 || len(bad) == 0 {
		t.Fatal("no test vectors loaded")
	}
	return vs, bad
}

// The shared vectors were written by an independent encoder (testdata/gen.py);
// the Go codec must decode them to the same fields and re-encode the same bytes.
func TestVectorsRoundTrip(t *testing.T) {
	vs, _ := loadVectors(t)
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			var got abi.Record
			if err := got.Decode(v.Encoded); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !abitest.Equal(&got, &v.Record) {
				t.Fatalf("decoded %+v, want %+v", got, v.Record)
			}
			if n := v.Record.EncodedSize(); n != len(v.Encoded) {
				t.Fatalf("EncodedSize = %d, want %d", n, len(v.Encoded))
			}
			if enc := v.Record.AppendEncode(nil); !bytes.Equal(enc, v.Encoded) {
				t.Fatalf("encoded %x, want %x", enc, v.Encoded)
			}
		})
	}
}

func TestMalformedRejected(t *testing.T) {
	_, bad := loadVectors(t)
	for name, enc := range bad {
		t.Run(name, func(t *testing.T) {
			var r abi.Record
			if err := r.Decode(enc); !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("Decode = %v, want ErrMalformed", err)
			}
		})
	}
}

// A hand-checked layout, so that a bug shared by gen.py and the codec still shows.
func TestLayoutByHand(t *testing.T) {
	r := abi.Record{Timestamp: 0x0102, Offset: 3, Partition: -1, Index: 2, Key: []byte("k"), Value: nil,
		Headers: []abi.Header{{Key: "h", Value: []byte("v")}}}
	want := []byte{
		0x02, 0x01, 0, 0, 0, 0, 0, 0, // timestamp
		3, 0, 0, 0, 0, 0, 0, 0, // offset
		0xff, 0xff, 0xff, 0xff, // partition -1
		2, 0, 0, 0, // index
		1, 0, 0, 0, // key length
		0xff, 0xff, 0xff, 0xff, // null value
		1, 0, 0, 0, // one header
		'k',
		1, 0, 0, 0, 1, 0, 0, 0, 'h', 'v',
	}
	if got := r.AppendEncode(nil); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

func TestDecodeReusesHeaders(t *testing.T) {
	vs, _ := loadVectors(t)
	var r abi.Record
	var enc []byte
	for _, v := range vs {
		if len(v.Record.Headers) > 1 {
			enc = v.Encoded
		}
	}
	if err := r.Decode(enc); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := r.Decode(enc); err != nil {
			t.Fatal(err)
		}
	})
	// one string per header name, nothing else
	if allocs > float64(len(r.Headers)) {
		t.Fatalf("Decode allocates %.0f times for %d headers", allocs, len(r.Headers))
	}
}

func TestEncodeToDoesNotAllocate(t *testing.T) {
	r := abi.Record{Key: []byte("key"), Value: make([]byte, 100), Headers: []abi.Header{{Key: "a", Value: []byte("b")}}}
	buf := make([]byte, r.EncodedSize())
	if allocs := testing.AllocsPerRun(100, func() { r.EncodeTo(buf) }); allocs != 0 {
		t.Fatalf("EncodeTo allocates %.0f times", allocs)
	}
}

func TestScanEntry(t *testing.T) {
	e := abi.EncodeScanEntry(nil, []byte("key"), []byte("value"))
	k, v, err := abi.DecodeScanEntry(e)
	if err != nil || string(k) != "key" || string(v) != "value" {
		t.Fatalf("got %q %q %v", k, v, err)
	}
	if _, _, err := abi.DecodeScanEntry(e[:len(e)-1]); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("short entry: %v", err)
	}
}

func TestErrno(t *testing.T) {
	if got := abi.ErrnoFault.Error(); got != "EFAULT: pointer or length outside plugin memory" {
		t.Fatal(got)
	}
	if e, ok := abi.ErrnoOf(abi.ErrnoNotFound.Result()); !ok || e != abi.ErrnoNotFound {
		t.Fatal(e, ok)
	}
	if _, ok := abi.ErrnoOf(0); ok {
		t.Fatal("0 is not an errno")
	}
	if got := abi.Errno(99).Name(); got != "E99" {
		t.Fatal(got)
	}
}
