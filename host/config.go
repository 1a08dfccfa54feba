package host

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/signature"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Config is the whole configuration of one wasmstream process. The CLI
// loads it from a YAML file, WASMSTREAM_ environment variables and
// command-line flags, merged in that order (later wins; internal/configload);
// an embedder may build it in Go. Every default is stated on its field and
// set by ApplyDefaults (defaults.go); Validate (validate.go) names the
// field path of every problem.
type Config struct {
	// AppID names the application. It is the consumer group id, the
	// transactional id prefix and the prefix of every internal topic. All
	// processes with the same AppID share the work. Required.
	AppID string `koanf:"app_id"`

	// Guarantee is "exactly_once" (default) or "at_least_once", for every
	// processor of the app (they share one consumer group; with
	// kafka.members: shared also one producer and its transactions). exactly_once: a commit point is one Kafka transaction
	// holding the outputs, changelog records, dead letters and input
	// offsets; local state is applied only if it commits. at_least_once:
	// outputs and changelogs are acknowledged, state applied, then offsets
	// committed; a crash can repeat records.
	Guarantee Guarantee `koanf:"guarantee"`

	Kafka      KafkaConfig       `koanf:"kafka"`
	Processors []ProcessorConfig `koanf:"processors"`
	State      StateConfig       `koanf:"state"`
	Runtime    RuntimeConfig     `koanf:"runtime"`
	Swap       SwapConfig        `koanf:"swap"`
	Admin      AdminConfig       `koanf:"admin"`
	Query      QueryConfig       `koanf:"query"`
	Log        LogConfig         `koanf:"log"`

	// oldStateDir is the state.dir an earlier wasmstream, which resolved
	// a relative state.dir against the working directory, would have
	// used, when that differs from State.Dir (ResolvePaths sets it; see
	// OldStateDir).
	oldStateDir string
}

// KafkaConfig is how the host talks to Kafka.
type KafkaConfig struct {
	// Brokers are the seed brokers, host:port. Empty means: start an
	// embedded in-process broker on 127.0.0.1, for development only.
	Brokers []string `koanf:"brokers"`
	// ClientID is sent to the brokers. Default "wasmstream".
	ClientID string `koanf:"client_id"`
	// CommitInterval is the time between commit points: the longest a
	// processed record waits before its offset is committed. Default 100ms.
	CommitInterval time.Duration `koanf:"commit_interval"`
	// CommitRecords is a second commit trigger: a commit point happens as
	// soon as this many records were processed since the last one, a bound
	// on a window's work for rates where CommitInterval alone would let it
	// grow large. Default 100000 (1,000,000 records/s at the default
	// interval): below that rate, commit points come every CommitInterval.
	CommitRecords int `koanf:"commit_records"`
	// StartOffset is where a partition with no committed offset starts:
	// "earliest" or "latest". Default "earliest".
	StartOffset StartOffset `koanf:"start_offset"`
	// CreateTopics makes the host create missing input and output topics
	// (with TopicPartitions partitions). Default false; always on with the
	// embedded broker.
	CreateTopics bool `koanf:"create_topics"`
	// TopicPartitions is the partition count of topics the host creates.
	// Default 3.
	TopicPartitions int `koanf:"topic_partitions"`
	// SessionTimeout is the consumer group session timeout. Default 45s.
	SessionTimeout time.Duration `koanf:"session_timeout"`
	// GroupProtocol is the consumer group protocol: "auto" (default) uses
	// KIP-848 ("consumer") when the brokers support it and "classic"
	// (cooperative-sticky) otherwise. KIP-848 rebalances have no group-wide
	// barrier: a crashed member does not stall the others.
	GroupProtocol GroupProtocol `koanf:"group_protocol"`
	// Members is how this process joins the consumer group:
	// "per_processor" (default) makes one group member, with its own
	// client, producer and transactions, for each processor, so that a
	// slow or stalled processor holds only its own commit points and never
	// another processor's; "shared" makes one member for all processors
	// (fewer connections and transactions; a processor whose records keep
	// timing out then delays the others' commits). Partitions are spread
	// over the members of all processes as usual.
	Members Members `koanf:"members"`
	// TransactionTimeout (exactly_once) is how long the broker lets a
	// transaction stay open before aborting it: after a crash, the
	// partitions of the dead process wait up to this long before another
	// process can take them over. Default 10s.
	TransactionTimeout time.Duration `koanf:"transaction_timeout"`
	// ConnectTimeout is how long a starting process waits for the brokers
	// to answer (retrying with backoff, logging what it waits for) before
	// it gives up: a process started during a broker outage or restart
	// waits for the cluster instead of exiting. Authentication and TLS
	// failures are not retried. Default 60s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
	// TLS encrypts the connections to the brokers (security.go).
	TLS TLSConfig `koanf:"tls"`
	// SASL authenticates to the brokers (security.go).
	SASL SASLConfig `koanf:"sasl"`
	// FetchMaxPartitionBytes bounds what one fetch returns of one
	// partition (Kafka's max.partition.fetch.bytes; a larger first record
	// still comes whole). Fetched records wait decoded in memory until
	// processed, so this, times the partitions of a fetch, is most of a
	// process's memory beyond its plugins and stores. Default 128KiB.
	FetchMaxPartitionBytes ByteSize `koanf:"fetch_max_partition_bytes"`
	// FetchMaxBytes bounds one fetch response of one broker (Kafka's
	// fetch.max.bytes). Default 16MiB.
	FetchMaxBytes ByteSize `koanf:"fetch_max_bytes"`
	// RepartitionPurgeInterval is how often a process deletes the records
	// of the app's repartition topics that their reading processor has
	// committed past (Kafka DeleteRecords below the group's committed
	// offsets), so those topics do not grow without bound. Default 30s.
	RepartitionPurgeInterval time.Duration `koanf:"repartition_purge_interval"`
}

// ProcessorConfig declares one processor: a plugin, what it reads, what it
// may write.
type ProcessorConfig struct {
	// Name identifies the processor in logs, metrics and internal topic
	// names: [a-zA-Z0-9._-]+. Required, unique.
	Name string `koanf:"name"`
	// Plugin is the path of the .wasm module; a relative path is relative
	// to the config file's directory.
	// Required.
	Plugin string `koanf:"plugin"`
	// Shadow is the path of a .wasm module every process of the app runs
	// as the processor's shadow from its start: the config's form of
	// `wasmstream deploy --shadow` (README, "Shadow runs"). Its emits are
	// compared with the plugin's and dropped, its state writes kept in an
	// overlay; nothing of it is committed. A shadow the control topic
	// names (deploy --shadow, or a shadow-first deploy) takes its place;
	// remove it from the config to end it. Default "" (none).
	Shadow string `koanf:"shadow"`
	// Inputs are the topics the processor reads. At least one; a topic may
	// be the input of one processor only. "<processor>.<output>" names the
	// repartition output of another processor of the app (see
	// Repartition): the processor reads that output's internal topic. The
	// record's input index (abi.Record.Index) is the position here. A
	// processor with stores and several inputs is co-partitioned: its
	// task p reads partition p of every input, in timestamp order (it
	// waits, up to a second, for an input whose records are on the broker
	// but not fetched yet), with one store set, so the inputs must have
	// the same partition count (checked at startup) and be keyed alike
	// (the same key in the same partition): what a join or an aggregate
	// over several topics needs. A processor without stores reads each
	// input partition in a task of its own.
	Inputs []string `koanf:"inputs"`
	// Outputs maps the names the plugin emits to (its outputs) to topics:
	// `out: orders-nl`, or `out: {topic: orders-nl, emit: latest_per_key}`.
	// emit is when the output's records are produced: each (the default):
	// every record the plugin emits, once its input record succeeded;
	// latest_per_key: only the last record emitted for each key in a
	// commit window, produced at its commit point (what Kafka Streams'
	// record cache does to output volume: a count emitted on every update
	// reaches the topic once per commit interval; records with a null key
	// are produced as they come). A plugin can emit only to these and to
	// its Repartition outputs. Output indices are the names of both in
	// sorted order.
	Outputs map[string]OutputConfig `koanf:"outputs"`
	// Repartition names outputs that go to an internal topic the host
	// creates and owns, <app_id>-<processor>-<output>-repartition, instead
	// of a topic of Outputs (a name is in one or the other). Another
	// processor of the app reads it by naming "<processor>.<output>" in
	// its inputs; exactly one must. Records keep their key and, unless
	// the plugin picks a partition, go to the partition their key hashes
	// to, so task p of the reader sees every record whose key hashes to p:
	// re-key, then aggregate by the new key. The topic has delete
	// retention with no time limit; the host deletes its records once the
	// reader has committed past them (kafka.repartition_purge_interval).
	// Under exactly_once each hop is a transaction of its own and the
	// reader reads committed records only, so the chain is exactly once.
	Repartition []string `koanf:"repartition"`
	// RepartitionPartitions is the partition count of the processor's
	// repartition topics when they are created. Default: the partition
	// count of the processor's first input, so the chain keeps its
	// parallelism. An existing repartition topic with another count is an
	// error (its records would be split among the wrong tasks).
	RepartitionPartitions int `koanf:"repartition_partitions"`
	// Stores are the processor's key-value state stores, by name. Each is
	// kept per task (input partition) in the local state directory and
	// backed by a compacted changelog topic <app_id>-<store>-changelog,
	// from which a task's store is restored wherever the task runs. Store
	// names are unique within the app. The tasks are the partitions of the
	// inputs (co-partitioned when there are several: see Inputs).
	Stores []string `koanf:"stores"`
	// Tables are global tables the plugin reads, table name -> topic. Each
	// process reads the whole topic (every partition, read_committed) into
	// its local state directory: the latest value per key, a null value
	// deleting the key; the processor's tasks share it. The plugin reads a
	// table through the state imports under its name (store_index gives
	// an index after its stores); writes return EINVAL. A lookup sees the
	// table as it is when it reads, not as of the record's position.
	// Tasks start processing once every table has read its topic up to
	// the end offsets listed at startup. Names follow the store name rules
	// and must not be one of the processor's stores or outputs. The topic
	// must exist, or is created compacted when kafka.create_topics is on.
	Tables map[string]string `koanf:"tables"`
	// TaskTables are co-partitioned tables the plugin reads, table name ->
	// topic. The topic is read like an input, co-partitioned with the
	// processor's inputs (same partition count, keyed alike): task p keeps
	// partition p of it in a store of the task, the latest value per key,
	// a null value deleting the key, written in timestamp order with the
	// records of the other inputs (on a tie, the table's record first), so
	// a lookup sees the table as of the record being processed. Its records are not handed to the plugin,
	// which reads the table through the state imports under its name
	// (store_index gives an index after its stores and global tables);
	// writes return EINVAL. The topic is the table's changelog (no extra
	// topic, like Kafka Streams' source-topic reuse): a task that moves
	// restores it from the topic, up to the group's committed offset. It
	// must exist, or is created compacted when kafka.create_topics is on.
	// A record without a key is skipped; one the store cannot hold (a key
	// over 4 KiB, a value over 1 MiB) fails like a record, under on_error.
	// Names follow the store name rules and must not be one of the
	// processor's stores, global tables or outputs.
	TaskTables map[string]string `koanf:"task_tables"`
	// Expire gives stores a time to live, by store name (abi/ABI.md
	// section 8.7): an entry expires once the store's clock reaches the
	// time of its last write plus After. Expired entries are absent from
	// reads at once and deleted by the host (tombstones in the changelog).
	// A store's TTL cannot be added or removed once it holds data (its
	// values then carry expiry stamps): use a new store name.
	Expire map[string]StoreExpiry `koanf:"expire"`
	// Config is handed to the plugin as JSON (the ABI's config import);
	// a processor without config gets {}.
	Config map[string]any `koanf:"config"`
	// OnError is what a failed record (any failure kind: a trap, a
	// timeout, a limit, ABI misuse, a refused write, the plugin's own
	// rejection; docs/design.md section 7) does: "fail" stops the task
	// at that record and keeps its offset; "skip" logs and counts it and
	// moves on; "dead_letter" writes the original record with error headers
	// to <app_id>-<name>-dlq and moves on. Default "fail".
	OnError ErrorPolicy `koanf:"on_error"`
	// StateCache bounds each task's record cache: the committed values of
	// its stores' keys kept in memory, so that reading a key again does
	// not go to the local store (the commit window's own writes are always
	// in memory, and reach the store and its changelog once per key at
	// each commit point, whatever this says). A size, or "off". Counted in
	// the process's memory per task (docs/operations.md). Default 16MiB.
	StateCache CacheSize `koanf:"state_cache"`
	Limits     Limits    `koanf:"limits"`
}

// CacheSize is a cache's size: a ByteSize, or "off" for none. Its zero
// value ("") is the default.
type CacheSize string

// UnmarshalText accepts "off" and the forms of ByteSize.
func (c *CacheSize) UnmarshalText(text []byte) error {
	if string(text) == "off" {
		*c = "off"
		return nil
	}
	var b ByteSize
	if err := b.UnmarshalText(text); err != nil {
		return fmt.Errorf("%w, or off", err)
	}
	*c = CacheSize(b.String())
	return nil
}

// Bytes is the size in bytes: 0 for off, def for the default.
func (c CacheSize) Bytes(def int) int {
	switch c {
	case "":
		return def
	case "off":
		return 0
	}
	var b ByteSize
	_ = b.UnmarshalText([]byte(c)) // checked by UnmarshalText
	return int(b)
}

// StoreExpiry is one store's time to live.
type StoreExpiry struct {
	// After is the time to live, more than 0.
	After time.Duration `koanf:"after"`
	// Clock is what After is measured against: "event" (default), the
	// task's stream time (its largest record timestamp), or "wall", the
	// host's clock.
	Clock ExpiryClock `koanf:"clock"`
}

// Limits bound one plugin instance.
type Limits struct {
	// Memory is the most linear memory one instance may have; every
	// instance's memory is also charged to its task's account, within
	// runtime.memory_budget (abi/ABI.md section 7). Default 64MiB.
	Memory ByteSize `koanf:"memory"`
	// RecordTimeout is the most wall time one record may take in the
	// plugin; a record over it is interrupted and fails. Default 1s.
	RecordTimeout time.Duration `koanf:"record_timeout"`
	// Stack is the call stack one instance may use (as the engine
	// accounts frames: an upper bound of what it allocates); deeper
	// recursion fails the record (stack_limit). Default 8MiB, at most 128MiB.
	Stack ByteSize `koanf:"stack"`
	// EmitsPerRecord bounds the emits of one record; past it emit returns
	// ELIMIT and the record fails (limit_exceeded). Default 10000.
	EmitsPerRecord int `koanf:"emits_per_record"`
	// EmitBytesPerRecord bounds the bytes (keys, values, headers) one
	// record emits. Default 16MiB.
	EmitBytesPerRecord ByteSize `koanf:"emit_bytes_per_record"`
	// StateBytesPerRecord bounds the bytes (keys and values) one record
	// writes to state. Default 16MiB.
	StateBytesPerRecord ByteSize `koanf:"state_bytes_per_record"`
	// LogLinesPerSecond and LogBytesPerSecond rate-limit an instance's log
	// lines and stdout/stderr (bursts of 1000 lines or 1MiB); lines over
	// the rate are dropped, counted and summarized. Defaults 100 and 64KiB.
	LogLinesPerSecond int      `koanf:"log_lines_per_second"`
	LogBytesPerSecond ByteSize `koanf:"log_bytes_per_second"`
	// StateDisk bounds what one task's stores, its timers included, hold
	// on disk (Pebble's estimate of the task's keys, plus what it wrote
	// since): a state_put or timer_set that would go past it returns
	// ELIMIT, so no plugin can fill the disk (deletes are always taken).
	// Default 1GiB.
	StateDisk ByteSize `koanf:"state_disk"`
	// WindowBytes is what the host may hold for one task's plugin in a
	// commit window: its staged emits and state writes, timers set, commit
	// marks (abi/ABI.md section 7). At it the commit point comes at once
	// instead of at kafka.commit_interval (more, smaller transactions;
	// no record fails); a call that would take the task past twice it
	// returns ELIMIT and its record fails (limit_exceeded). At least the
	// bytes one record may stage (emit_bytes_per_record plus
	// state_bytes_per_record). Default 64MiB.
	WindowBytes ByteSize `koanf:"window_bytes"`
	// Timers bounds the timers one task may have pending (abi/ABI.md
	// section 8.6); timer_set of a new one past it returns ELIMIT.
	// Default 1000000.
	Timers int `koanf:"timers"`
	// TimerFirings bounds the timers fired in one commit window; due
	// timers past it fire, in order, in the next. Default 10000.
	TimerFirings int `koanf:"timer_firings"`
	// CommitMarks bounds the keys one commit window may mark for a
	// commit-point call; commit_mark of a new key past it returns ELIMIT.
	// Default 100000.
	CommitMarks int `koanf:"commit_marks"`
}

// ModuleLimits bound the shape of the modules the host compiles and what
// compiling and instantiating one may cost (checked before compiling; a
// module over them is refused with the reason). They apply wherever the
// host compiles a module: at startup, in validate, deploy and plugin
// inspect (with -c; without, the defaults), and for each version the
// control topic names.
type ModuleLimits struct {
	// Functions bounds the functions a module defines. Default 100000.
	Functions int `koanf:"functions"`
	// LocalsPerFunction bounds one function's locals. Default 50000.
	LocalsPerFunction int `koanf:"locals_per_function"`
	// FunctionSize bounds one function body. Default 4MiB.
	FunctionSize ByteSize `koanf:"function_size"`
	// NestingDepth bounds the nesting of blocks in one function.
	// Default 4096.
	NestingDepth int `koanf:"nesting_depth"`
	// Globals bounds a module's globals. Default 100000.
	Globals int `koanf:"globals"`
	// TableEntries bounds the entries of all of a module's tables
	// together (declared maxima are lowered to fit). Default 1048576.
	TableEntries int `koanf:"table_entries"`
	// CompileMemory is the compile budget: the most host memory that
	// compiling one module may take, as estimated from the module's
	// totals before it is compiled (functions times locals, code bytes,
	// branches, types, br_table targets, segments, exports, ...; the
	// estimate stays above the growth of the process's resident memory
	// measured for every kind of module, RATIONALE.md "The compile
	// budget"). A module over it is refused with the estimate and what
	// makes it up. Go SDK plugins of 2 MB estimate at about 170MiB.
	// Default 512MiB.
	CompileMemory ByteSize `koanf:"compile_memory"`
	// CompileTime is the compile budget in time: the most CPU time that
	// compiling one module may take, as estimated from the same totals
	// with per-unit times measured on a 2-core x86-64 machine (a Go SDK
	// plugin estimates at about 3s and takes 1s). A module over it is
	// refused; runtime.compile_timeout still bounds a compilation that
	// runs long on a slower machine. Default 10s.
	CompileTime time.Duration `koanf:"compile_time"`
	// InstanceMemory bounds the host memory one instance of a module
	// holds besides its linear memory and tables (globals, function
	// references, element and data segments), as estimated from the
	// module; a module over it is refused, since the host makes an
	// instance per task. Default 16MiB.
	InstanceMemory ByteSize `koanf:"instance_memory"`
}

// StateConfig is where local state lives.
type StateConfig struct {
	// Dir holds the state stores, in a subdirectory per app_id. Default
	// "wasmstream-state". A relative path is relative to the config file's
	// directory (before this release: to the working directory). One
	// process at a time can use an app's directory (Pebble locks it).
	Dir string `koanf:"dir"`
	// SyncInterval bounds the committed state a crash (SIGKILL, power
	// loss) can take from the local stores: their write-ahead log is
	// synced at most this long after a commit. A restarted process then
	// restores from the changelog only what was committed in the last
	// interval. Default 1s; negative never syncs on a timer (a crash may
	// lose every commit since the process started, and restore reads
	// them all again).
	SyncInterval time.Duration `koanf:"sync_interval"`
	// WriteTimeout bounds every write to a state database (a commit
	// window, a restored batch, a log sync): a write the disk has not
	// finished by then fails its database, which stops the one processor
	// that writes to it (the others have databases of their own) until
	// the host reopens it. A disk that refuses a write (no space, an I/O
	// error) fails it at once. Default 10s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// StandbyReplicas is how many other processes of the app keep a warm
	// copy of each stateful task's stores, tailing its changelogs (read
	// committed) about once a second: when the task moves to one of them
	// (its process died or left), its restore reads only what the copy
	// had not caught up with, not the whole changelog. Each copy costs
	// the disk of the stores it copies; a process keeps at most one copy
	// of a task and never of its own tasks. 0 to 8; default 0 (none).
	// Tasks of processors with task_tables keep no standbys.
	StandbyReplicas int `koanf:"standby_replicas"`
}

// maxStandbyReplicas bounds state.standby_replicas: more copies than
// that cost disk on every process for no faster failover.
const maxStandbyReplicas = 8

// RuntimeConfig tunes the Wasm runtime.
type RuntimeConfig struct {
	// CacheDir keeps compiled modules between runs. Default: the user cache
	// directory + "/wasmstream"; "off" disables the file cache.
	CacheDir string `koanf:"cache_dir"`
	// MaxModuleSize bounds a plugin module, from the config or deployed.
	// Default 64MiB.
	MaxModuleSize ByteSize `koanf:"max_module_size"`
	// TrustedKeys are files of Ed25519 public keys (PEM "PUBLIC KEY", as
	// `wasmstream plugin keygen` writes KEY.pub.pem; a file may hold
	// several). When any is given, every plugin version must be signed
	// by one of them (`wasmstream plugin sign`): run, validate and deploy
	// refuse a module whose signature is missing, does not match its
	// bytes or is made by another key, and a running process refuses
	// such a version from the control topic (abi/ABI.md section 11).
	// Default: none, and modules need no signature.
	TrustedKeys []string `koanf:"trusted_keys"`
	// CompileTimeout bounds compiling one module (at startup, validate,
	// inspect, deploy, and for each version the control topic names); a
	// module over it is refused. Default 1m.
	CompileTimeout time.Duration `koanf:"compile_timeout"`
	// ModuleLimits bound the shape of modules (see ModuleLimits).
	ModuleLimits ModuleLimits `koanf:"module_limits"`
	// MemoryBudget bounds what the host holds for all plugins of the
	// process together, every task's account summed (abi/ABI.md section
	// 7): its instances' linear memory, its windows' staged bytes and its
	// input. The instances may take all of it but twice the largest
	// limits.window_bytes: past that, memory.grow returns -1 (and past
	// what the other tasks' shares leave, only a task within its share
	// grows). Past half of what the instances leave, the tasks holding
	// more than the average commit at once; a call that would pass it
	// returns ELIMIT and its record fails. At least the largest
	// limits.memory plus twice the largest limits.window_bytes; the host
	// warns at start when every input partition's instance at
	// limits.memory would not fit. Default 1GiB.
	MemoryBudget ByteSize `koanf:"memory_budget"`
}

// SwapConfig governs hot swaps of deployed plugin versions (wasmstream
// deploy): the canary that rolls a failing version back on its own.
type SwapConfig struct {
	// CanaryWindow is how long after a task switched to a new version its
	// failures are watched. Default 60s. 0s turns automatic rollback off:
	// new versions are not watched (in Go: Set(time.Duration(0)); an
	// unset Optional is the default). A watched version whose instance
	// takes over half its init budget to start (limits.record_timeout x
	// 10, at least 10s) is rolled back too, before the task switches.
	CanaryWindow Optional[time.Duration] `koanf:"canary_window"`
	// MaxFailureRatio is the share of a task's records the new version may
	// fail within the window (0 to 1); more rolls it back: 0 rolls back at
	// the first failure, 1 never. Default 0.01.
	MaxFailureRatio Optional[float64] `koanf:"max_failure_ratio"`
	// MinRecords is how many records a task must have processed with the
	// new version before its failure ratio counts. Default 1.
	MinRecords int `koanf:"min_records"`
	// ShadowFirst, when set, makes every `wasmstream deploy` of the app
	// shadow-first: the candidate runs as a shadow beside the active
	// version for this long, in every process, and goes live only if its
	// failure ratio stayed under max_failure_ratio (and its difference
	// ratio under --max-diff-ratio, when given); otherwise it is refused
	// and nothing of it was committed. `deploy --no-shadow-first` skips it
	// for one deploy. Default 0s: deploys go live at once, under the
	// canary.
	ShadowFirst time.Duration `koanf:"shadow_first"`
}

// AdminConfig is the admin HTTP endpoint.
type AdminConfig struct {
	// Listen is host:port of the admin endpoint. Default "" (off).
	Listen string `koanf:"listen"`
	// Debug also serves Go's profiler (/debug/pprof/) and a snapshot of
	// the process's memory, goroutines, threads, file descriptors and
	// open plugin modules (/debug/snapshot) on the admin endpoint, for
	// finding a leak (docs/operations.md). There is no admin token:
	// enable it only where the listener is reachable by operators alone.
	// Needs Listen. Default false.
	Debug bool `koanf:"debug"`
}

// QueryConfig is the interactive-query HTTP endpoint: reads of the
// processors' stores while the app runs (docs/operations.md, "Interactive
// queries").
type QueryConfig struct {
	// Listen is host:port of the query endpoint, its own listener apart
	// from admin.listen. Default "" (off).
	Listen string `koanf:"listen"`
	// Advertise is the base URL other processes and `wasmstream query`
	// reach this one at ("http://10.0.0.7:9645"): a key whose task
	// another process holds is redirected there. Default: http:// and the
	// listen address (fine on one host; set it when processes run on
	// several, or listen on all interfaces).
	Advertise string `koanf:"advertise"`
	// Token, if set, is the bearer token every query must carry
	// ("Authorization: Bearer <token>"), compared in constant time; the
	// same on every process of the app. A Secret: env:NAME, file:PATH or
	// the value. Default none: every query is answered.
	Token Secret `koanf:"token"`
}

// LogConfig sets host logging.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level LogLevel `koanf:"level"`
	// Format is "text" (default: logfmt-style key=value lines) or "json"
	// (one JSON object per line, for log collectors). Every line about a
	// task has task=processor/topic/partition; a plugin's own lines also
	// have processor and version.
	Format LogFormat `koanf:"format"`
}

// OutputConfig is one output of a processor: its topic, and when its
// records are produced. Written as the topic alone, it takes the defaults.
type OutputConfig struct {
	// Topic is the topic the output's records go to.
	Topic string `koanf:"topic"`
	// Emit is when the output's records are produced: each (default):
	// every record the plugin emits, as it emits it (once its input
	// record succeeded); latest_per_key: only the last record emitted
	// for each key in a commit window, produced at the window's commit
	// point, what Kafka Streams' record cache does to output volume (a
	// count emitted on every update reaches the topic once per commit
	// interval). Records with a null key are produced as they are
	// emitted. The records a window keeps count against the task's
	// commit-window memory.
	Emit OutputEmit `koanf:"emit"`
}

// UnmarshalText makes an output written as its topic alone.
func (o *OutputConfig) UnmarshalText(b []byte) error {
	*o = OutputConfig{Topic: string(b)}
	return nil
}

// ByteSize is a number of bytes written as an integer or with a unit:
// 65536, 64KiB, 64MiB, 1GiB (also KB/MB/GB as powers of 1000).
type ByteSize uint64

var byteUnits = map[string]uint64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
}

var byteSizeRE = regexp.MustCompile(`^\s*([0-9]+)\s*([a-zA-Z]*)\s*$`)

// UnmarshalText parses a ByteSize.
func (b *ByteSize) UnmarshalText(text []byte) error {
	m := byteSizeRE.FindStringSubmatch(string(text))
	if m == nil {
		return fmt.Errorf("%q is not a size (examples: 65536, 64KiB, 64MiB)", text)
	}
	unit, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return fmt.Errorf("%q has an unknown unit %q (use KiB, MiB, GiB)", text, m[2])
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return fmt.Errorf("%q: %w", text, err)
	}
	*b = ByteSize(n * unit)
	return nil
}

// String formats the size with the largest binary unit that divides it.
func (b ByteSize) String() string { return plugin.FormatSize(uint64(b)) }

// ConfigError is a configuration problem, naming the field path.
type ConfigError struct {
	Path    string // e.g. "processors[0].inputs"; "" for the file itself
	Problem string
}

func (e *ConfigError) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// Clone returns a deep copy of c: New and Deploy work on their own copy,
// so the caller may reuse or change c afterwards.
func (c *Config) Clone() *Config {
	out := *c
	out.Kafka.Brokers = slices.Clone(c.Kafka.Brokers)
	out.Runtime.TrustedKeys = slices.Clone(c.Runtime.TrustedKeys)
	out.Processors = make([]ProcessorConfig, len(c.Processors))
	for i, p := range c.Processors {
		p.Inputs = slices.Clone(p.Inputs)
		p.Outputs = maps.Clone(p.Outputs)
		p.Repartition = slices.Clone(p.Repartition)
		p.Stores = slices.Clone(p.Stores)
		p.Tables = maps.Clone(p.Tables)
		p.TaskTables = maps.Clone(p.TaskTables)
		p.Expire = maps.Clone(p.Expire)
		p.Config = cloneValue(p.Config).(map[string]any)
		out.Processors[i] = p
	}
	if c.Processors == nil {
		out.Processors = nil
	}
	return &out
}

// cloneValue deep-copies a value decoded from YAML or JSON (maps, slices
// and scalars); a nil map stays nil.
func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// OutputNames returns the processor's output names, its outputs and its
// repartition outputs, in index order (sorted).
func (p *ProcessorConfig) OutputNames() []string {
	names := make([]string, 0, len(p.Outputs)+len(p.Repartition))
	for n := range p.Outputs {
		names = append(names, n)
	}
	for _, n := range p.Repartition {
		if _, dup := p.Outputs[n]; !dup {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// ChangelogTopic is the compacted topic that backs a state store.
func (c *Config) ChangelogTopic(store string) string {
	return c.AppID + "-" + store + "-changelog"
}

// StateDir is the directory of this app's local state.
func (c *Config) StateDir() string {
	return filepath.Join(c.State.Dir, c.AppID)
}

// ProcessorStateDir is the directory of processor's state database, in
// StateDir: each processor with stores has a database of its own
// (RATIONALE.md, "State"); the global tables' is StateDir itself.
func (c *Config) ProcessorStateDir(processor string) string {
	return filepath.Join(c.StateDir(), processorDirPrefix+processor)
}

// processorDirPrefix starts the name of a processor's state directory (a
// prefix: a processor may be named "." or "..").
const processorDirPrefix = "processor-"

// pluginLimits are the host-wide module limits, compiling through
// runtime.cache_dir: validate, deploy and run share one cache, so a
// validated plugin starts without compiling again. It reads the trusted
// keys' files (runtime.trusted_keys).
func (c *Config) pluginLimits() (plugin.Limits, error) {
	lim := c.moduleLimits()
	trust, err := signature.LoadTrust("runtime.trusted_keys", c.Runtime.TrustedKeys)
	if err != nil {
		return lim, err
	}
	lim.Trust = trust
	return lim, nil
}

// moduleLimits are pluginLimits without the trusted keys.
func (c *Config) moduleLimits() plugin.Limits {
	ml := c.Runtime.ModuleLimits
	return plugin.Limits{
		MaxModuleSize:  uint64(c.Runtime.MaxModuleSize),
		CompileTimeout: c.Runtime.CompileTimeout,
		CacheDir:       plugin.CacheDir(c.Runtime.CacheDir),
		Module: engine.ModuleLimits{
			MaxModuleSize:     int(c.Runtime.MaxModuleSize),
			MaxFunctions:      ml.Functions,
			MaxFunctionLocals: ml.LocalsPerFunction,
			MaxFunctionSize:   int(ml.FunctionSize),
			MaxNestingDepth:   ml.NestingDepth,
			MaxGlobals:        ml.Globals,
			MaxTableEntries:   uint32(ml.TableEntries),
			CompileMemory:     int64(ml.CompileMemory),
			CompileTime:       ml.CompileTime,
			InstanceMemory:    int64(ml.InstanceMemory),
			Settings:          budgetSettings,
		},
	}
}

// budgetSettings name the compile budget's settings in the engine's errors.
var budgetSettings = engine.BudgetSettings{
	CompileMemory:  "runtime.module_limits.compile_memory",
	CompileTime:    "runtime.module_limits.compile_time",
	InstanceMemory: "runtime.module_limits.instance_memory",
}

// canary is the watch a newly deployed version is under: a zero Window
// (canary_window: 0s) is none.
func (s SwapConfig) canary() versions.Canary {
	window, _ := s.CanaryWindow.Get()
	ratio, _ := s.MaxFailureRatio.Get()
	return versions.Canary{Window: window, MaxFailureRatio: ratio, MinRecords: s.MinRecords}
}

// pluginSpec is the processor as its plugin sees it: inputs and outputs
// resolved to topics, repartition outputs to their internal topics.
func (c *Config) pluginSpec(p *ProcessorConfig) plugin.Spec {
	return plugin.Spec{
		Name: p.Name, Path: p.Plugin, Inputs: c.inputTopics(p), Outputs: c.outputTopics(p), Stores: p.Stores,
		Tables: sortedKeys(p.Tables), TaskTables: sortedKeys(p.TaskTables),
		OnError: string(p.OnError), Config: p.Config,
		Memory: uint64(p.Limits.Memory), RecordTimeout: p.Limits.RecordTimeout,
		Stack: int(p.Limits.Stack),
		Record: engine.RecordLimits{
			MaxEmits:      p.Limits.EmitsPerRecord,
			MaxEmitBytes:  int(p.Limits.EmitBytesPerRecord),
			MaxStateBytes: int(p.Limits.StateBytesPerRecord),
		},
		Log: engine.LogLimits{
			LinesPerSecond: float64(p.Limits.LogLinesPerSecond),
			BytesPerSecond: float64(p.Limits.LogBytesPerSecond),
		},
	}
}

// sortedKeys are m's keys in order: table indexes follow it.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// timeStoreName is the store that holds the pending timers and stream time
// of a stateful processor's tasks (abi/ABI.md section 8.5): kept,
// changelogged and restored like the processor's own stores, never
// visible to its plugin. Users' store names cannot start with "_".
func timeStoreName(processor string) string { return "_time." + processor }

// taskStores are the stores of the processor's tasks: its own, then its
// time store; none for a processor without stores.
//
// They are the plugin's stores, then its task tables (by name), then the
// time store.
func (c *Config) taskStores(p *ProcessorConfig) []string {
	if len(p.Stores)+len(p.TaskTables) == 0 {
		return nil
	}
	return append(slices.Concat(p.Stores, sortedKeys(p.TaskTables)), timeStoreName(p.Name))
}

// changelogTopics are the changelogs of taskStores(p), in its order: a
// task table's is its own topic.
func (c *Config) changelogTopics(p *ProcessorConfig) []string {
	var out []string
	for _, st := range c.taskStores(p) {
		if topic, ok := p.TaskTables[st]; ok {
			out = append(out, topic)
		} else {
			out = append(out, c.ChangelogTopic(st))
		}
	}
	return out
}

// runnerInputs are the topics p's tasks read: its inputs (the record's
// input index), then its task tables (by name), which the plugin never
// gets as records.
func (c *Config) runnerInputs(p *ProcessorConfig) []string {
	out := c.inputTopics(p)
	for _, name := range sortedKeys(p.TaskTables) {
		out = append(out, p.TaskTables[name])
	}
	return out
}

// DeadLetterTopic is the topic failed records go to under on_error:
// dead_letter.
func (c *Config) DeadLetterTopic(p *ProcessorConfig) string {
	return c.AppID + "-" + p.Name + "-dlq"
}
