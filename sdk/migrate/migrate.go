// Package migrate lets a Go plugin migrate its state when it replaces
// another version of itself (abi/ABI.md section 13): the host calls the
// registered function once per task, before this version's first call on
// the task's stores, when they were last written by another version.
//
//	func init() {
//		sdk.Handle(process)
//		migrate.Handle(func(from string) error {
//			// from is the old version's ID, "<label>@<hash prefix>".
//			// Read the old layout with counts.Scan, write the new one
//			// with counts.Put.
//			return nil
//		})
//	}
//
// The function may use every store (Get, Put, Delete, Scan) as a record
// handler may; it may not emit or set timers (the host answers EPHASE).
// It is bounded like one record: limits.record_timeout, the per-record
// state-write limits and the task's account. An error, a panic or a limit
// fails it: nothing it wrote stays, and the host rolls the processor back
// to the version before. Its writes commit with the swap: exactly once per
// task, also across restores and failovers.
//
// Importing this package makes the plugin export wasmstream_migrate; a
// plugin that does not import it has no migration, and its stores pass to
// the next version as they are.
package migrate

import (
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/guest"
)

var handler func(from string) error

// Handle registers fn as the migration: from is the ID of the version
// whose layout the task's stores hold. Call it from an init function; a
// later call replaces it. A plugin that imports the package without
// registering a function fails every migration, which rolls it back.
func Handle(fn func(from string) error) { handler = fn }

// run is the body of wasmstream_migrate: the old version's ID is the n
// bytes of the input buffer.
func run(n uint32) abi.Status {
	buf := guest.Input()
	if uint64(n) > uint64(len(buf)) {
		return guest.Fail("sdk/migrate: version ID length beyond the input buffer")
	}
	if handler == nil {
		return guest.Fail("sdk/migrate: the host asked for a migration but none is registered: call migrate.Handle from an init function")
	}
	from := string(buf[:n])
	return guest.Run(0, func() error { return handler(from) })
}
