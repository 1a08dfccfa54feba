package sdktest

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/fakeabi"
)

// Migrate runs the plugin's migration (package sdk/migrate) as the host
// does when the task's stores were last written by version from (abi/ABI.md
// section 13): its state writes are committed if it succeeds and
// discarded if it fails (Result.Err says why). It may not emit or set
// timers (EPHASE). A plugin that does not link sdk/migrate fails the test.
func (h *Host) Migrate(from string) Result {
	h.t.Helper()
	h.usable()
	fn := fakeabi.MigrateEntry()
	if fn == nil {
		h.t.Fatalf("sdktest: Migrate: the plugin does not link sdk/migrate (it exports no wasmstream_migrate)")
	}
	if len(from) > abi.MaxMigrateFrom {
		h.t.Fatalf("sdktest: Migrate: a %d-byte version ID, over abi.MaxMigrateFrom (%d)", len(from), abi.MaxMigrateFrom)
	}
	if len(from) > len(h.inBuf) {
		h.inBuf = h.guest.Input(uint32(len(from)))
	}
	if len(from) > len(h.inBuf) {
		return Result{Status: abi.StatusFailed, Err: errors.New("sdktest: the plugin's wasmstream_input gave " +
			strconv.Itoa(len(h.inBuf)) + " bytes for a " + strconv.Itoa(len(from)) + "-byte version ID")}
	}
	copy(h.inBuf, from)
	h.beginCall(phaseMigrate)
	st := abi.Status(fn(uint32(len(from))))
	return h.finish(st, nil)
}
