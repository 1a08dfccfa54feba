package abi

import "strconv"

// Errno is a host function's error. Host functions return -Errno as an i32;
// zero and positive values are results. The numbers are part of the contract
// and never change meaning; new ones are only added.
type Errno int32

const (
	// ErrnoFault: a pointer/length pair reaches outside the plugin's memory.
	ErrnoFault Errno = 1
	// ErrnoInval: an argument is malformed (bad record layout, unknown log
	// level, negative length), or a write names a read-only table.
	ErrnoInval Errno = 2
	// ErrnoNoOutput: the output index is not one the processor declared.
	ErrnoNoOutput Errno = 3
	// ErrnoNoStore: the store index is not one the processor declared.
	ErrnoNoStore Errno = 4
	// ErrnoNotFound: the key has no value.
	ErrnoNotFound Errno = 5
	// ErrnoTooLarge: a key, value or record is over its limit. For an
	// emitted record over the size its output accepts, the record also
	// fails (abi/ABI.md, section 7).
	ErrnoTooLarge Errno = 6
	// ErrnoNoCursor: the cursor id is not open.
	ErrnoNoCursor Errno = 7
	// ErrnoPhase: the call is not allowed now (emit or state during init).
	ErrnoPhase Errno = 8
	// ErrnoLimit: a per-record limit was reached: open cursors (only
	// returned), or emits, bytes emitted or state bytes written in one
	// record (the record also fails; abi/ABI.md, section 7).
	ErrnoLimit Errno = 9
	// ErrnoIO: the host could not serve the call (store failure). The record
	// fails whatever the plugin does next.
	ErrnoIO Errno = 10
	// ErrnoNoName: no declared output or store has that name.
	ErrnoNoName Errno = 11
	// ErrnoTimestamp: an emitted record's timestamp is outside what its
	// output accepts (the topic's message.timestamp.after.max.ms or
	// before.max.ms); the record also fails (abi/ABI.md, section 7).
	ErrnoTimestamp Errno = 12
)

var errnoNames = [...]string{
	ErrnoFault:     "EFAULT",
	ErrnoInval:     "EINVAL",
	ErrnoNoOutput:  "ENOOUTPUT",
	ErrnoNoStore:   "ENOSTORE",
	ErrnoNotFound:  "ENOTFOUND",
	ErrnoTooLarge:  "ETOOLARGE",
	ErrnoNoCursor:  "ENOCURSOR",
	ErrnoPhase:     "EPHASE",
	ErrnoLimit:     "ELIMIT",
	ErrnoIO:        "EIO",
	ErrnoNoName:    "ENONAME",
	ErrnoTimestamp: "ETIMESTAMP",
}

var errnoText = [...]string{
	ErrnoFault:     "pointer or length outside plugin memory",
	ErrnoInval:     "malformed argument",
	ErrnoNoOutput:  "output not declared by the processor",
	ErrnoNoStore:   "store not declared by the processor",
	ErrnoNotFound:  "key not found",
	ErrnoTooLarge:  "over the size limit",
	ErrnoNoCursor:  "no such scan cursor",
	ErrnoPhase:     "call not allowed in this phase",
	ErrnoLimit:     "per-record limit reached",
	ErrnoIO:        "host I/O failure",
	ErrnoNoName:    "no output or store with that name",
	ErrnoTimestamp: "timestamp outside what the output accepts",
}

// Name is the errno's symbolic name, such as "EFAULT".
func (e Errno) Name() string {
	if e > 0 && int(e) < len(errnoNames) && errnoNames[e] != "" {
		return errnoNames[e]
	}
	return "E" + strconv.Itoa(int(e))
}

// Error makes Errno an error: "EFAULT: pointer or length outside plugin memory".
func (e Errno) Error() string {
	if e > 0 && int(e) < len(errnoText) && errnoText[e] != "" {
		return errnoNames[e] + ": " + errnoText[e]
	}
	return "errno " + strconv.Itoa(int(e))
}

// Result is the i32 a host function returns for this errno: -e.
func (e Errno) Result() int32 { return -int32(e) }

// ErrnoOf returns the errno carried by a negative host-function result, and
// false for a result that is not an error (zero or positive).
func ErrnoOf(result int32) (Errno, bool) {
	if result >= 0 {
		return 0, false
	}
	return Errno(-result), true
}
