package abi_test

import (
	"bytes"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
)

// TestBatchVectors writes every batch of testdata/batches.json the way the
// host does (PutBatchHeader, then each slot's header and payload at
// SlotSize steps) and compares it with the independent encoder's bytes.
func TestBatchVectors(t *testing.T) {
	bs, err := abitest.LoadBatches()
	if err != nil {
		t.Fatal(err)
	}
	if len(bs.Batches) == 0 || len(bs.Emits) == 0 || len(bs.MalformedEmits) == 0 {
		t.Fatal("no batch vectors")
	}
	for _, b := range bs.Batches {
		size := abi.BatchHeaderSize
		for _, s := range b.Slots {
			size += abi.SlotSize(len(s.Payload))
		}
		buf := make([]byte, size)
		abi.PutBatchHeader(buf, len(b.Slots))
		off := abi.BatchHeaderSize
		for _, s := range b.Slots {
			abi.PutSlotHeader(buf[off:], s.Kind, len(s.Payload))
			p := buf[off+abi.SlotHeaderSize:]
			if s.Record != nil {
				s.Record.EncodeTo(p)
			} else {
				s.Trigger.EncodeTo(p)
			}
			off += abi.SlotSize(len(s.Payload))
		}
		if !bytes.Equal(buf, b.Encoded) {
			t.Errorf("batch %q:\n got %x\nwant %x", b.Name, buf, b.Encoded)
		}
	}
}

// TestEmitEntryVectors encodes and splits the shared runs of emit entries
// and rejects the malformed ones.
func TestEmitEntryVectors(t *testing.T) {
	bs, err := abitest.LoadBatches()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bs.Emits {
		var got []byte
		for i := range e.Records {
			got = abi.AppendEmitEntry(got, &e.Records[i])
		}
		if !bytes.Equal(got, e.Encoded) {
			t.Errorf("emits %q:\n got %x\nwant %x", e.Name, got, e.Encoded)
		}
		rest, n := e.Encoded, 0
		for len(rest) > 0 {
			var b []byte
			if b, rest, err = abi.NextEmitEntry(rest); err != nil {
				t.Fatalf("emits %q entry %d: %v", e.Name, n, err)
			}
			var r abi.Record
			if err := r.Decode(b); err != nil {
				t.Fatalf("emits %q entry %d: %v", e.Name, n, err)
			}
			if !abitest.Equal(&r, &e.Records[n]) {
				t.Errorf("emits %q entry %d: %+v, want %+v", e.Name, n, r, e.Records[n])
			}
			n++
		}
		if n != len(e.Records) {
			t.Errorf("emits %q: %d entries, want %d", e.Name, n, len(e.Records))
		}
	}
	for name, b := range bs.MalformedEmits {
		ok := true
		for rest := b; len(rest) > 0 && ok; {
			var rec []byte
			if rec, rest, err = abi.NextEmitEntry(rest); err != nil {
				ok = false
				break
			}
			var r abi.Record
			ok = r.Decode(rec) == nil
		}
		if ok {
			t.Errorf("malformed emits %q accepted", name)
		}
	}
}

func TestSlotSize(t *testing.T) {
	for n, want := range map[int]int{0: 24, 1: 32, 8: 32, 9: 40, 36: 64} {
		if got := abi.SlotSize(n); got != want {
			t.Errorf("SlotSize(%d) = %d, want %d", n, got, want)
		}
	}
}
