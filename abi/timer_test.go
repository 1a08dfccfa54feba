package abi_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
)

func loadTriggers(t *testing.T) *abitest.Triggers {
	t.Helper()
	tv, err := abitest.LoadTriggers(abitest.TriggersPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(tv.Vectors) == 0 || len(tv.Malformed) == 0 || len(tv.Checks) == 0 || len(tv.Given) == 0 {
		t.Fatal("no trigger vectors loaded")
	}
	return tv
}

// The trigger vectors were written by gen.py; the Go codec must decode them
// to the same fields and re-encode the same bytes.
func TestTriggerVectorsRoundTrip(t *testing.T) {
	for _, v := range loadTriggers(t).Vectors {
		t.Run(v.Name, func(t *testing.T) {
			var got abi.Trigger
			if err := got.Decode(v.Encoded); err != nil {
				t.Fatalf("decode: %v", err)
			}
			w := v.Trigger
			if got.Timestamp != w.Timestamp || got.StreamTime != w.StreamTime || got.WallTime != w.WallTime ||
				got.Kind != w.Kind || !bytes.Equal(got.Key, w.Key) || got.Key == nil {
				t.Fatalf("decoded %+v, want %+v", got, w)
			}
			if n := w.EncodedSize(); n != len(v.Encoded) {
				t.Fatalf("EncodedSize = %d, want %d", n, len(v.Encoded))
			}
			if enc := w.AppendEncode(nil); !bytes.Equal(enc, v.Encoded) {
				t.Fatalf("encoded %x, want %x", enc, v.Encoded)
			}
		})
	}
}

func TestTriggerMalformedRejected(t *testing.T) {
	for name, enc := range loadTriggers(t).Malformed {
		t.Run(name, func(t *testing.T) {
			var tr abi.Trigger
			if err := tr.Decode(enc); !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("Decode = %v, want ErrMalformed", err)
			}
		})
	}
}

// A hand-checked layout, so that a bug shared by gen.py and the codec shows.
func TestTriggerLayoutByHand(t *testing.T) {
	tr := abi.Trigger{Timestamp: 0x0102, StreamTime: abi.NoTime, WallTime: 3, Kind: abi.TriggerCommit, Key: []byte("k")}
	want := []byte{
		0x02, 0x01, 0, 0, 0, 0, 0, 0, // timestamp
		0, 0, 0, 0, 0, 0, 0, 0x80, // stream time: NoTime
		3, 0, 0, 0, 0, 0, 0, 0, // wall time
		2, 0, 0, 0, // kind: commit
		1, 0, 0, 0, // key length
		'k',
	}
	if got := tr.AppendEncode(nil); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

func TestCheckTimer(t *testing.T) {
	for _, c := range loadTriggers(t).Checks {
		if got := abi.CheckTimer(c.Kind, c.TS, c.KeyLen); got != c.Errno {
			t.Errorf("CheckTimer(%d, %d, %d) = %d, want %d", c.Kind, c.TS, c.KeyLen, got, c.Errno)
		}
	}
}

func TestTimerOrder(t *testing.T) {
	tv := loadTriggers(t)
	got := slices.Clone(tv.Given)
	slices.SortFunc(got, func(a, b abitest.Timer) int {
		switch {
		case abi.TimerLess(a.Kind, a.TS, a.Key, b.Kind, b.TS, b.Key):
			return -1
		case abi.TimerLess(b.Kind, b.TS, b.Key, a.Kind, a.TS, a.Key):
			return 1
		}
		return 0
	})
	if !slices.EqualFunc(got, tv.Fired, func(a, b abitest.Timer) bool {
		return a.Kind == b.Kind && a.TS == b.TS && bytes.Equal(a.Key, b.Key)
	}) {
		t.Fatalf("fired order %v, want %v", got, tv.Fired)
	}
}

func TestTimerKindString(t *testing.T) {
	for k, want := range map[abi.TimerKind]string{abi.TimerEventTime: "event", abi.TimerProcessingTime: "processing",
		abi.TriggerCommit: "commit", 9: "kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", k, got, want)
		}
	}
}
