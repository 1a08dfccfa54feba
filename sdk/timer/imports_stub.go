//go:build !wasip1

package timer

import "github.com/wasmstream/wasmstream/sdk/internal/fakeabi"

// Outside Wasm the imports go to sdk/sdktest's host and the callbacks are
// handed to it, as package sdk does for its own.

func init() {
	fakeabi.RegisterTimeGuest(fakeabi.TimeGuest{
		OnTimer:  func(n uint32) int32 { return int32(fire(n)) },
		OnCommit: func(n uint32) int32 { return int32(commitKey(n)) },
	})
}

func host() fakeabi.Host {
	h := fakeabi.CurrentHost()
	if h == nil {
		panic("sdk/timer: no host: outside Wasm the SDK runs only under sdk/sdktest (sdktest.New)")
	}
	return h
}

func hostTimerSet(kind uint32, ts int64, key []byte) int32 { return host().TimerSet(kind, ts, key) }
func hostTimerCancel(kind uint32, ts int64, key []byte) int32 {
	return host().TimerCancel(kind, ts, key)
}
func hostTimeNow(clock uint32) int64  { return host().TimeNow(clock) }
func hostCommitMark(key []byte) int32 { return host().CommitMark(key) }
