package sdk

import (
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/guest"
)

// callbackTimestamp is the timestamp an emit gets when it leaves the field
// zero during a callback (an on_timer or on_commit call): the trigger's
// timestamp (ABI.md section 8.3). Records use their own instead (cur).
var callbackTimestamp int64

func init() {
	guest.Input = func() []byte { return inputBuf }
	guest.Run = runCallback
	guest.Fail = fail
}

// runCallback is guest.Run. Unlike process it is not on the per-record
// path, so it uses a plain deferred closure.
func runCallback(ts int64, fn func() error) (status abi.Status) {
	callbackTimestamp = ts
	done := false
	defer func() {
		if !done { // a panic, or runtime.Goexit (recover returns nil)
			status = failPanic(recover())
		}
	}()
	err := fn()
	done = true
	if err != nil {
		return failErr(err)
	}
	return abi.StatusOK
}
