package abi_test

import (
	"bytes"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
)

// FuzzRecordDecode: the host decodes every record a plugin emits, so Decode
// sees hostile bytes. It must never panic, and whatever it accepts is
// canonical: it re-encodes to the same bytes, with EncodedSize their length.
// The seeds are the shared test vectors (good and bad) and the corpus in
// testdata/fuzz/FuzzRecordDecode.
func FuzzRecordDecode(f *testing.F) {
	vs, bad, err := abitest.Load(abitest.Path())
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vs {
		f.Add(v.Encoded)
	}
	for _, b := range bad {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var r abi.Record
		if err := r.Decode(src); err != nil {
			return
		}
		if n := r.EncodedSize(); n != len(src) {
			t.Fatalf("EncodedSize %d of a %d-byte record", n, len(src))
		}
		enc := r.AppendEncode(nil)
		if !bytes.Equal(enc, src) {
			t.Fatalf("re-encoded %x, decoded from %x", enc, src)
		}
		var again abi.Record
		if err := again.Decode(enc); err != nil || !abitest.Equal(&again, &r) {
			t.Fatalf("second decode: %v, %+v vs %+v", err, again, r)
		}
	})
}

// FuzzScanEntry: scan entries cross the other way (host to plugin) but the
// SDKs decode them with the same rules; DecodeScanEntry must never panic and
// must invert EncodeScanEntry.
func FuzzScanEntry(f *testing.F) {
	f.Add(abi.EncodeScanEntry(nil, []byte("k"), []byte("value")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, src []byte) {
		k, v, err := abi.DecodeScanEntry(src)
		if err != nil {
			return
		}
		if enc := abi.EncodeScanEntry(nil, k, v); !bytes.Equal(enc, src) {
			t.Fatalf("re-encoded %x, decoded from %x", enc, src)
		}
	})
}
