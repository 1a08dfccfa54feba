package main

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestVelocity(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("payments", "alerts"), sdktest.Stores("recent"))
	var got []string
	pay := func(card string, sec int64) {
		t.Helper()
		rec := sdktest.Record{Key: []byte(card), Value: []byte(card + " pays"), Timestamp: sec * 1000,
			Headers: []abi.Header{{Key: "id", Value: []byte{byte(len(got))}}}}
		res := h.MustProcess(rec)
		p := res.Emitted["payments"]
		if len(p) != 1 || !bytes.Equal(p[0].Value, rec.Value) || p[0].Timestamp != rec.Timestamp || len(p[0].Headers) != 1 {
			t.Fatalf("%s@%d: passed on %+v, want the payment unchanged", card, sec, p)
		}
		for _, a := range res.Emitted["alerts"] {
			got = append(got, string(a.Key)+"@"+strconv.FormatInt(sec, 10)+"="+string(a.Value))
		}
	}
	pay("a", 0)
	pay("a", 10)
	pay("b", 15)
	pay("a", 20)
	pay("a", 30) // a's fourth in 60 s
	pay("b", 40)
	pay("a", 60) // (0, 60]: 10, 20, 30, 60
	pay("a", 61)
	pay("a", 121) // (61, 121]: only itself
	want := []string{"a@30=4", "a@60=4", "a@61=5"}
	if !slices.Equal(got, want) {
		t.Fatalf("alerts %q, want %q", got, want)
	}
	// A card is forgotten 60 s after its last payment: b is gone, a keeps
	// the payment at 121.
	if keys := h.State("recent").Keys(); !slices.Equal(keys, []string{"a"}) {
		t.Fatalf("cards kept: %q", keys)
	}
	if v, _ := h.State("recent").Get("a"); len(v) != 8 {
		t.Fatalf("a keeps %d bytes, want one timestamp", len(v))
	}
}
