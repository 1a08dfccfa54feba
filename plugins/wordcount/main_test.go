package main

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
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
	// Update mode marks nothing: a commit point emits nothing.
	if got := counts(h.MustCommit()); got != "" {
		t.Fatalf("commit point in update mode: %q", got)
	}
}

func commitHost(t *testing.T, opts ...sdktest.Option) *sdktest.Host {
	t.Helper()
	return sdktest.New(t, append(opts, sdktest.Outputs("counts"), sdktest.Stores("counts"), sdktest.Config(`{"emit":"commit"}`))...)
}

func TestWordCountEmitCommit(t *testing.T) {
	h := commitHost(t)
	if got := counts(h.MustProcess(sdktest.Record{Value: []byte("the cat the"), Timestamp: 10})); got != "" {
		t.Fatalf("record emitted %q; emit: commit emits at the commit point only", got)
	}
	if got := strings.Join(h.Marked(), " "); got != "cat the" {
		t.Fatalf("marked %q", got)
	}
	// The counts are in state before the commit point.
	if v, ok := h.State("counts").Get("the"); !ok || binary.BigEndian.Uint64(v) != 2 {
		t.Fatalf("stored the = %x %v", v, ok)
	}
	// Once per word, in key order, with the count after the whole record.
	res := h.MustCommit()
	if got := counts(res); got != "cat=1 the=2" {
		t.Fatalf("commit point: %q", got)
	}
	if ts := res.Emitted["counts"][0].Timestamp; ts != 10 {
		t.Fatalf("timestamp %d, want the marking record's", ts)
	}
	if got := counts(h.MustCommit()); got != "" {
		t.Fatalf("a commit point with nothing marked emitted %q", got)
	}

	// Two records in one window: each word once, with its final count and
	// the timestamp of the last record that changed it.
	h.MustProcess(sdktest.Record{Value: []byte("a b"), Timestamp: 20})
	h.MustProcess(sdktest.Record{Value: []byte("b the b"), Timestamp: 30})
	res = h.MustCommit()
	if got := counts(res); got != "a=1 b=3 the=3" {
		t.Fatalf("commit point: %q", got)
	}
	var stamps []int64
	for _, e := range res.Emitted["counts"] {
		stamps = append(stamps, e.Timestamp)
	}
	if len(stamps) != 3 || stamps[0] != 20 || stamps[1] != 30 || stamps[2] != 30 {
		t.Fatalf("timestamps %v, want [20 30 30]", stamps)
	}
}

func TestWordCountEmitCommitInt64(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("counts"), sdktest.Stores("counts"),
		sdktest.Config(`{"emit":"commit","value_format":"int64"}`))
	h.MustProcess(sdktest.Record{Value: []byte("kafka kafka")})
	e := h.MustCommit().Emitted["counts"]
	if len(e) != 1 || string(e[0].Key) != "kafka" || len(e[0].Value) != 8 || binary.BigEndian.Uint64(e[0].Value) != 2 {
		t.Fatalf("emitted %+v", e)
	}
}

// A failed record's marks are dropped with its state writes: its words are
// not emitted at the commit point.
func TestWordCountEmitCommitFailedRecord(t *testing.T) {
	h := commitHost(t)
	h.State("counts").Put("bad", []byte("12"))
	h.MustProcess(sdktest.Record{Value: []byte("fine")})
	// "ok" is counted and marked before "bad" fails the record.
	if res := h.Process(sdktest.Record{Value: []byte("ok bad")}); res.Err == nil {
		t.Fatal("the record with a corrupt count succeeded")
	}
	if got := strings.Join(h.Marked(), " "); got != "fine" {
		t.Fatalf("marked %q after the failed record, want only the good record's", got)
	}
	if got := counts(h.MustCommit()); got != "fine=1" {
		t.Fatalf("commit point: %q", got)
	}
	if _, ok := h.State("counts").Get("ok"); ok {
		t.Fatal("a failed record's writes were committed")
	}
}

// With the window's commit-mark limit reached, a new word's count is
// emitted at once, as in update mode; the words marked before still wait
// for the commit point.
func TestWordCountEmitCommitOverMarkLimit(t *testing.T) {
	h := commitHost(t, sdktest.TimerLimits(0, 0, 2))
	if got := counts(h.MustProcess(sdktest.Record{Value: []byte("a b c a")})); got != "c=1" {
		t.Fatalf("record: %q, want the word past the limit", got)
	}
	// Words already marked are still marked, limit or not.
	if got := counts(h.MustProcess(sdktest.Record{Value: []byte("b")})); got != "" {
		t.Fatalf("record: %q", got)
	}
	if got := counts(h.MustCommit()); got != "a=2 b=2" {
		t.Fatalf("commit point: %q", got)
	}
}

// A count that expired (a store time to live) between the record that
// marked it and the commit point is not emitted.
func TestWordCountEmitCommitExpired(t *testing.T) {
	h := commitHost(t, sdktest.StoreTTL("counts", 10*time.Millisecond, abi.ClockStream))
	h.MustProcess(sdktest.Record{Value: []byte("old"), Timestamp: 1000})
	h.MustProcess(sdktest.Record{Value: []byte("new"), Timestamp: 2000}) // old expires at 1010
	if got := counts(h.MustCommit()); got != "new=1" {
		t.Fatalf("commit point: %q", got)
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
		{[]sdktest.Option{sdktest.Config(`{"emit":"final"}`)}, `wordcount: config: "emit": must be "update" or "commit"; got "final"`},
		{[]sdktest.Option{sdktest.Config(`{"emit":true}`)}, `wordcount: config: "emit": must be a string, got a boolean`},
		{[]sdktest.Option{sdktest.Config(`"x"`)}, `wordcount: config: must be a JSON object, got a string`},
	} {
		_, err := sdktest.Start(t, append(tc.opts, sdktest.Outputs("counts"), sdktest.Stores("counts"))...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
	if _, err := sdktest.Start(t, sdktest.Outputs("counts")); err == nil || !strings.Contains(err.Error(), `not declared by the processor (add to its outputs or stores in the pipeline config): store "counts"`) {
		t.Errorf("undeclared store: %v", err)
	}
	if _, err := sdktest.Start(t, sdktest.Stores("counts")); err == nil || !strings.Contains(err.Error(), `not declared by the processor (add to its outputs or stores in the pipeline config): output "counts"`) {
		t.Errorf("undeclared output: %v", err)
	}
}
