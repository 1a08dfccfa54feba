package engine

import (
	"context"
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
)

// Migrate runs the plugin's wasmstream_migrate (abi/ABI.md section 13):
// the task's stores were last written by the version named from, and this
// instance's version is about to make its first call on them. from is
// written into the plugin's input buffer as a record is; the call may
// read and write state (Binding.State) as process may, but not emit or
// set timers (EPHASE). It is bounded like a record (Options.RecordTimeout,
// the per-record state limits) and its outcome is classified as Process
// classifies one: nil or a *RecordError, with the same discards. The
// caller stages the call's state writes and keeps them only on nil. A
// module that does not export the function (Info.HasMigrate) and a from
// over abi.MaxMigrateFrom get a plain error, and nothing runs.
func (i *Instance) Migrate(ctx context.Context, from string) error {
	if !i.m.info.HasMigrate {
		return fmt.Errorf("engine: processor %q: module %q does not export %s", i.b.Name, i.m.name, abi.ExportMigrate)
	}
	if len(from) > abi.MaxMigrateFrom {
		return fmt.Errorf("engine: processor %q: a %d-byte version ID to migrate from, over abi.MaxMigrateFrom (%d)", i.b.Name, len(from), abi.MaxMigrateFrom)
	}
	due := i.recordDue()
	buf, err := i.input(ctx, len(from), due)
	if err != nil {
		return err
	}
	copy(buf, from)
	if i.m.info.ImportsTimeNow && i.b.Time != nil {
		i.streamNow, i.wallNow = i.b.Time.Now()
	}
	return i.run(ctx, phaseMigrate, len(buf), due)
}
