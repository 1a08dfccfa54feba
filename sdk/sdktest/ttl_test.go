package sdktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

var (
	ttlStore = sdk.Store("s")
	ttlOut   = sdk.Output("out")
)

// A record's value is "put:k", "get:k" or "scan"; what it reads is
// emitted.
func ttlPlugin(r *sdk.Record) error {
	cmd, key, _ := strings.Cut(string(r.Value), ":")
	switch cmd {
	case "put":
		return ttlStore.Put([]byte(key), []byte("v"))
	case "get":
		_, ok, err := ttlStore.Get([]byte(key))
		if err != nil {
			return err
		}
		if ok {
			return ttlOut.Emit(sdk.Out{Value: []byte("found")})
		}
		return ttlOut.Emit(sdk.Out{Value: []byte("missing")})
	case "scan":
		it, err := ttlStore.Scan(nil, nil)
		if err != nil {
			return err
		}
		var keys []string
		for it.Next() {
			keys = append(keys, string(it.Key()))
		}
		return ttlOut.Emit(sdk.Out{Value: []byte("scan " + strings.Join(keys, ","))})
	}
	return nil
}

func step(t *testing.T, h *sdktest.Host, ts int64, cmd string) string {
	t.Helper()
	res := h.MustProcess(sdktest.Record{Timestamp: ts, Value: []byte(cmd)})
	if len(res.All) == 0 {
		return ""
	}
	return string(res.All[0].Value)
}

// ABI.md section 8.7 on the stream clock: an entry expires at its stamp
// plus the TTL, is unreadable at once, and is deleted at the next commit
// point; a write renews it, a read does not.
func TestStoreTTLStreamTime(t *testing.T) {
	sdk.OnInit(nil)
	sdk.Handle(ttlPlugin)
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("s"), sdktest.StoreTTL("s", 100*time.Millisecond, abi.ClockStream))
	step(t, h, 1000, "put:a")
	step(t, h, 1050, "put:b")
	if got := step(t, h, 1099, "get:a"); got != "found" {
		t.Fatalf("before expiry: %s", got)
	}
	if got := step(t, h, 1100, "get:a"); got != "missing" {
		t.Fatalf("at expiry: %s", got)
	}
	if got := step(t, h, 1100, "scan"); got != "scan b" {
		t.Fatalf("scan: %s", got)
	}
	if _, ok := h.State("s").Get("a"); !ok {
		t.Fatal("deleted before a commit point")
	}
	h.MustCommit()
	if got := h.State("s").Keys(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("after the commit point: %q", got)
	}
	step(t, h, 1120, "put:b") // renews b until 1220
	if got := step(t, h, 1200, "get:b"); got != "found" {
		t.Fatalf("renewed: %s", got)
	}
	// An out-of-order record does not bring an expired entry back: the
	// stream time does not go back.
	if got := step(t, h, 1000, "get:a"); got != "missing" {
		t.Fatalf("old record: %s", got)
	}
}

func TestStoreTTLWallTime(t *testing.T) {
	sdk.OnInit(nil)
	sdk.Handle(ttlPlugin)
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("s"), sdktest.WallTime(0),
		sdktest.StoreTTL("s", time.Minute, abi.ClockWall))
	step(t, h, 1<<40, "put:k") // the record's timestamp does not matter
	h.SetWallTime(59_999)
	if got := step(t, h, 0, "get:k"); got != "found" {
		t.Fatalf("before: %s", got)
	}
	h.AdvanceWallTime(time.Millisecond)
	if got := step(t, h, 0, "get:k"); got != "missing" || h.State("s").Len() != 0 {
		t.Fatalf("after: %s, %q", got, h.State("s").Keys())
	}
}
