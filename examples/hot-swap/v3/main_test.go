package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestGreetsFailsAndChangesGrace(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("greetings"))
	for key, c := range map[string]struct{ name, want string }{
		"7": {"ada", "hello, ada"}, "8": {"grace", "hello, Grace"}, "x": {"alan", "hello, alan"},
	} {
		res := h.Process(sdktest.Record{Key: []byte(key), Value: []byte(c.name)})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if g := res.Emitted["greetings"]; len(g) != 1 || string(g[0].Value) != c.want {
			t.Fatalf("%q: greetings %+v, want %q", c.name, g, c.want)
		}
	}
	if res := h.Process(sdktest.Record{Key: []byte("300"), Value: []byte("ada")}); res.Err == nil || len(res.Emitted["greetings"]) != 0 {
		t.Fatalf("key 300: %+v, want a failure with nothing emitted", res)
	}
}
