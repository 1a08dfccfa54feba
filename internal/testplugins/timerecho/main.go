// Command timerecho is a test plugin for replay's timers: each record
// sets an event-time timer 10 ms after its timestamp and a processing-time
// one 100 ms after it, both keyed by the record's key, and counts the
// records per key in store "counts"; a timer emits
// "<kind>:<time>:<key>:<count>" to output "out" (the count as of the
// firing). A record whose value is "cancel" cancels its key's pending
// event-time timer of that record's time instead of setting one; a key
// "boom" fails its event-time firings.
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	out    = sdk.Output("out")
	counts = sdk.Store("counts")
)

func init() {
	sdk.Handle(process)
	timer.Handle(fired)
}

func process(r *sdk.Record) error {
	n := 0
	if v, ok, err := counts.Get(r.Key); err != nil {
		return err
	} else if ok {
		n, _ = strconv.Atoi(string(v))
	}
	if err := counts.Put(r.Key, []byte(strconv.Itoa(n+1))); err != nil {
		return err
	}
	if string(r.Value) == "cancel" {
		_, err := timer.Cancel(timer.EventTime, r.Timestamp+10, r.Key)
		return err
	}
	if _, err := timer.Set(timer.EventTime, r.Timestamp+10, r.Key); err != nil {
		return err
	}
	_, err := timer.Set(timer.ProcessingTime, r.Timestamp+100, r.Key)
	return err
}

func fired(f *timer.Firing) error {
	if string(f.Key) == "boom" && f.Kind == timer.EventTime {
		return errors.New("timerecho: boom")
	}
	v, _, err := counts.Get(f.Key)
	if err != nil {
		return err
	}
	return out.Emit(sdk.Out{Key: f.Key, Value: []byte(f.Kind.String() + ":" + strconv.FormatInt(f.Time, 10) + ":" + string(f.Key) + ":" + string(v))})
}

func main() {}
