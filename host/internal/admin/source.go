package admin

import (
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// Source is what the admin endpoint reads: the host implements it, tests
// use a fake. Every method is called on the request's goroutine, possibly
// concurrently with the others and with itself, so it must be safe for
// concurrent use, and it should return quickly (a scrape waits on it).
// Returned values are owned by the caller.
type Source interface {
	// Health reports whether the process works as configured. Not ok means
	// it needs attention: a task stopped by on_error: fail, or the runner
	// stopped on a fatal error. reason says which, for the 503 body.
	Health() (ok bool, reason string)
	// Ready reports whether every assigned task finished restoring its
	// state and no state database has failed, so the process processes
	// all it owns. When not ok, reason is the 503 body, e.g.
	// RestoringReason(n).
	Ready() (ok bool, reason string)
	// Processors describes the configured processors and the plugin each
	// runs now, in a stable order (the config's).
	Processors() []ProcessorInfo
	// Metrics returns the current numbers.
	Metrics() Snapshot
	// Shadow returns processor's latest shadow run in this process
	// (running or stopped) and the differing records it kept, oldest
	// first; ok is false if there is no such processor or it has had no
	// shadow run here.
	Shadow(processor string) (run shadow.Status, samples []shadow.Sample, ok bool)
}

// ProcessorInfo describes one processor: what it reads and writes and the
// plugin it runs now. It is served by /v1/processors and, for the plugin,
// as the wasmstream_plugin_info metric.
type ProcessorInfo struct {
	Name    string
	Inputs  []string
	Outputs map[string]string // output name (as the plugin emits) -> topic
	Stores  []string
	OnError string // fail, skip or dead_letter
	Plugin  PluginInfo
	// Paused: the processor is paused (`wasmstream pause`) and this
	// process applies it: its tasks fetch and process nothing.
	Paused bool
}

// PluginInfo identifies a processor's active plugin module: the version
// its new tasks start with (during a swap some tasks still run the
// previous one; Lifecycle.Tasks says which).
type PluginInfo struct {
	// Path is the config file's plugin, or "" when the active module is
	// not that file's (a version deployed through the control topic).
	Path       string
	SHA256     string // hex
	Size       int64  // bytes of the module
	ABIVersion int    // the ABI version the host speaks with it; 0 if unknown
	// Version is the version's ID (the wasmstream-version header of its
	// outputs), when the host knows one; "" otherwise. SHA256 is always
	// the identity.
	Version string
	// Label is the version's free-text label ("config" for the config
	// file's plugin, else the one given at deploy); may be "".
	Label string
}

// Snapshot is the numbers of one scrape. Optional parts the host does not
// supply (Lifecycle, CommitLatency, Lag, Extra) are simply left empty:
// their metrics are then not written.
type Snapshot struct {
	Processors []ProcessorMetrics
	// CommitLatency is the duration of the commit points (flush, offset
	// commit or transaction end) of the whole process, in seconds; nil
	// when unknown.
	CommitLatency *Histogram
	// RestoringTasks is how many tasks are restoring now.
	RestoringTasks int
	// Restores is the latest progress of every restore, by task and store.
	Restores []RestoreProgress
	// Lag is the consumer lag of the assigned input partitions, written as
	// wasmstream_consumer_lag_records.
	Lag []PartitionLag
	// Standbys are the standby replicas this process keeps (a Lag of
	// changelog records behind at the start of each one's latest catch-up
	// round), written as wasmstream_standby_lag_records.
	Standbys []PartitionLag
	// Times is the time of every task that keeps timers (abi/ABI.md
	// section 8): pending timers and stream time.
	Times []TaskTime
	// Now is the wall time the stream-time lag is measured against, in ms
	// since the epoch (0: the time of writing).
	Now int64
	// State is the health of each state database of the process, in a
	// stable order.
	State []StateDB
	// StateOpen is what the state databases have open, summed: task
	// handles and scans; nil without a state database.
	StateOpen *StateCounts
	// Extra are further metric families for metrics this package has no
	// field for yet. A family whose name is invalid, or is the name of a
	// built-in family, is not written (and logged once).
	Extra []Family
}

// ProcessorMetrics are one processor's counters. They only grow over the
// life of the process.
type ProcessorMetrics struct {
	Name         string
	RecordsIn    int64
	RecordsOut   int64
	Skipped      int64
	DeadLettered int64
	FailedTasks  int64
	Commits      int64
	Aborts       int64
	// HeldBytes is what the host holds for the processor's plugins now
	// (a gauge); BudgetCommits the commit points brought forward by it.
	HeldBytes, BudgetCommits int64
	// InstanceBytes is the linear memory of the processor's plugin
	// instances now (a gauge), in the same accounts.
	InstanceBytes int64
	// Time (abi/ABI.md section 8): timer firings, commit-point calls, and
	// timers and marks dropped because the running version lacks the
	// callback.
	TimerFirings  int64
	CommitCalls   int64
	TimersDropped int64
	MarksDropped  int64
	// Failures counts failed records by kind (trap, timeout, ...).
	Failures map[string]int64
	// Latency is the time in the plugin per record.
	Latency Histogram
	// Lifecycle is the processor's plugin versions in this process; nil
	// when the host does not know them (then no version or swap metrics
	// are written).
	Lifecycle *Lifecycle
}

// StateDB is the health of one state database: a processor's, or the
// global tables'.
type StateDB struct {
	// Database is the processor's name, or "global_tables".
	Database string
	// Failed is the database's failure (a write the disk refused or did
	// not answer), "" while it is healthy.
	Failed string
	// Failures counts its failures by cause ("no_space", "io",
	// "timeout"); they only grow.
	Failures map[string]int64
}

// Histogram is a latency histogram in seconds. Counts holds one count per
// bucket, not cumulative: Counts[i] counts observations under Bounds[i]
// (and at or above Bounds[i-1]); the last, Counts[len(Bounds)], those at
// or above the last bound. Bounds ascend. A histogram whose Counts is not
// len(Bounds)+1 long is not written.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
}

// RestoreProgress is the latest progress of one store's restore.
type RestoreProgress struct {
	Task      string // processor/topic/partition
	Store     string
	Topic     string // the changelog
	Partition int32
	Start     int64 // where reading began
	Target    int64 // the offset to reach
	Position  int64 // the next offset to read
	Restored  int64 // changelog records applied
	Rate      float64
	Wipes     int
	Restarts  int
	Done      bool
}

// StateCounts are what the state database has open (state.DB.Open).
type StateCounts struct {
	Tasks     int `json:"tasks"`     // task handles
	Iterators int `json:"iterators"` // scans not yet closed
}

// Lifecycle is where a processor's plugin versions stand in this process:
// the version each task runs, the versions refused, the swap counters
// (which only grow), and what its versions hold now.
type Lifecycle struct {
	Swaps        int64 // task switches to a new plugin version
	SwapFailures int64 // task switches that failed (the task kept its version)
	// SlowStarts counts plugin instances whose start (init) took over
	// half its budget.
	SlowStarts int64
	Rollbacks  int64 // automatic rollbacks of a version that failed its canary or its migration
	Refusals   int64 // versions from the control topic this process refused to run
	// Migrations counts tasks whose state a new version migrated
	// (abi/ABI.md section 13); MigrationFailures the migrations that
	// failed (each rolled its version back).
	Migrations, MigrationFailures int64
	// ShadowMatches, ShadowDifferences and ShadowFailures are the records
	// shadow runs compared in this process (the candidate emitted the
	// same, something else, or failed); ShadowStops the shadows that
	// stopped themselves.
	ShadowMatches, ShadowDifferences, ShadowFailures, ShadowStops int64
	// Held is how many versions the processor holds compiled (package
	// versions: active, back, pending, and those tasks still run); Modules
	// and Instances are its runtime's open modules and plugin instances,
	// MemoryBytes their linear memories' bytes, SnapshotBytes what the
	// snapshots of their inits hold (a replacement after a trap is
	// restored from one).
	Held, Modules, Instances int
	MemoryBytes              int64
	SnapshotBytes            int64
	// Tasks is the version each assigned task runs, sorted by task.
	Tasks []TaskVersion
	// Refused is the latest refusals, oldest first (the host keeps a few).
	Refused []Refusal
}

// TaskVersion is the plugin version one task runs.
type TaskVersion struct {
	Task    string // processor/topic/partition
	Version string // a version ID, as PluginInfo.Version
}

// Refusal is a plugin version this process would not run: it kept the
// running one.
type Refusal struct {
	Version string // the version ID; "(unreadable)" for a manifest that does not decode
	SHA256  string // "" when unknown
	Label   string
	Reason  string
	At      time.Time
}

// TaskTime is a task's time as of its latest commit point.
type TaskTime struct {
	Processor     string
	Topic         string
	Partition     int32
	PendingTimers int
	// StreamTime is in ms since the epoch; math.MinInt64 when the task
	// has none (its lag is then not written).
	StreamTime int64
}

// PartitionLag is how far a task's position (its next record) is behind
// the end of its input partition (the last stable offset), in records, as
// of the task's latest fetch.
type PartitionLag struct {
	Processor string
	Topic     string
	Partition int32
	Lag       int64
}

// MetricType is the Prometheus type of an extra family.
type MetricType string

// Metric types of extra families.
const (
	Counter MetricType = "counter"
	Gauge   MetricType = "gauge"
)

// Family is a metric family supplied by the host (Snapshot.Extra).
type Family struct {
	Name    string // e.g. wasmstream_something_total
	Help    string
	Type    MetricType
	Samples []Sample
}

// Sample is one value of a family.
type Sample struct {
	Labels []Label
	Value  float64
}

// Label is a label pair.
type Label struct{ Name, Value string }

// RestoringReason is the readiness reason while n tasks restore.
func RestoringReason(n int) string {
	return "restoring " + strconv.Itoa(n) + " tasks"
}
