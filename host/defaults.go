package host

import (
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Each default has one home: the constant of the lowest package whose
// behaviour it sets (abi for the ABI's time limits, engine for the
// sandbox's, state for the store's), or the constants below for what only
// the config knows. ApplyDefaults is the one function that applies them
// to a Config, so New hands the internal packages fully resolved values;
// the zero-value defaults those packages keep for their own callers and
// tests read the same constants (RATIONALE.md, "Configuration and CLI").

// Defaults the config alone knows, and the ones an embedder most often
// needs named (Memory, RecordTimeout and MaxModuleSize are the engine's).
const (
	DefaultClientID           = "wasmstream"
	DefaultCommitInterval     = 100 * time.Millisecond
	DefaultCommitRecords      = 100000
	DefaultTopicPartitions    = 3
	DefaultSessionTimeout     = 45 * time.Second
	DefaultMaxModuleSize      = engine.DefaultMaxModuleSize
	DefaultCanaryWindow       = 60 * time.Second
	DefaultMaxFailureRatio    = 0.01
	DefaultTransactionTimeout = 10 * time.Second
	DefaultConnectTimeout     = 60 * time.Second
	DefaultMemory             = engine.DefaultMemoryLimit
	DefaultRecordTimeout      = engine.DefaultRecordTimeout
	DefaultStateDir           = "wasmstream-state"
	// defaultStateDisk is limits.state_disk's default: a task's stores on
	// disk (RATIONALE.md, "State").
	defaultStateDisk = 1 << 30
	// defaultWindowBytes is limits.window_bytes's default, and
	// defaultMemoryBudget runtime.memory_budget's: what the host holds for
	// a task's plugin per commit window, and for all of a process's
	// (RATIONALE.md, "What a plugin makes the host hold").
	defaultWindowBytes  = runner.DefaultWindowBytes
	defaultMemoryBudget = 1 << 30

	DefaultRepartitionPurgeInterval = 30 * time.Second

	// A poll hands the runner what one fetch brought, and a partition's
	// records wait decoded in its task's window until their turn, so a
	// larger fetch only holds more of them in memory. Kafka's 1MiB per
	// partition measured 1.8x the peak RSS of 256KiB on the word count
	// benchmark at no gain in throughput; 256KiB of small records was
	// more than a partition holds before it is paused (runner.maxHeld), so
	// it was paused after every fetch and its next fetch started only
	// once half was processed: 128KiB keeps a fetch in flight while the
	// task works (RATIONALE.md, "Kafka I/O").
	DefaultFetchMaxPartitionBytes = 128 << 10
	DefaultFetchMaxBytes          = 16 << 20
)

// ApplyDefaults fills every unset field with its documented default: a
// zero value, or an unset Optional. New calls it on its own copy.
func (c *Config) ApplyDefaults() {
	orDefault(&c.Guarantee, ExactlyOnce)

	k := &c.Kafka
	orDefault(&k.ClientID, DefaultClientID)
	orDefault(&k.CommitInterval, DefaultCommitInterval)
	orDefault(&k.CommitRecords, DefaultCommitRecords)
	orDefault(&k.StartOffset, StartEarliest)
	orDefault(&k.TopicPartitions, DefaultTopicPartitions)
	orDefault(&k.SessionTimeout, DefaultSessionTimeout)
	orDefault(&k.GroupProtocol, ProtocolAuto)
	orDefault(&k.Members, MembersPerProcessor)
	orDefault(&k.TransactionTimeout, DefaultTransactionTimeout)
	orDefault(&k.ConnectTimeout, DefaultConnectTimeout)
	orDefault(&k.FetchMaxPartitionBytes, DefaultFetchMaxPartitionBytes)
	orDefault(&k.FetchMaxBytes, DefaultFetchMaxBytes)
	orDefault(&k.RepartitionPurgeInterval, DefaultRepartitionPurgeInterval)

	orDefault(&c.State.Dir, DefaultStateDir)
	orDefault(&c.State.SyncInterval, state.DefaultSyncInterval)
	orDefault(&c.State.WriteTimeout, state.DefaultWriteTimeout)

	orDefault(&c.Log.Level, LevelInfo)
	orDefault(&c.Log.Format, LogText)

	rt := &c.Runtime
	orDefault(&rt.MaxModuleSize, DefaultMaxModuleSize)
	orDefault(&rt.CompileTimeout, engine.DefaultCompileTimeout)
	orDefault(&rt.MemoryBudget, defaultMemoryBudget)
	ml := &rt.ModuleLimits
	orDefault(&ml.Functions, engine.DefaultMaxFunctions)
	orDefault(&ml.LocalsPerFunction, engine.DefaultMaxFunctionLocals)
	orDefault(&ml.FunctionSize, engine.DefaultMaxFunctionSize)
	orDefault(&ml.NestingDepth, engine.DefaultMaxNestingDepth)
	orDefault(&ml.Globals, engine.DefaultMaxGlobals)
	orDefault(&ml.TableEntries, engine.DefaultMaxTableEntries)
	orDefault(&ml.CompileMemory, ByteSize(engine.DefaultCompileMemory))
	orDefault(&ml.CompileTime, engine.DefaultCompileTime)
	orDefault(&ml.InstanceMemory, ByteSize(engine.DefaultInstanceMemory))

	c.Swap.CanaryWindow.orDefault(DefaultCanaryWindow)
	c.Swap.MaxFailureRatio.orDefault(DefaultMaxFailureRatio)
	orDefault(&c.Swap.MinRecords, 1)

	for i := range c.Processors {
		p := &c.Processors[i]
		orDefault(&p.OnError, OnErrorFail)
		orDefault(&p.StateCache, CacheSize(ByteSize(state.DefaultRecordCacheBytes).String()))
		for name, o := range p.Outputs {
			if o.Emit == "" {
				o.Emit = EmitEach
				p.Outputs[name] = o
			}
		}
		for st, e := range p.Expire {
			if e.Clock == "" {
				e.Clock = ClockEvent
				p.Expire[st] = e
			}
		}
		l := &p.Limits
		orDefault(&l.Memory, DefaultMemory)
		orDefault(&l.RecordTimeout, DefaultRecordTimeout)
		orDefault(&l.Stack, engine.DefaultStackLimit)
		orDefault(&l.EmitsPerRecord, engine.DefaultMaxEmits)
		orDefault(&l.EmitBytesPerRecord, engine.DefaultMaxEmitBytes)
		orDefault(&l.StateBytesPerRecord, engine.DefaultMaxStateBytes)
		orDefault(&l.LogLinesPerSecond, engine.DefaultLogLinesPerSecond)
		orDefault(&l.LogBytesPerSecond, engine.DefaultLogBytesPerSecond)
		orDefault(&l.StateDisk, defaultStateDisk)
		orDefault(&l.WindowBytes, defaultWindowBytes)
		orDefault(&l.Timers, abi.DefaultMaxTimers)
		orDefault(&l.TimerFirings, abi.DefaultMaxFiringsPerCommit)
		orDefault(&l.CommitMarks, abi.DefaultMaxCommitMarks)
	}
}

// orDefault sets *v to def when it is zero (unset). Only for settings
// whose zero means nothing of its own; the others are Optional.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
