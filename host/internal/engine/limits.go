package engine

import (
	"fmt"
	"time"
)

// This file holds the engine's resource limits other than linear memory and
// record time (Options.MemoryLimit, Options.RecordTimeout). Every limit has a
// documented default, used when the field is zero; abi/ABI.md (section 7) and
// RATIONALE.md ("The sandbox's bounds") state the resulting per-instance bound.

// ModuleLimits bound the shape of a module and the cost of compiling it.
// They are checked by a pre-parse of the binary (instrument.go) and an
// estimate from its totals (compilecost.go) before wazero sees it, so a
// module built to make compilation slow or huge (50 million locals in 135
// bytes, a million nested loops, 100,000 functions of 50,000 locals each in
// 800 KB) is refused in milliseconds with a reason instead of being
// compiled. Zero fields take the defaults.
type ModuleLimits struct {
	// MaxModuleSize is the largest module binary in bytes. Default
	// DefaultMaxModuleSize (64 MiB, the host's runtime.max_module_size default).
	MaxModuleSize int
	// MaxFunctions is the most functions (imported and defined). Default 100,000.
	MaxFunctions int
	// MaxFunctionLocals is the most parameters plus locals of one function.
	// Default 50,000.
	MaxFunctionLocals int
	// MaxFunctionSize is the largest function body in bytes. Default 4 MiB.
	MaxFunctionSize int
	// MaxNestingDepth is the deepest nesting of block, loop, if and try in
	// one function. Default 4,096.
	MaxNestingDepth int
	// MaxGlobals is the most globals (imported and defined). Default 100,000.
	MaxGlobals int
	// MaxTables is the most tables. Default 16.
	MaxTables int
	// MaxTableEntries is the most entries of all tables together (8 bytes
	// each in the host). Tables whose minima add up to more are refused;
	// the tables' maxima are lowered to fit (each keeps its minimum and
	// gets an equal share of the rest), so table.grow past them returns -1
	// as the spec allows for any grow. Default 1,048,576 (8 MiB).
	MaxTableEntries uint32
	// CompileMemory is the compile budget: the most host memory that
	// instrumenting and compiling one module may take, in bytes, as
	// estimated from the module's totals (functions times locals, code
	// bytes, types, br_table targets, segments, exports...; see
	// compilecost.go). A module over it is refused before wazero sees it.
	// The estimate is an upper bound of the growth of the process's
	// resident memory while compiling (measured with Go's default GC
	// settings). Default DefaultCompileMemory (512 MiB).
	CompileMemory int64
	// CompileTime is the compile budget in time: the most CPU time that
	// compiling one module may take, as estimated from the same totals
	// with per-unit times measured on the reference machine (the shared
	// 2-core x86-64 machine of RATIONALE.md); a module over it is refused
	// before wazero sees it. CompileTimeout still bounds the wall time of
	// a compilation that runs (on a slower or loaded machine). Default
	// DefaultCompileTime (10 s).
	CompileTime time.Duration
	// InstanceMemory is the most host memory one instance of a module may
	// hold besides its linear memory and tables (globals, function
	// references, element and data segment instances), as estimated from
	// the module; a module over it is refused at compile time. Default
	// DefaultInstanceMemory (16 MiB).
	InstanceMemory int64
	// Settings name where the embedder configures the budgets, for the
	// errors that say how to raise one; empty names the field.
	Settings BudgetSettings
}

// BudgetSettings name the settings of the compile budget (for wasmstream,
// "runtime.module_limits.compile_memory" and so on).
type BudgetSettings struct {
	CompileMemory, CompileTime, InstanceMemory string
}

// Defaults of ModuleLimits.
const (
	DefaultMaxModuleSize     = 64 << 20
	DefaultMaxFunctions      = 100_000
	DefaultMaxFunctionLocals = 50_000
	DefaultMaxFunctionSize   = 4 << 20
	DefaultMaxNestingDepth   = 4096
	DefaultMaxGlobals        = 100_000
	DefaultMaxTables         = 16
	DefaultMaxTableEntries   = 1 << 20
	DefaultCompileMemory     = 512 << 20
	DefaultCompileTime       = 10 * time.Second
	DefaultInstanceMemory    = 16 << 20
)

// withDefaults returns l with zero fields set to their defaults.
func (l ModuleLimits) withDefaults() ModuleLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxModuleSize, DefaultMaxModuleSize)
	def(&l.MaxFunctions, DefaultMaxFunctions)
	def(&l.MaxFunctionLocals, DefaultMaxFunctionLocals)
	def(&l.MaxFunctionSize, DefaultMaxFunctionSize)
	def(&l.MaxNestingDepth, DefaultMaxNestingDepth)
	def(&l.MaxGlobals, DefaultMaxGlobals)
	def(&l.MaxTables, DefaultMaxTables)
	if l.MaxTableEntries == 0 {
		l.MaxTableEntries = DefaultMaxTableEntries
	}
	if l.CompileMemory <= 0 {
		l.CompileMemory = DefaultCompileMemory
	}
	if l.CompileTime <= 0 {
		l.CompileTime = DefaultCompileTime
	}
	if l.InstanceMemory <= 0 {
		l.InstanceMemory = DefaultInstanceMemory
	}
	return l
}

// errOverLimit is a module refused by the pre-parse for its shape; Compile
// reports it as OverLimits.
type errOverLimit struct{ msg string }

func (e *errOverLimit) Error() string { return e.msg }

func overLimit(format string, args ...any) error {
	return &errOverLimit{fmt.Sprintf(format, args...)}
}

// RecordLimits bound what the host stages for one record: everything the
// plugin hands the host during one process call that the host keeps until
// the record's transaction ends. A call that would pass a limit gets an
// errno (ELIMIT, or ETOOLARGE for one record over its output's size) and the
// record fails with FailureKind LimitExceeded, whatever the plugin does
// next; the instance is kept. Zero fields take the defaults.
type RecordLimits struct {
	// MaxEmits is the most emits of one record. Default 10,000.
	MaxEmits int
	// MaxEmitBytes is the most bytes one record may emit, counted as the
	// emitted records' encoded sizes (abi/ABI.md, section 5). Default 16 MiB.
	MaxEmitBytes int
	// MaxStateBytes is the most state bytes one record may write: the key
	// and value lengths of every state_put plus the key length of every
	// state_delete. Default 16 MiB.
	MaxStateBytes int
}

// Defaults of RecordLimits.
const (
	DefaultMaxEmits      = 10_000
	DefaultMaxEmitBytes  = 16 << 20
	DefaultMaxStateBytes = 16 << 20
)

func (l RecordLimits) withDefaults() RecordLimits {
	if l.MaxEmits <= 0 {
		l.MaxEmits = DefaultMaxEmits
	}
	if l.MaxEmitBytes <= 0 {
		l.MaxEmitBytes = DefaultMaxEmitBytes
	}
	if l.MaxStateBytes <= 0 {
		l.MaxStateBytes = DefaultMaxStateBytes
	}
	return l
}

// LogLimits rate-limit what one instance logs: its log() lines and its
// stdout and stderr lines share one token bucket of lines and one of bytes.
// A line that finds either bucket empty is dropped and counted
// (Instance.DroppedLogLines); at most once per SummaryInterval, and when the
// instance closes, one line (not itself limited) reports how many were
// dropped. Zero fields take the defaults.
type LogLimits struct {
	// LinesPerSecond refills the line bucket. Default 100.
	LinesPerSecond float64
	// BytesPerSecond refills the byte bucket. Default 64 KiB.
	BytesPerSecond float64
	// BurstLines is the line bucket's size. Default 1,000.
	BurstLines int
	// BurstBytes is the byte bucket's size. Default 1 MiB.
	BurstBytes int
	// SummaryInterval is the shortest time between two "dropped" summary
	// lines. Default 10 s.
	SummaryInterval time.Duration
}

// Defaults of LogLimits.
const (
	DefaultLogLinesPerSecond  = 100
	DefaultLogBytesPerSecond  = 64 << 10
	DefaultLogBurstLines      = 1000
	DefaultLogBurstBytes      = 1 << 20
	DefaultLogSummaryInterval = 10 * time.Second
)

func (l LogLimits) withDefaults() LogLimits {
	if l.LinesPerSecond <= 0 {
		l.LinesPerSecond = DefaultLogLinesPerSecond
	}
	if l.BytesPerSecond <= 0 {
		l.BytesPerSecond = DefaultLogBytesPerSecond
	}
	if l.BurstLines <= 0 {
		l.BurstLines = DefaultLogBurstLines
	}
	if l.BurstBytes <= 0 {
		l.BurstBytes = DefaultLogBurstBytes
	}
	if l.SummaryInterval <= 0 {
		l.SummaryInterval = DefaultLogSummaryInterval
	}
	return l
}
