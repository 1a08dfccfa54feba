package sdk

import (
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
)

// HostError is a host call that failed. It wraps the call's abi.Errno, so
// errors.Is(err, abi.ErrnoTooLarge) and friends work.
type HostError struct {
	// Call is the import that failed, such as "state_put" (abi.Import*).
	Call string
	// Name is the output or store the call addressed; empty for calls that
	// address neither.
	Name string
	// Errno is the host's error.
	Errno abi.Errno
}

// Error reads like `sdk: state_put "counts": ETOOLARGE: over the size limit`.
func (e *HostError) Error() string {
	s := "sdk: " + e.Call
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	return s + ": " + e.Errno.Error()
}

// Unwrap returns the errno.
func (e *HostError) Unwrap() error { return e.Errno }

// hostErr builds the error for a negative host result r.
func hostErr(call, name string, r int32) error {
	return &HostError{Call: call, Name: name, Errno: abi.Errno(-r)}
}
