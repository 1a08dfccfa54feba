package engine

import (
	"errors"

	"github.com/wasmstream/wasmstream/abi"
	"strconv"
	"strings"
)

// FailureKind says why one Process (or OnTimer, OnCommit) call failed. A FailureKind is itself an
// error so that errors.Is(err, engine.Timeout) works on any error chain that
// holds a *RecordError.
type FailureKind int

const (
	// Trap: the plugin trapped (unreachable, out-of-bounds access, division
	// by zero, stack overflow...) or exited (proc_exit). The instance is
	// discarded and a fresh one serves the next record.
	Trap FailureKind = iota + 1
	// Timeout: the call ran longer than Options.RecordTimeout and was
	// interrupted. The instance is discarded.
	Timeout
	// MemoryLimit: the plugin failed after a memory.grow was refused because
	// it would pass Options.MemoryLimit (or the module's own maximum). The
	// instance is discarded.
	MemoryLimit
	// ABIMisuse: the plugin broke the ABI: a pointer/length outside its
	// memory (EFAULT), an emit to an undeclared output (ENOOUTPUT), an
	// unknown status, an input buffer outside its memory. The instance is
	// discarded (abi/ABI.md, section 7).
	ABIMisuse
	// PluginFailed: the plugin returned StatusFailed; Msg is the reason it
	// gave with set_error. The instance is kept.
	PluginFailed
	// HostFailed: the host side failed while serving the plugin (the Sink or
	// the State returned an error or panicked). The instance is kept.
	HostFailed
	// InstanceLost: there is no instance to run the record: re-instantiation
	// after an earlier failure failed (Err is the *ModuleError), or the
	// Instance, its Module or the Runtime is closed.
	InstanceLost
	// StackLimit: a call would have taken the plugin's call stack past
	// Options.StackLimit (recursion too deep). The instance is discarded.
	StackLimit
	// LimitExceeded: the record asked the host to stage more than
	// Options.Record allows (emits, bytes emitted, state bytes written), or
	// emitted a record larger than its output accepts
	// (the Sink refused it with an errno). The plugin got ELIMIT or ETOOLARGE; the
	// record fails whatever it did next. Errno says which. The instance is
	// kept.
	LimitExceeded
)

var failureKindNames = [...]string{
	Trap:          "trap",
	Timeout:       "timeout",
	MemoryLimit:   "memory limit",
	ABIMisuse:     "ABI misuse",
	PluginFailed:  "plugin failed",
	HostFailed:    "host failed",
	InstanceLost:  "instance lost",
	StackLimit:    "stack limit",
	LimitExceeded: "limit exceeded",
}

// String is the kind's name, such as "timeout".
func (k FailureKind) String() string {
	if k > 0 && int(k) < len(failureKindNames) {
		return failureKindNames[k]
	}
	return "unknown failure"
}

// Error makes FailureKind usable as an errors.Is target.
func (k FailureKind) Error() string { return k.String() }

// Discards reports whether a failure of this kind discards the instance
// (the next record runs on a fresh instance, with the plugin's init run again
// and its in-memory state gone).
func (k FailureKind) Discards() bool {
	return k == Trap || k == Timeout || k == MemoryLimit || k == ABIMisuse || k == StackLimit
}

// RecordError is the error Process returns when a record fails, and OnTimer
// and OnCommit when a callback fails. Emits already delivered to the Sink,
// writes already made to the State and timer changes and marks already
// made through the Time for the call must be discarded by the caller; the
// engine cannot take them back.
type RecordError struct {
	Processor string      // Binding.Name
	Kind      FailureKind // why
	Msg       string      // the reason, one line (wazero's trap message, the plugin's set_error text...)
	Err       error       // underlying error, if any (wazero's error with the Wasm stack trace, the Sink's error...)
	// Errno is, for LimitExceeded, the errno the plugin got: ELIMIT for a
	// per-record limit, ETOOLARGE for a record over its output's size.
	Errno abi.Errno
}

// Error reads like: processor "p": timeout: record took longer than 1s.
func (e *RecordError) Error() string {
	return describe("processor", e.Processor, e.Kind.String(), e.Msg)
}

// Unwrap returns Err.
func (e *RecordError) Unwrap() error { return e.Err }

// Is reports whether target is e's FailureKind.
func (e *RecordError) Is(target error) bool {
	k, ok := target.(FailureKind)
	return ok && k == e.Kind
}

// KindOf returns the FailureKind of the first *RecordError in err's chain, or
// 0 if there is none.
func KindOf(err error) FailureKind {
	var re *RecordError
	if errors.As(err, &re) {
		return re.Kind
	}
	return 0
}

// IsTimeout reports whether err is a record that ran past RecordTimeout.
func IsTimeout(err error) bool { return KindOf(err) == Timeout }

// IsTrap reports whether err is a record on which the plugin trapped or exited.
func IsTrap(err error) bool { return KindOf(err) == Trap }

// IsMemoryLimit reports whether err is a record that hit the memory limit.
func IsMemoryLimit(err error) bool { return KindOf(err) == MemoryLimit }

// IsABIMisuse reports whether err is a record on which the plugin broke the ABI.
func IsABIMisuse(err error) bool { return KindOf(err) == ABIMisuse }

// IsPluginFailed reports whether err is a record the plugin rejected.
func IsPluginFailed(err error) bool { return KindOf(err) == PluginFailed }

// IsHostFailed reports whether err is a record the host (Sink or State) failed.
func IsHostFailed(err error) bool { return KindOf(err) == HostFailed }

// IsStackLimit reports whether err is a record whose calls went past the stack limit.
func IsStackLimit(err error) bool { return KindOf(err) == StackLimit }

// IsLimitExceeded reports whether err is a record that asked the host to
// stage more than a per-record limit or emitted a record over its output's size.
func IsLimitExceeded(err error) bool { return KindOf(err) == LimitExceeded }

// IsInstanceLost reports whether err means no instance could run the record.
func IsInstanceLost(err error) bool { return KindOf(err) == InstanceLost }

// ModuleErrorKind says why a module was refused or could not be instantiated.
// It is an error so that errors.Is(err, engine.MissingExport) works.
type ModuleErrorKind int

const (
	// NotWasm: the bytes are not a WebAssembly core module.
	NotWasm ModuleErrorKind = iota + 1
	// CompileFailed: malformed, truncated or invalid Wasm.
	CompileFailed
	// MemoryTooLarge: the module's minimum memory is over Options.MemoryLimit.
	MemoryTooLarge
	// NoABIMarker: no wasmstream_abi_version_N export at all.
	NoABIMarker
	// UnsupportedABIVersion: markers exist, none for a version this host speaks.
	UnsupportedABIVersion
	// MissingExport: a required export is missing.
	MissingExport
	// WrongSignature: an export has the wrong kind or signature.
	WrongSignature
	// ForbiddenImport: an import outside "wasmstream" and
	// "wasi_snapshot_preview1", an unknown function in either, a wrong
	// signature, or an import that is not a function.
	ForbiddenImport
	// InstantiateFailed: wazero refused to instantiate (data or element
	// segment out of bounds, ...).
	InstantiateFailed
	// InitTrapped: the start function, _initialize or wasmstream_init
	// trapped, exited, hit the memory limit or timed out.
	InitTrapped
	// InitFailed: wasmstream_init returned StatusFailed (Msg is its set_error
	// reason) or an unknown status, or an init-time call passed a pointer
	// outside plugin memory (EFAULT), or wasmstream_input returned a buffer
	// outside it.
	InitFailed
	// OverLimits: the module's shape is over Options.Module (size, function
	// count, locals, body size, nesting, globals, tables; found by a
	// pre-parse before compiling), or compiling it took longer than
	// Options.CompileTimeout.
	OverLimits
)

var moduleErrorKindNames = [...]string{
	NotWasm:               "not wasm",
	CompileFailed:         "compile failed",
	MemoryTooLarge:        "memory too large",
	NoABIMarker:           "no ABI marker",
	UnsupportedABIVersion: "unsupported ABI version",
	MissingExport:         "missing export",
	WrongSignature:        "wrong signature",
	ForbiddenImport:       "forbidden import",
	InstantiateFailed:     "instantiate failed",
	InitTrapped:           "init trapped",
	InitFailed:            "init failed",
	OverLimits:            "over limits",
}

// String is the kind's name, such as "missing export".
func (k ModuleErrorKind) String() string {
	if k > 0 && int(k) < len(moduleErrorKindNames) {
		return moduleErrorKindNames[k]
	}
	return "unknown module error"
}

// Error makes ModuleErrorKind usable as an errors.Is target.
func (k ModuleErrorKind) Error() string { return k.String() }

// ModuleError is returned by Compile, Inspect and Instantiate for a module
// that cannot be used.
type ModuleError struct {
	Module string          // the name given to Compile ("" for Inspect)
	Kind   ModuleErrorKind // why
	Msg    string          // what exactly, naming exports, imports and signatures
	Err    error           // underlying error, if any
	// Undeclared are, for a start that failed (InitFailed, InitTrapped),
	// the names the plugin asked for during it (output_index,
	// store_index) that the Binding does not declare, in the order asked
	// (at most 16): what a caller can tell the user to add to the
	// processor's config.
	Undeclared []Undeclared
}

// Undeclared is a name a plugin asked for that its processor does not
// declare.
type Undeclared struct {
	Kind string // "output" or "store"
	Name string
}

// Error reads like: module "m": missing export: wasmstream_process, want func (i32) -> i32.
func (e *ModuleError) Error() string {
	return describe("module", e.Module, e.Kind.String(), e.Msg)
}

// Unwrap returns Err.
func (e *ModuleError) Unwrap() error { return e.Err }

// Is reports whether target is e's ModuleErrorKind.
func (e *ModuleError) Is(target error) bool {
	k, ok := target.(ModuleErrorKind)
	return ok && k == e.Kind
}

// ModuleErrorKindOf returns the ModuleErrorKind of the first *ModuleError in
// err's chain, or 0 if there is none.
func ModuleErrorKindOf(err error) ModuleErrorKind {
	var me *ModuleError
	if errors.As(err, &me) {
		return me.Kind
	}
	return 0
}

func quote(s string) string { return strconv.Quote(s) }

// describe formats `what "name": kind: msg` (": msg" only when msg is set).
func describe(what, name, kind, msg string) string {
	var b strings.Builder
	b.WriteString(what)
	b.WriteString(" ")
	b.WriteString(quote(name))
	b.WriteString(": ")
	b.WriteString(kind)
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// firstLine returns s up to its first newline, cut at max bytes.
func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.TrimSpace(s)
}
