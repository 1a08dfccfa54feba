// Package abi is the contract between the wasmstream host and its plugins:
// the names of the imports and exports, the errno table, the record layout and
// its codec. It imports only the standard library so that the host, the Go SDK
// and any other SDK can share it. abi/ABI.md is the prose specification; this
// package is its executable half.
package abi

// Version is the ABI version this package describes. A plugin declares the
// version it speaks by exporting a function named VersionMarkerPrefix+N
// (wasmstream_abi_version_1 for this version).
const Version = 1

// VersionMarkerPrefix starts the name of the exported function that marks the
// ABI version a module speaks. The suffix is the decimal version.
const VersionMarkerPrefix = "wasmstream_abi_version_"

// VersionMarker is the export a version-1 plugin must have.
const VersionMarker = "wasmstream_abi_version_1"

// ImportModule is the Wasm import module name of every host function.
const ImportModule = "wasmstream"

// WASIModule is the only other import module a plugin may use. The host
// provides it sandboxed: no files, no environment, no arguments, no network,
// a deterministic clock and a deterministic random source.
const WASIModule = "wasi_snapshot_preview1"

// Exports of a plugin.
const (
	// ExportMemory is the plugin's linear memory; required.
	ExportMemory = "memory"
	// ExportInitialize is the WASI reactor initializer (run package init,
	// set up the language runtime). Optional; called first when present.
	ExportInitialize = "_initialize"
	// ExportInput is input(size u32) -> ptr u32: returns the address of a
	// buffer of at least size bytes that the host may write the next record
	// into, or 0 if the plugin cannot provide one. Required. The host calls it
	// once at start and again only when a record does not fit.
	ExportInput = "wasmstream_input"
	// ExportProcess is process(len u32) -> status i32: the record is in the
	// input buffer, len bytes long. Required. See the Status constants.
	ExportProcess = "wasmstream_process"
	// ExportInit is init() -> status i32, called once per instance after
	// _initialize and before the first record. Optional.
	ExportInit = "wasmstream_init"
	// ExportMigrate is migrate(len u32) -> status i32: optional. The host
	// calls it once per task before the version's first call when the
	// task's stores were last written by another version; the input
	// buffer holds that version's ID (len bytes, UTF-8). The plugin may
	// read and write its stores as in process (no emits, no timers). A
	// status other than StatusOK, a trap, a timeout or a limit fails the
	// migration: its writes are discarded and the swap is rolled back.
	ExportMigrate = "wasmstream_migrate"
)

// MaxMigrateFrom is the longest version ID the host hands to
// ExportMigrate, in bytes (a version's label is shorter).
const MaxMigrateFrom = 1 << 10

// Imports the host provides in ImportModule. Every pointer and length is a
// u32 into the calling plugin's memory and is bounds-checked by the host. A
// negative result is -Errno.
const (
	// ImportEmit is emit(ptr, len u32) -> i32. The bytes are one record in
	// the record layout; its Index field names the output (see
	// ImportOutputIndex). Returns 0.
	ImportEmit = "emit"
	// ImportOutputIndex is output_index(name_ptr, name_len u32) -> i32: the
	// index of the declared output with that name, or -ErrnoNoName.
	ImportOutputIndex = "output_index"
	// ImportStoreIndex is store_index(name_ptr, name_len u32) -> i32: the
	// index of the declared state store with that name, or -ErrnoNoName.
	ImportStoreIndex = "store_index"
	// ImportConfig is config(out_ptr, out_cap u32) -> i32: the length of the
	// processor's configuration (JSON); the bytes are written only when the
	// length is <= out_cap.
	ImportConfig = "config"
	// ImportLog is log(level u32, ptr, len u32) -> i32.
	ImportLog = "log"
	// ImportSetError is set_error(ptr, len u32) -> i32: the reason the current
	// record (or init) failed. The plugin then returns StatusFailed.
	ImportSetError = "set_error"
	// ImportStateGet is state_get(store u32, key_ptr, key_len, out_ptr,
	// out_cap u32) -> i32: the value's length, or -ErrnoNotFound. The value
	// is written only when its length is <= out_cap, so a plugin with a small
	// buffer learns the size and calls again.
	ImportStateGet = "state_get"
	// ImportStatePut is state_put(store u32, key_ptr, key_len, val_ptr,
	// val_len u32) -> i32.
	ImportStatePut = "state_put"
	// ImportStateDelete is state_delete(store u32, key_ptr, key_len u32) -> i32.
	ImportStateDelete = "state_delete"
	// ImportScanOpen is scan_open(store u32, start_ptr, start_len, end_ptr,
	// end_len u32) -> i32: a cursor over keys k with start <= k < end in byte
	// order (an empty end means no upper bound), or -errno.
	ImportScanOpen = "scan_open"
	// ImportScanNext is scan_next(cursor u32, out_ptr, out_cap u32) -> i32: the
	// length of the next entry in the scan-entry layout, 0 at the end, or
	// -errno. The entry is written only when it fits; otherwise its length is
	// returned and the cursor does not move.
	ImportScanNext = "scan_next"
	// ImportScanClose is scan_close(cursor u32) -> i32.
	ImportScanClose = "scan_close"
)

// Status is what process and init return.
type Status int32

const (
	// StatusOK: the record was processed; its emits and state writes stand.
	StatusOK Status = 0
	// StatusFailed: the plugin rejects the record; the reason was given with
	// set_error. The host applies the processor's error policy.
	StatusFailed Status = 1
)

// Log levels for ImportLog, ordered like log/slog's.
const (
	LogDebug uint32 = 0
	LogInfo  uint32 = 1
	LogWarn  uint32 = 2
	LogError uint32 = 3
)

// Limits the host enforces; part of the contract so plugins can rely on them.
const (
	// MaxKeySize is the largest state key, in bytes.
	MaxKeySize = 4 << 10
	// MaxValueSize is the largest state value, in bytes.
	MaxValueSize = 1 << 20
	// MaxRecordSize is the largest encoded record the host accepts from
	// emit, in bytes. Kafka's default max.message.bytes is about 1 MiB.
	MaxRecordSize = 1 << 20
	// MaxHeaders is the largest header count of one record.
	MaxHeaders = 1024
	// MaxLogSize is the largest log message kept; longer ones are cut.
	MaxLogSize = 4 << 10
	// MaxOpenCursors is how many scan cursors one record may hold open.
	MaxOpenCursors = 16
)
