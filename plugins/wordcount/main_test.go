package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func counts(res sdktest.Result) string {
	var s []string
	for _, e := range res.Emitted["counts"] {
		s = append(s, string(e.Key)+"="+string(e.Value))
	}
	return strings.Join(s, " ")
}

func TestWordCount(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("counts"), sdktest.Stores("counts"))
	steps := []struct{ in, want string }{
		{"Hello, world! hello", "hello=2 world=1"}, // one emit per distinct word, in first-seen order
		{"WORLD wide  web", "world=2 wide=1 web=1"},
		{"", ""},
		{"Grüße, ΣΊΣΥΦΟΣ 42 x42 don't", "grüße=1 σίσυφοσ=1 42=1 x42=1 don=1 t=1"},
		{"\xff\xfehello\xffworld", "hello=3 world=3"}, // invalid UTF-8 separates
	}
	for _, s := range steps {
		if got := counts(h.MustProcess(sdktest.Record{Value: []byte(s.in)})); got != s.want {
			t.Errorf("%q: got %q, want %q", s.in, got, s.want)
		}
	}
	// State: 8-byte big-endian counts, committed.
	v, ok := h.State("counts").Get("hello")
	if !ok || len(v) != 8 || binary.BigEndian.Uint64(v) != 3 {
		t.Fatalf("stored hello = %x %v", v, ok)
	}
	// A tombstone has no words.
	if got := counts(h.MustProcess(sdktest.Record{Value: nil})); got != "" {
		t.Fatalf("tombstone: %q", got)
	}
}

func TestWordCountInt64AndSeededState(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("counts"), sdktest.Stores("counts"), sdktest.Config(`{"value_format":"int64"}`))
	seed := make([]byte, 8)
	binary.BigEndian.PutUint64(seed, 41)
	h.State("counts").Put("kafka", seed)
	res := h.MustProcess(sdktest.Record{Value: []byte("kafka")})
	e := res.Emitted["counts"]
	if len(e) != 1 || len(e[0].Value) != 8 || binary.BigEndian.Uint64(e[0].Value) != 42 {
		t.Fatalf("emitted %+v", e)
	}
}

func TestWordCountLongWordsSkipped(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("counts"), sdktest.Stores("counts"))
	long := strings.Repeat("a", 5000)
	if got := counts(h.MustProcess(sdktest.Record{Value: []byte("x " + long + " y")})); got != "x=1 y=1" {
		t.Fatalf("got %.40q", got)
	}
}

func TestWordCountCorruptState(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("counts"), sdktest.Stores("counts"))
	h.State("counts").Put("bad", []byte("12"))
	res := h.Process(sdktest.Record{Value: []byte("ok bad")})
	if res.Err == nil || !strings.Contains(res.Err.Error(), `holds 2 bytes for word "bad"`) {
		t.Fatalf("err = %v", res.Err)
	}
	if _, ok := h.State("counts").Get("ok"); ok {
		t.Fatal("a failed record's writes were committed")
	}
}

func TestWordCountBadConfig(t *testing.T) {
	for _, tc := range []struct {
		opts []sdktest.Option
		want string
	}{
		{[]sdktest.Option{sdktest.Config(`{"value_format":"text"}`)}, `wordcount: config: "value_format": must be "decimal" or "int64"; got "text"`},
		{[]sdktest.Option{sdktest.Config(`{"format":"int64"}`)}, `wordcount: config: unknown field "format"`},
		{[]sdktest.Option{sdktest.Config(`"x"`)}, `wordcount: config: must be a JSON object, got a string`},
	} {
		_, err := sdktest.Start(t, append(tc.opts, sdktest.Outputs("counts"), sdktest.Stores("counts"))...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
	if _, err := sdktest.Start(t, sdktest.Outputs("counts")); err == nil || !strings.Contains(err.Error(), `store_index "counts": ENONAME`) {
		t.Errorf("undeclared store: %v", err)
	}
	if _, err := sdktest.Start(t, sdktest.Stores("counts")); err == nil || !strings.Contains(err.Error(), `output_index "counts": ENONAME`) {
		t.Errorf("undeclared output: %v", err)
	}
}
