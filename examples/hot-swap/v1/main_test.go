package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestGreets(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("greetings"))
	res := h.Process(sdktest.Record{Key: []byte("7"), Value: []byte("ada")})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if g := res.Emitted["greetings"]; len(g) != 1 || string(g[0].Key) != "7" || string(g[0].Value) != "hello, ada" {
		t.Fatalf("greetings %+v", g)
	}
}
