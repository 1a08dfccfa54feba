package migrate_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/migrate"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	out    = sdk.Output("out")
	counts = sdk.Store("counts")
)

// toBinary rewrites every JSON count ({"n":5}) as 8 bytes big-endian,
// reading the whole store first.
func toBinary(from string) error {
	if !strings.HasPrefix(from, "v1@") {
		return errors.New("no migration from " + from)
	}
	it, err := counts.Scan(nil, nil)
	if err != nil {
		return err
	}
	var keys, vals [][]byte
	for it.Next() {
		keys, vals = append(keys, append([]byte(nil), it.Key()...)), append(vals, append([]byte(nil), it.Value()...))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for i, k := range keys {
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(string(vals[i]), `{"n":`), "}"), 10, 64)
		if err != nil {
			return err
		}
		if err := counts.Put(k, binary.BigEndian.AppendUint64(nil, n)); err != nil {
			return err
		}
	}
	return nil
}

func host(t *testing.T, fn func(string) error) *sdktest.Host {
	sdk.OnInit(nil)
	sdk.Handle(func(*sdk.Record) error { return nil })
	migrate.Handle(fn)
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("counts"))
	h.State("counts").Put("a", []byte(`{"n":5}`))
	h.State("counts").Put("b", []byte(`{"n":12}`))
	return h
}

func TestMigrate(t *testing.T) {
	h := host(t, toBinary)
	if res := h.Migrate("v1@0123456789ab"); res.Err != nil {
		t.Fatal(res.Err)
	}
	for k, n := range map[string]uint64{"a": 5, "b": 12} {
		if v, _ := h.State("counts").Get(k); len(v) != 8 || binary.BigEndian.Uint64(v) != n {
			t.Errorf("%s = %x, want %d in 8 bytes", k, v, n)
		}
	}
}

// A failed migration (an error, a panic) leaves the stores as they were;
// emit and timers are refused during a migration (EPHASE).
func TestMigrateFailure(t *testing.T) {
	var emitErr, timerErr error
	h := host(t, func(from string) error {
		if from == "panic" {
			panic("migrate: asked to")
		}
		if err := counts.Put([]byte("half"), []byte("written")); err != nil {
			return err
		}
		emitErr = out.Emit(sdk.Out{Value: []byte("x")})
		_, timerErr = timer.Set(timer.EventTime, 5, []byte("t"))
		return errors.New("the migration fails")
	})
	res := h.Migrate("v1@0123456789ab")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "the migration fails") || len(res.All) != 0 {
		t.Fatalf("failing migration: %+v", res)
	}
	for name, err := range map[string]error{"emit": emitErr, "timer_set": timerErr} {
		var he *sdk.HostError
		if !errors.As(err, &he) || he.Errno != abi.ErrnoPhase {
			t.Errorf("%s during a migration: %v, want EPHASE", name, err)
		}
	}
	if res := h.Migrate("panic"); res.Err == nil || !strings.Contains(res.Err.Error(), "asked to") {
		t.Fatalf("panicking migration: %+v", res)
	}
	if _, ok := h.State("counts").Get("half"); ok || h.State("counts").Len() != 2 {
		t.Errorf("a failed migration's writes stayed: %d entries", h.State("counts").Len())
	}
}

// The wasmexport directive's name is abi.ExportMigrate (directive
// arguments must be literals).
func TestWasmDirectiveMatchesABI(t *testing.T) {
	src, err := os.ReadFile("imports_wasm.go")
	if err != nil {
		t.Fatal(err)
	}
	var exports []string
	for _, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "//go:wasmexport" {
			exports = append(exports, f[1])
		}
	}
	if len(exports) != 1 || exports[0] != abi.ExportMigrate {
		t.Errorf("wasmexport names %v, want [%s]", exports, abi.ExportMigrate)
	}
}
