// Command conformance is the Go SDK's processor of the ABI conformance
// suite (host/internal/conformance/README.md has the script it follows,
// the same in every language). It is not a plugin to deploy.
package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out  = sdk.Output("out")
	side = sdk.Output("side")
	kv   = sdk.Store("kv")
	aux  = sdk.Store("aux")
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	sdk.LogInfo("init config " + strconv.Itoa(len(sdk.Config())))
	e1 := out.Emit(sdk.Out{})
	_, _, e2 := kv.Get([]byte("k"))
	sdk.LogInfo("init emit " + res(e1) + " get " + res(e2))
	sdk.LogInfo(initTime())
	for _, err := range []error{out.Check(), side.Check(), kv.Check(), aux.Check()} {
		if err != nil {
			return err
		}
	}
	return nil
}

// res is an SDK call's result in the script's words: ok or the errno name.
func res(err error) string {
	if err == nil {
		return "ok"
	}
	var he *sdk.HostError
	if errors.As(err, &he) {
		return he.Errno.Name()
	}
	return err.Error()
}

// raw is a raw host result: a decimal number or the errno name.
func raw(r int32) string {
	if e, ok := abi.ErrnoOf(r); ok {
		return e.Name()
	}
	return strconv.Itoa(int(r))
}

func get(s *sdk.StoreHandle, key []byte) string {
	v, ok, err := s.Get(key)
	switch {
	case err != nil:
		return res(err)
	case !ok:
		return "missing"
	}
	return "found:" + string(v)
}

func note(step, text string) error {
	return side.Emit(sdk.Out{Key: []byte(step), Value: []byte(text)})
}

// notes emits steps and texts in pairs, stopping at the first error.
func notes(kvs ...string) error {
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := note(kvs[i], kvs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func process(r *sdk.Record) error {
	if !strings.HasPrefix(string(r.Key), "cmd:") {
		return echo(r)
	}
	switch string(r.Key[4:]) {
	case "state":
		return state()
	case "scan":
		return scan()
	case "config":
		return out.Emit(sdk.Out{Key: []byte("config"), Value: sdk.Config()})
	case "log":
		sdk.LogDebug("debug line")
		sdk.LogInfo("info line")
		sdk.LogWarn("warn line")
		sdk.LogError("error line")
		r4 := rawLog(4, "bad")
		sdk.LogInfo(strings.Repeat("L", 5000))
		return notes("log-level-4", raw(r4), "log", "ok")
	case "names":
		return note("names", raw(rawOutputIndex("side"))+" "+raw(rawStoreIndex("aux"))+" "+
			raw(rawStoreIndex("kv"))+" "+raw(rawOutputIndex("nope"))+" "+raw(rawStoreIndex("nope")))
	case "headers":
		hs := []sdk.Header{{Key: "a", Value: []byte("1")}, {Key: "null"}, {Key: "empty", Value: []byte{}},
			{Key: "", Value: []byte("noname")}, {Key: "a", Value: []byte("2")}}
		if err := out.Emit(sdk.Out{Key: []byte{}, Headers: hs, Timestamp: 123}); err != nil {
			return err
		}
		if err := out.Emit(sdk.Out{Value: []byte{}}); err != nil {
			return err
		}
		if err := side.EmitTo(5, sdk.Out{Key: []byte("p5"), Value: []byte("v")}); err != nil {
			return err
		}
		return side.EmitTo(0, sdk.Out{})
	case "rawemit":
		return notes("emit-huge", raw(rawEmit(make([]byte, abi.MaxRecordSize+1))),
			"emit-malformed", raw(rawEmit(make([]byte, 10))))
	case "fail":
		if err := kv.Put([]byte("fail-k"), []byte("x")); err != nil {
			return err
		}
		if err := out.Emit(sdk.Out{Key: []byte("lost")}); err != nil {
			return err
		}
		return errors.New("conformance: rejected on purpose")
	case "fault":
		rawEmitAt(0xFFFFFF00, 1000)
		return nil
	case "trap":
		rawTrap()
		return nil
	case "nooutput":
		rec := abi.Record{Offset: abi.NoOffset, Partition: abi.AnyPartition, Index: 9, Key: []byte("k")}
		rawEmit(rec.AppendEncode(nil))
		return nil
	case "now":
		return now()
	case "timers":
		return timers()
	case "mark":
		return marks()
	case "timerfault":
		rawTimerSetAt(abi.TimerEventTime, 1, 0xFFFFFF00, 100)
		return nil
	case "noop":
		return nil
	case "eio":
		_, _, err := kv.Get([]byte("eio"))
		return errors.New("conformance: eio " + res(err))
	}
	return errors.New("conformance: unknown command " + string(r.Key))
}

func echo(r *sdk.Record) error {
	if err := out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}); err != nil {
		return err
	}
	if err := side.EmitTo(r.Partition&3, sdk.Out{Key: r.Value, Value: r.Key}); err != nil {
		return err
	}
	return side.Forward(r)
}

func state() error {
	k := []byte("k")
	if err := note("get-missing", get(kv, k)); err != nil {
		return err
	}
	if err := notes("put-empty", res(kv.Put(k, []byte{})), "get-empty", get(kv, k)); err != nil {
		return err
	}
	if err := notes("put-v1", res(kv.Put(k, []byte("v1"))), "get-staged", get(kv, k)); err != nil {
		return err
	}
	e1, e2 := kv.Delete(k), kv.Delete(k)
	if err := notes("delete-twice", res(errors.Join(e1, e2)), "get-deleted", get(kv, k)); err != nil {
		return err
	}
	if err := notes("put-aux", res(aux.Put(k, []byte("aux"))), "get-other-store", get(kv, k),
		"get-aux", get(aux, k)); err != nil {
		return err
	}
	big := make([]byte, 200000)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	if err := kv.Put([]byte("big"), big); err != nil {
		return err
	}
	v, _, err := kv.Get([]byte("big"))
	if err != nil {
		return err
	}
	if err := out.Emit(sdk.Out{Key: []byte("get-big"), Value: v}); err != nil {
		return err
	}
	long := []byte(strings.Repeat("k", abi.MaxKeySize+1))
	maxVal := make([]byte, abi.MaxValueSize)
	if err := notes("put-long-key", res(kv.Put(long, nil)), "get-long-key", get(kv, long),
		"put-huge-value", res(kv.Put([]byte("huge"), make([]byte, abi.MaxValueSize+1))),
		"put-max-value", res(kv.Put([]byte("max"), maxVal))); err != nil {
		return err
	}
	if err := kv.Delete([]byte("max")); err != nil {
		return err
	}
	c, _, err := kv.Get([]byte("counter"))
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(c)) // missing: 0
	next := strconv.Itoa(n + 1)
	if err := kv.Put([]byte("counter"), []byte(next)); err != nil {
		return err
	}
	return note("counter", next)
}

func scan() error {
	puts := []struct {
		k string
		v []byte
	}{
		{"s/a", []byte(strings.Repeat("a", 10))}, {"s/b", []byte(strings.Repeat("b", 700))},
		{"s/c", []byte(strings.Repeat("c", 70000))}, {"s/d", []byte{}}, {"t/x", []byte("x")},
	}
	for _, p := range puts {
		if err := kv.Put([]byte(p.k), p.v); err != nil {
			return err
		}
	}
	walk := func(start, end []byte, f func(k, v []byte) error) error {
		it, err := kv.Scan(start, end)
		if err != nil {
			return err
		}
		defer it.Close()
		for it.Next() {
			if err := f(it.Key(), it.Value()); err != nil {
				return err
			}
		}
		return it.Err()
	}
	if err := walk([]byte("s/"), []byte("s0"), func(k, v []byte) error {
		return out.Emit(sdk.Out{Key: k, Value: v})
	}); err != nil {
		return err
	}
	if err := walk([]byte("s/b"), []byte("s/d"), func(k, v []byte) error {
		return side.Emit(sdk.Out{Key: k, Value: v})
	}); err != nil {
		return err
	}
	if err := walk([]byte("s/c"), nil, func(k, v []byte) error {
		return out.Emit(sdk.Out{Key: k, Value: []byte(strconv.Itoa(len(v)))})
	}); err != nil {
		return err
	}
	it, err := kv.ScanPrefix([]byte("s/"))
	if err != nil {
		return err
	}
	it.Next()
	if err := note("scan-close", res(it.Close())); err != nil {
		return err
	}
	var open []*sdk.Iterator
	for range abi.MaxOpenCursors {
		it, err := kv.Scan(nil, nil)
		if err != nil {
			return err
		}
		open = append(open, it)
	}
	_, err17 := kv.Scan(nil, nil)
	for _, it := range open {
		it.Close()
	}
	var buf [64]byte
	return notes("cursor-17", res(err17), "next-bad", raw(rawScanNext(999, buf[:])),
		"close-bad", raw(rawScanClose(999)), "get-bad-store", raw(rawStateGet(7, []byte("k"), buf[:])),
		"scan-bad-store", raw(rawScanOpen(7, nil, nil)))
}

func main() {}
