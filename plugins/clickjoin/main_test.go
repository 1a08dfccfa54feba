package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func newHost(t *testing.T, cfg string) *sdktest.Host {
	t.Helper()
	return sdktest.New(t, sdktest.Config(cfg), sdktest.Outputs("joined", "late"), sdktest.Stores("clickjoin"))
}

var offset int64

func impression(id string, ts int64) sdktest.Record {
	offset++
	return sdktest.Record{Key: []byte(id), Value: []byte(`{"ad":"` + id + `"}`), Timestamp: ts, Input: 0, Offset: offset}
}

func click(id string, ts int64) sdktest.Record {
	offset++
	return sdktest.Record{Key: []byte(id), Value: []byte("c"), Timestamp: ts, Input: 1, Offset: offset}
}

func results(t *testing.T, res sdktest.Result) []string {
	t.Helper()
	if err := res.Failed(); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range res.Emitted["joined"] {
		s = append(s, string(e.Key)+"="+string(e.Value))
	}
	return s
}

func want(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestLeftJoin(t *testing.T) {
	h := newHost(t, `{"window":"10s","grace":"1s"}`)
	want(t, "impression a", results(t, h.Process(impression("a", 1_000))))
	want(t, "impression b", results(t, h.Process(impression("b", 2_000))))
	want(t, "click on a, out of order but in grace", results(t, h.Process(click("a", 5_000))),
		`a={"impression_at":1000,"impression":"{\"ad\":\"a\"}","click_at":5000,"click":"c","latency_ms":4000}`)
	want(t, "a click before its impression joins nothing", results(t, h.Process(click("b", 1_500))))
	// Stream time past 2000+10s+1s: b's window has passed unclicked, and a's
	// (clicked) leaves silently.
	want(t, "b reported unclicked", results(t, h.Process(impression("z", 13_001))),
		`b={"impression_at":2000,"impression":"{\"ad\":\"b\"}","click_at":null,"click":null,"latency_ms":null}`)
}

func TestInnerJoinAndLate(t *testing.T) {
	h := newHost(t, `{"window":"10s","join":"inner","late_output":"late"}`)
	want(t, "impression a", results(t, h.Process(impression("a", 10_000))))
	want(t, "impression z moves stream time", results(t, h.Process(impression("z", 20_000))))
	res := h.Process(click("a", 15_000)) // 15000 < 20000 - 0: late
	want(t, "late click", results(t, res))
	if n := len(res.Emitted["late"]); n != 1 {
		t.Fatalf("late records routed: %d, want 1", n)
	}
	want(t, "inner: nothing for unclicked impressions", results(t, h.Process(impression("y", 100_000))))
}

func TestConfigErrors(t *testing.T) {
	for cfg, msg := range map[string]string{
		`{}`:                                   "window",
		`{"window":"10s","join":"outer"}`:      "join",
		`{"window":"10s","clicks_input":0}`:    "clicks_input",
		`{"window":"10s","clicks_input":-1}`:   "clicks_input",
		`{"window":"10s","nope":1}`:            "nope",
		`{"window":"10s","late_output":"bad"}`: "late_output",
	} {
		_, err := sdktest.Start(t, sdktest.Config(cfg), sdktest.Outputs("joined"), sdktest.Stores("clickjoin"))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("config %s: err %v, want one naming %q", cfg, err, msg)
		}
	}
	if _, err := sdktest.Start(t, sdktest.Config(`{"window":"1s"}`), sdktest.Outputs("joined")); err == nil ||
		!strings.Contains(err.Error(), "clickjoin") {
		t.Errorf("no store: %v", err)
	}
}
