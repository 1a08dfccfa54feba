package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func emitted(res sdktest.Result) string {
	var s []string
	for _, e := range res.Emitted["words"] {
		s = append(s, string(e.Key)+"="+string(e.Value))
	}
	return strings.Join(s, " ")
}

func TestSplitEmitsOneRecordPerWordKeyedByIt(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("words"))
	steps := []struct{ in, want string }{
		{"The cat, the hat", "the=the cat=cat the=the hat=hat"}, // every occurrence, in order
		{"", ""},
		{"Grüße ΣΊΣΥΦΟΣ don't", "grüße=grüße σίσυφοσ=σίσυφοσ don=don t=t"},
		{"\xffhello\xfeworld", "hello=hello world=world"}, // invalid UTF-8 separates
		{strings.Repeat("x", abi.MaxKeySize+1) + " short", "short=short"},
	}
	for _, s := range steps {
		res := h.MustProcess(sdktest.Record{Key: []byte("line"), Value: []byte(s.in), Timestamp: 1700000000000})
		if got := emitted(res); got != s.want {
			t.Errorf("%.20q: got %q, want %q", s.in, got, s.want)
		}
		for _, e := range res.Emitted["words"] {
			if e.Partition != abi.AnyPartition || e.Timestamp != 1700000000000 {
				t.Errorf("%.20q: word %q partition %d timestamp %d: want the key's partition and the input's timestamp", s.in, e.Key, e.Partition, e.Timestamp)
			}
		}
	}
	if got := emitted(h.MustProcess(sdktest.Record{Value: nil})); got != "" {
		t.Fatalf("tombstone: %q", got)
	}
}

func TestSplitConfig(t *testing.T) {
	if _, err := sdktest.Start(t, sdktest.Outputs("words"), sdktest.Config(`{"x":1}`)); err == nil ||
		!strings.Contains(err.Error(), "split: config: takes no config") {
		t.Fatalf("config: %v", err)
	}
	if _, err := sdktest.Start(t, sdktest.Outputs("out")); err == nil || !strings.Contains(err.Error(), `"words"`) {
		t.Fatalf("undeclared output: %v", err)
	}
}
