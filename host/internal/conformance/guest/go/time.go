package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

// The time script (host/internal/conformance/README.md, "Time").

func init() {
	timer.Handle(fired)
	timer.OnCommit(committed)
}

// initTime is init's time line: every time call is refused during init.
func initTime() string {
	_, e1 := timer.Set(timer.EventTime, 1, []byte("k"))
	_, e2 := timer.Cancel(timer.EventTime, 1, []byte("k"))
	_, e3 := timer.StreamTime()
	_, e4 := timer.WallTime()
	_, e5 := timer.Mark([]byte("k"))
	return "init time set " + res(e1) + " cancel " + res(e2) + " stream " + res(e3) + " wall " + res(e4) + " mark " + res(e5)
}

// changed is a time call's result in the script's words: 1, 0 or the
// errno's name.
func changed(ok bool, err error) string {
	switch {
	case err != nil:
		return res(err)
	case ok:
		return "1"
	}
	return "0"
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func now() error {
	st, err := timer.StreamTime()
	if err != nil {
		return err
	}
	wt, err := timer.WallTime()
	if err != nil {
		return err
	}
	return notes("now", i64(st)+" "+i64(wt), "now-bad-clock", raw(int32(rawTimeNow(2))))
}

func timers() error {
	set := func(kind timer.Kind, ts int64, key []byte) string { return changed(timer.Set(kind, ts, key)) }
	cancel := func(kind timer.Kind, ts int64, key []byte) string { return changed(timer.Cancel(kind, ts, key)) }
	k, big := []byte("k"), make([]byte, abi.MaxTimerKeySize+1)
	if err := notes("set-new", set(timer.EventTime, 5000, []byte("a")), "set-again", set(timer.EventTime, 5000, []byte("a")),
		"set-processing", set(timer.ProcessingTime, 5000, []byte("a")), "set-empty-key", set(timer.EventTime, 4000, nil),
		"cancel", cancel(timer.ProcessingTime, 5000, []byte("a")), "cancel-again", cancel(timer.ProcessingTime, 5000, []byte("a")),
		"set-kind-2", set(2, 1, k), "set-kind-7", set(7, 1, k), "set-negative", set(timer.EventTime, -1, k),
		"set-long-key", set(timer.EventTime, 1, big), "set-order", set(9, -1, big),
		"cancel-kind-2", cancel(2, 1, k), "cancel-long-key", cancel(timer.EventTime, 1, big),
		"set-max-key", set(timer.EventTime, 9000, bytes.Repeat([]byte("m"), abi.MaxTimerKeySize))); err != nil {
		return err
	}
	wall, err := timer.WallTime()
	if err != nil {
		return err
	}
	for _, t := range []struct {
		kind timer.Kind
		ts   int64
		key  string
	}{{timer.EventTime, 6000, "fail"}, {timer.EventTime, 6000, "chain"}, {timer.ProcessingTime, wall + 5000, "p"},
		{timer.EventTime, 7000, "fault"}, {timer.EventTime, 7000, "zzz"}} {
		if _, err := timer.Set(t.kind, t.ts, []byte(t.key)); err != nil {
			return err
		}
	}
	// Up to the task's limit; then the ones set are cancelled again.
	n := 0
	var limit error
	for ; n < 10; n++ {
		if _, limit = timer.Set(timer.EventTime, 100000+int64(n), []byte("l")); limit != nil {
			break
		}
	}
	for j := range n {
		if _, err := timer.Cancel(timer.EventTime, 100000+int64(j), []byte("l")); err != nil {
			return err
		}
	}
	return note("set-limit", strconv.Itoa(n)+" "+res(limit))
}

func marks() error {
	mark := func(key string) string { return changed(timer.Mark([]byte(key))) }
	if err := notes("mark-new", mark("m2"), "mark-again", mark("m2")); err != nil {
		return err
	}
	if _, err := timer.Mark([]byte("m1")); err != nil {
		return err
	}
	if _, err := timer.Mark([]byte("cfail")); err != nil {
		return err
	}
	long := changed(timer.Mark(make([]byte, abi.MaxTimerKeySize+1)))
	n := 0
	var limit error
	for ; n < 10; n++ {
		if _, limit = timer.Mark([]byte("x" + strconv.Itoa(n))); limit != nil {
			break
		}
	}
	return notes("mark-long-key", long, "mark-limit", strconv.Itoa(n)+" "+res(limit))
}

func fired(f *timer.Firing) error {
	if err := note("fired", f.Kind.String()+" "+i64(f.Time)+" "+i64(f.StreamTime)+" "+i64(f.WallTime)+" "+
		strconv.Itoa(len(f.Key))); err != nil {
		return err
	}
	switch string(f.Key) {
	case "fail":
		if err := kv.Put([]byte("timer-fail"), []byte("x")); err != nil {
			return err
		}
		if _, err := timer.Set(timer.EventTime, 6500, []byte("lost")); err != nil {
			return err
		}
		if _, err := timer.Mark([]byte("lost-mark")); err != nil {
			return err
		}
		return errors.New("conformance: timer failed on purpose")
	case "chain":
		set := changed(timer.Set(timer.EventTime, f.Time, []byte("chain2")))
		return notes("chain-set", set, "chain-mark", changed(timer.Mark([]byte("t-chain"))))
	case "fault":
		rawEmitAt(0xFFFFFF00, 1000)
	}
	return nil
}

func committed(c *timer.Commit) error {
	_, again := timer.Mark([]byte("again"))
	if err := notes("commit", string(c.Key)+" "+i64(c.Timestamp)+" "+i64(c.StreamTime)+" "+i64(c.WallTime),
		"commit-mark", res(again)); err != nil {
		return err
	}
	if string(c.Key) == "cfail" {
		return errors.New("conformance: commit failed on purpose")
	}
	return nil
}
