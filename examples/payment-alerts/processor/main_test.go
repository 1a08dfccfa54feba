package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// The processor unit-tested natively through the SDK's fake host.
func TestClassifies(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("audited", "alerts"), sdktest.Config(`{"threshold_cents": 5000}`))
	res := h.Process(sdktest.Record{Key: []byte("p1"), Value: []byte("acct-1,7500")})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Emitted["alerts"]) != 1 || string(res.Emitted["alerts"][0].Key) != "acct-1" {
		t.Fatalf("alerts %v", res.Emitted["alerts"])
	}
	res = h.Process(sdktest.Record{Key: []byte("p2"), Value: []byte("acct-2,10")})
	if len(res.Emitted["alerts"]) != 0 || len(res.Emitted["audited"]) != 1 {
		t.Fatalf("small payment: %+v", res.Emitted)
	}
	if res := h.Process(sdktest.Record{Key: []byte("p3"), Value: []byte("garbage")}); res.Err == nil {
		t.Fatal("malformed payment accepted")
	}
}
