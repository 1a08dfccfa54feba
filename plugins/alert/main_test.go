package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

const t0 = int64(1_700_000_000_000) // the fake wall clock at start

func newHost(t *testing.T, cfg string) *sdktest.Host {
	t.Helper()
	return sdktest.New(t, sdktest.Config(cfg), sdktest.WallTime(t0), sdktest.Outputs("alerts"), sdktest.Stores("alert"))
}

func alerts(t *testing.T, res sdktest.Result) []string {
	t.Helper()
	if err := res.Failed(); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range res.Emitted["alerts"] {
		s = append(s, string(e.Key)+"="+string(e.Value))
	}
	return s
}

func want(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func rec(key string) sdktest.Record {
	return sdktest.Record{Key: []byte(key), Value: []byte("ping"), Timestamp: 42}
}

func TestSilentKeyAlerts(t *testing.T) {
	h := newHost(t, `{"timeout":"5m"}`)
	h.MustProcess(rec("sensor-1"))
	h.MustProcess(rec("sensor-2"))
	want(t, "4m", alerts(t, h.AdvanceWallTime(4*time.Minute)))
	h.MustProcess(rec("sensor-2")) // resets sensor-2's timer to 9m
	res := h.AdvanceWallTime(time.Minute)
	want(t, "5m", alerts(t, res),
		`sensor-1={"status":"silent","last_seen":1700000000000,"silent_ms":300000,"record_timestamp":42}`)
	if ts := res.All[0].Timestamp; ts != t0+5*60_000 {
		t.Fatalf("alert timestamp %d, want the wall time of the alert", ts)
	}
	want(t, "8m", alerts(t, h.AdvanceWallTime(3*time.Minute)))
	want(t, "9m", alerts(t, h.AdvanceWallTime(time.Minute)),
		`sensor-2={"status":"silent","last_seen":1700000240000,"silent_ms":300000,"record_timestamp":42}`)
	// Reported once; the keys are forgotten (no resolve).
	want(t, "1h", alerts(t, h.AdvanceWallTime(time.Hour)))
	if n := h.State("alert").Len(); n != 0 || len(h.Timers()) != 0 {
		t.Fatalf("state %q, timers %+v", h.State("alert").Keys(), h.Timers())
	}
	// Records only reset the timer: one pending per key.
	h.MustProcess(rec("sensor-1"))
	h.MustProcess(rec("sensor-1"))
	if ts := h.Timers(); len(ts) != 1 {
		t.Fatalf("timers %+v", ts)
	}
}

// The timer is checked at commit points only (AdvanceWallTime runs one):
// a wall clock that passed the deadline alerts at the next one, with the
// silence measured then.
func TestAlertAtTheNextCommitPoint(t *testing.T) {
	h := newHost(t, `{"timeout":60000}`)
	h.MustProcess(rec("k"))
	h.SetWallTime(t0 + 90_000)
	want(t, "between commit points", alerts(t, h.MustProcess(rec("other"))))
	want(t, "commit point", alerts(t, h.Commit()),
		`k={"status":"silent","last_seen":1700000000000,"silent_ms":90000,"record_timestamp":42}`)
}

func TestResolve(t *testing.T) {
	h := newHost(t, `{"timeout":"1m","resolve":true}`)
	h.MustProcess(rec("k"))
	want(t, "silent", alerts(t, h.AdvanceWallTime(time.Minute)),
		`k={"status":"silent","last_seen":1700000000000,"silent_ms":60000,"record_timestamp":42}`)
	want(t, "still silent: no repeat", alerts(t, h.AdvanceWallTime(10*time.Minute)))
	want(t, "heard again", alerts(t, h.Process(sdktest.Record{Key: []byte("k"), Timestamp: 7})),
		`k={"status":"resolved","last_seen":1700000000000,"silent_ms":660000,"record_timestamp":7}`)
	want(t, "watched again", alerts(t, h.AdvanceWallTime(time.Minute)),
		`k={"status":"silent","last_seen":1700000660000,"silent_ms":60000,"record_timestamp":7}`)
}

func TestCorruptState(t *testing.T) {
	h := newHost(t, `{"timeout":"1m"}`)
	h.State("alert").Put("k", []byte("xx"))
	if res := h.Process(rec("k")); res.Err == nil || !strings.Contains(res.Err.Error(), `holds 2 bytes for key "k"`) {
		t.Fatalf("err %v", res.Err)
	}
}

func TestBadConfig(t *testing.T) {
	for cfg, msg := range map[string]string{
		`{}`:                             `alert: config: "timeout": required`,
		`{"timeout":"0s"}`:               `alert: config: "timeout": required`,
		`{"timeout":"soon"}`:             `alert: config: "timeout": must be a duration`,
		`{"timeout":"1m","resolve":1}`:   `alert: config: "resolve": must be true or false`,
		`{"timeout":"1m","repeat":true}`: `alert: config: unknown field "repeat"`,
	} {
		if _, err := sdktest.Start(t, sdktest.Config(cfg), sdktest.Outputs("alerts"), sdktest.Stores("alert")); err == nil ||
			!strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", cfg, err, msg)
		}
	}
	if _, err := sdktest.Start(t, sdktest.Config(`{"timeout":"1m"}`), sdktest.Stores("alert")); err == nil ||
		!strings.Contains(err.Error(), `not declared by the processor (add to its outputs or stores in the pipeline config): output "alerts"`) {
		t.Errorf("undeclared output: %v", err)
	}
}
