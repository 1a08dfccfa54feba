package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestGreets(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("greetings"))
	for name, want := range map[string]string{"ada": "Hello, Ada!", "émile": "Hello, Émile!", "": "Hello, !"} {
		res := h.Process(sdktest.Record{Key: []byte("7"), Value: []byte(name)})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if g := res.Emitted["greetings"]; len(g) != 1 || string(g[0].Key) != "7" || string(g[0].Value) != want {
			t.Fatalf("%q: greetings %+v, want %q", name, g, want)
		}
	}
}
