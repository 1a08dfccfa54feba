package host

import (
	"time"

	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// The types of this file are snapshots: values copied out of a running
// host (or a module, or a state directory) for the caller to keep.

// ProcessorStats are one processor's counters in this process since New.
// They only grow, except StoppedTasks, HeldBytes and InstanceBytes, gauges.
type ProcessorStats struct {
	RecordsIn    int64 // records handed to the plugin
	RecordsOut   int64 // records emitted by records that succeeded
	Skipped      int64 // failed records skipped (on_error: skip)
	DeadLettered int64 // failed records sent to the dead-letter topic
	FailedTasks  int64 // tasks stopped by on_error: fail or a failed restore, ever
	StoppedTasks int64 // such tasks this process holds now
	Commits      int64 // commit points that committed offsets
	Aborts       int64 // transactions aborted (exactly_once); their work is redone
	// RefusalAborts counts commit windows aborted (either guarantee)
	// because the broker refused a record the host had let through.
	RefusalAborts int64
	Swaps         int64 // tasks switched to a new plugin version
	SwapFailures  int64 // tasks whose new version did not start (they kept the old one)
	Rollbacks     int64 // automatic rollbacks of a version that failed its canary or its state migration
	// Migrations counts the tasks whose state a new version migrated
	// (abi/ABI.md section 13); MigrationFailures the migrations that
	// failed (each rolled the version back).
	Migrations        int64
	MigrationFailures int64
	// Failures counts failed records by kind: trap, timeout,
	// memory_limit, abi_misuse, plugin_failed, host_failed, instance_lost,
	// stack_limit, limit_exceeded.
	Failures map[string]int64
	// HeldBytes is what the host holds in memory for the processor's
	// plugins now (staged emits and state writes, timers, commit marks:
	// its tasks' accounts, abi/ABI.md section 7); BudgetCommits counts the
	// commit points it brought forward (limits.window_bytes,
	// runtime.memory_budget).
	HeldBytes int64
	// InstanceBytes is the linear memory of the processor's plugin
	// instances now, charged to the same accounts and budget.
	InstanceBytes int64
	BudgetCommits int64
}

// RestoreProgress is the progress of one store's restore from its
// changelog.
type RestoreProgress struct {
	Task      string // processor/partition
	Store     string
	Topic     string // the changelog topic
	Partition int32

	Start    int64 // changelog offset reading began at: the checkpoint, or the log start
	Target   int64 // the offset restore reads up to, fixed when it starts (the last stable offset)
	Position int64 // the next offset to read; the store's checkpoint after each batch
	Restored int64 // changelog records applied (values and tombstones)

	Elapsed time.Duration
	Rate    float64 // Restored per second of Elapsed

	Wipes    int  // times the task's state was wiped (checkpoint out of range, log start moved)
	Restarts int  // times the restore started over
	Done     bool // Position reached Target
}

func restoreProgress(p restore.Progress) RestoreProgress {
	return RestoreProgress{
		Task: p.Task, Store: p.Store, Topic: p.Topic, Partition: p.Partition,
		Start: p.Start, Target: p.Target, Position: p.Position, Restored: p.Restored,
		Elapsed: p.Elapsed, Rate: p.Rate, Wipes: p.Wipes, Restarts: p.Restarts, Done: p.Done,
	}
}

// PluginInfo describes a plugin module (`wasmstream plugin inspect`).
type PluginInfo struct {
	// ABIVersion is the ABI version the host speaks with the module: the
	// highest both support. ABIVersions are those the module declares
	// (wasmstream_abi_version_N exports), ascending.
	ABIVersion  int
	ABIVersions []int
	Size        int    // bytes of the module
	SHA256      string // hex
	// Exports and Imports are in binary order; the host's own
	// instrumentation exports are not listed.
	Exports []PluginSymbol
	Imports []PluginSymbol
	// MemoryMinPages is the exported memory's minimum in 64 KiB pages;
	// MemoryMaxPages its declared maximum when HasMemoryMax.
	MemoryMinPages uint32
	MemoryMaxPages uint32
	HasMemoryMax   bool
	// The initializers that run at instantiation, in this order: the
	// start function, _initialize, wasmstream_init.
	HasStart      bool
	HasInitialize bool
	HasInit       bool
	// InstrumentedFunctions and InstrumentedLoops count the interrupt
	// checks the host inserts (one per function body and loop head), which
	// bound a record's time.
	InstrumentedFunctions int
	InstrumentedLoops     int
	// CompileMemory and CompileTime estimate what compiling the module
	// takes (host memory, CPU time) and InstanceMemory what each instance
	// holds besides its linear memory and tables: the figures
	// runtime.module_limits bounds.
	CompileMemory  int64
	CompileTime    time.Duration
	InstanceMemory int64
	// Signer is the fingerprint of the key whose signature the module
	// carries (abi/ABI.md section 11), "" if it is unsigned.
	// SignatureProblem says why its signature section is malformed or
	// does not match the module's bytes; "" when it matches (whether the
	// key is trusted is runtime.trusted_keys' question).
	Signer           string
	SignatureProblem string
}

// PluginSymbol is one import or export of a module.
type PluginSymbol struct {
	Module    string // import module; "" for exports
	Name      string
	Kind      string // "func", "memory", "table", "global" or "tag"
	Signature string // functions only, like "(i32, i32) -> i32"
}

// String formats the symbol like "wasmstream.emit: func (i32, i32) -> i32".
func (s PluginSymbol) String() string {
	return engine.Symbol(s).String()
}

func pluginInfo(i engine.Info) PluginInfo {
	out := PluginInfo{
		ABIVersion: i.ABIVersion, ABIVersions: i.ABIVersions, Size: i.Size, SHA256: i.SHA256,
		MemoryMinPages: i.MemoryMinPages, MemoryMaxPages: i.MemoryMaxPages, HasMemoryMax: i.HasMemoryMax,
		HasStart: i.HasStart, HasInitialize: i.HasInitialize, HasInit: i.HasInit,
		InstrumentedFunctions: i.InstrumentedFunctions, InstrumentedLoops: i.InstrumentedLoops,
		CompileMemory: i.CompileMemory, CompileTime: i.CompileTime, InstanceMemory: i.InstanceMemory,
	}
	for _, s := range i.Exports {
		out.Exports = append(out.Exports, PluginSymbol(s))
	}
	for _, s := range i.Imports {
		out.Imports = append(out.Imports, PluginSymbol(s))
	}
	return out
}

// VersionInfo describes one plugin version.
type VersionInfo struct {
	// ID names the version in the wasmstream-version header of its
	// outputs: "<label>@<sha256 prefix>", or the prefix alone.
	ID    string `json:"id"`
	Hash  string `json:"sha256,omitempty"` // the module's SHA-256, hex
	Label string `json:"label,omitempty"`
}

func versionInfo(v versions.Info) VersionInfo {
	return VersionInfo{ID: v.ID, Hash: v.Hash, Label: v.Label}
}

// Refusal is a version from the control topic this process would not run.
type Refusal struct {
	VersionInfo
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ProcessorVersions is where a processor stands in this process.
type ProcessorVersions struct {
	Processor string `json:"processor"`
	// Active is the version this process runs (and new tasks start with).
	Active VersionInfo `json:"active"`
	// Tasks maps each task ("processor/topic/partition") to the version
	// ID it runs; during a swap some still run the old one.
	Tasks map[string]string `json:"tasks"`
	// Refused lists the latest versions this process refused, newest last;
	// Refusals counts them all.
	Refused  []Refusal `json:"refused,omitempty"`
	Refusals int64     `json:"refusals"`
}

// StateStore is one store of one task (processor, partition) found in a
// local state directory.
type StateStore struct {
	Processor string
	Partition int32
	Store     string
	// Checkpoint is the next changelog offset to restore: the store holds
	// the effect of every changelog record below it. Valid when
	// HasCheckpoint; a store without one (never restored, or wiped) is
	// restored from the changelog's start.
	Checkpoint    int64
	HasCheckpoint bool
	// HasData is set when the store holds at least one key.
	HasData bool
}

func stateStore(s state.StoreInfo) StateStore { return StateStore(s) }
