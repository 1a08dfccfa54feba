package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func newHost(t *testing.T, cfg string, opts ...sdktest.Option) *sdktest.Host {
	t.Helper()
	return sdktest.New(t, append(opts, sdktest.Config(cfg), sdktest.Outputs("counts", "late"), sdktest.Stores("windows"))...)
}

func rec(key string, ts int64) sdktest.Record {
	return sdktest.Record{Key: []byte(key), Value: []byte("x"), Timestamp: ts}
}

// results renders a step's output as "key=value" strings.
func results(t *testing.T, res sdktest.Result) []string {
	t.Helper()
	if err := res.Failed(); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range res.Emitted["counts"] {
		v := string(e.Value)
		if e.Value == nil {
			v = "null"
		}
		s = append(s, string(e.Key)+"="+v)
	}
	return s
}

func want(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

const min = int64(time.Minute / time.Millisecond)

func TestTumblingFinal(t *testing.T) {
	h := newHost(t, `{"window":"tumbling","size":"1m","grace":"10s"}`)
	t0 := int64(1_700_000_040_000) // a minute boundary
	for _, r := range []sdktest.Record{rec("a", t0), rec("b", t0+1000), rec("a", t0+59_999), rec("a", t0+min+5000)} {
		want(t, "in the window", results(t, h.Process(r)))
	}
	// Out of order, within grace: still counted.
	want(t, "late but within grace", results(t, h.Process(rec("b", t0+30_000))))
	res := h.Process(rec("c", t0+min+10_000)) // stream time reaches end + grace
	want(t, "close", results(t, res),
		`a={"start":1700000040000,"end":1700000100000,"count":2}`,
		`b={"start":1700000040000,"end":1700000100000,"count":2}`)
	if ts := res.Emitted["counts"][0].Timestamp; ts != t0+59_999 {
		t.Fatalf("timestamp %d, want the window's latest record's", ts)
	}
	want(t, "too late", results(t, h.Process(rec("a", t0+1))))
}

func TestSessionFinalWindowedKey(t *testing.T) {
	h := newHost(t, `{"window":"session","gap":"5m","key_format":"windowed","late_output":"late"}`)
	t0 := int64(1_700_000_000_000)
	h.MustProcess(rec("u1", t0))
	h.MustProcess(rec("u1", t0+4*min))
	h.MustProcess(rec("u2", t0+6*min))
	h.MustProcess(rec("u1", t0+8*min)) // within 5m of the last: same session
	want(t, "nothing closed", results(t, h.Process(rec("u3", t0+11*min))))
	// u2's one-record session closes at 6m+1ms + 5m.
	want(t, "u2 closes", results(t, h.Process(rec("u2", t0+11*min+1))),
		`u2@1700000360000={"start":1700000360000,"end":1700000360001,"count":1}`)
	// u1's session [t0, t0+8m+1) closes at its end + gap.
	want(t, "u1 closes", results(t, h.Process(rec("u3", t0+13*min+1))),
		`u1@1700000000000={"start":1700000000000,"end":1700000480001,"count":3}`)
	res := h.Process(rec("u1", t0))
	if l := res.Emitted["late"]; len(l) != 1 || string(l[0].Key) != "u1" {
		t.Fatalf("late output %+v", l)
	}
}

func TestHoppingUpdateAndCommit(t *testing.T) {
	h := newHost(t, `{"window":"hopping","size":"10s","advance":"5s","emit":"update"}`)
	want(t, "update", results(t, h.Process(rec("k", 7000))),
		`k={"start":0,"end":10000,"count":1}`, `k={"start":5000,"end":15000,"count":1}`)

	h = newHost(t, `{"window":"tumbling","size":"10s","emit":"commit"}`)
	for range 3 {
		want(t, "no emit before the commit point", results(t, h.Process(rec("k", 1000))))
	}
	want(t, "commit", results(t, h.Commit()), `k={"start":0,"end":10000,"count":3}`)
}

// A session merged into another is retracted with a null value in update
// mode, so that a compacted topic keyed by window drops it.
func TestSessionRetraction(t *testing.T) {
	h := newHost(t, `{"window":"session","gap":"10s","grace":"1m","emit":"update","key_format":"windowed"}`)
	h.MustProcess(rec("k", 0))
	h.MustProcess(rec("k", 15_000))
	want(t, "bridge", results(t, h.Process(rec("k", 8_000))),
		"k@15000=null", `k@0={"start":0,"end":15001,"count":3}`)
}

// A quiet partition: emit-final windows close on event time only, so they
// wait for the next record; wall time alone does not close them.
func TestQuietPartitionWaitsForStreamTime(t *testing.T) {
	h := newHost(t, `{"size":"1m"}`)
	h.MustProcess(rec("a", 1000))
	want(t, "wall time passes", results(t, h.AdvanceWallTime(time.Hour)))
	want(t, "a later record", results(t, h.Process(rec("b", 2*min))), `a={"start":0,"end":60000,"count":1}`)
}

func TestBadConfig(t *testing.T) {
	for cfg, msg := range map[string]string{
		`{}`:                               `"size": required, and more than 0, for tumbling windows`,
		`{"window":"sliding","size":"1m"}`: `"window": must be "tumbling", "hopping" or "session"; got "sliding"`,
		`{"window":"session"}`:             `"gap": required`,
		`{"window":"session","gap":"1m","size":"1m"}`:     `"size": does not apply to session windows`,
		`{"size":"1m","gap":"1m"}`:                        `"gap": applies to session windows only`,
		`{"size":"1m","advance":"1s"}`:                    `"advance": applies to hopping windows only`,
		`{"window":"hopping","size":"1m"}`:                `"advance": required for hopping windows`,
		`{"window":"hopping","size":"1m","advance":"2m"}`: `"advance": required for hopping windows, more than 0 and at most size`,
		`{"size":"1m","emit":"never"}`:                    `"emit": must be "final", "update" or "commit"`,
		`{"size":"1m","key_format":"json"}`:               `"key_format": must be "plain" or "windowed"`,
		`{"size":"1m","late_output":"nope"}`:              `"late_output": output "nope" is not declared`,
		`{"size":"1m","grace":"soon"}`:                    `"grace": must be a duration`,
		`{"size":"1m","extra":1}`:                         `unknown field "extra"`,
	} {
		_, err := sdktest.Start(t, sdktest.Config(cfg), sdktest.Outputs("counts", "late"), sdktest.Stores("windows"))
		if err == nil || !strings.HasPrefix(err.Error(), "windowcount: config: ") || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", cfg, err, msg)
		}
	}
	if _, err := sdktest.Start(t, sdktest.Config(`{"size":"1m"}`), sdktest.Outputs("counts")); err == nil ||
		!strings.Contains(err.Error(), `not declared by the processor (add to its outputs or stores in the pipeline config): store "windows"`) {
		t.Errorf("undeclared store: %v", err)
	}
}
