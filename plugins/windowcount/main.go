// Command windowcount is a wasmstream plugin that counts records per key
// in time windows (tumbling, hopping or session, in event time) and emits
// each window's count, by default once when the window closes. It is
// built on sdk/window; see README.md for the config and formats.
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/timer"
	"github.com/wasmstream/wasmstream/sdk/window"
)

var (
	store = sdk.Store("windows")
	out   = sdk.Output("counts")
)

var (
	windows *window.Windows
	// windowedKey makes the output key "key@start" (true) instead of the
	// record key.
	windowedKey bool
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(func(r *sdk.Record) error { return windows.Add(r) })
	timer.Handle(func(f *timer.Firing) error {
		if ok, err := windows.OnTimer(f); ok || err != nil {
			return err
		}
		return errors.New("windowcount: a timer that is not a window's: " + strconv.Quote(string(f.Key)))
	})
	timer.OnCommit(func(c *timer.Commit) error {
		if ok, err := windows.OnCommit(c); ok || err != nil {
			return err
		}
		return errors.New("windowcount: a commit mark that is not a window's: " + strconv.Quote(string(c.Key)))
	})
}

func setup() error {
	c, err := config.Parse("windowcount", sdk.Config())
	if err != nil {
		return err
	}
	spec := window.Spec{Name: "wc", Store: store, Aggregate: window.Count, Result: emit}
	kind := c.String("window", "tumbling")
	switch kind {
	case "tumbling", "hopping":
		spec.Size = c.Duration("size", 0)
		if spec.Size <= 0 && c.Err() == nil {
			c.Fail("size", "required, and more than 0, for "+kind+" windows")
		}
		if kind == "hopping" {
			spec.Advance = c.Duration("advance", 0)
			if (spec.Advance <= 0 || spec.Advance > spec.Size) && c.Err() == nil {
				c.Fail("advance", "required for hopping windows, more than 0 and at most size")
			}
		}
	case "session":
		spec.Gap = c.Duration("gap", 0)
		spec.Merge = window.MergeCounts
		if spec.Gap <= 0 && c.Err() == nil {
			c.Fail("gap", "required, and more than 0, for session windows")
		}
	default:
		c.Fail("window", `must be "tumbling", "hopping" or "session"; got `+strconv.Quote(kind))
	}
	spec.Grace = c.Duration("grace", 0)
	switch e := c.String("emit", "final"); e {
	case "final":
		spec.Emit = window.EmitFinal
	case "update":
		spec.Emit = window.EmitUpdate
	case "commit":
		spec.Emit = window.EmitOnCommit
	default:
		c.Fail("emit", `must be "final", "update" or "commit"; got `+strconv.Quote(e))
	}
	switch f := c.String("key_format", "plain"); f {
	case "plain", "windowed":
		windowedKey = f == "windowed"
	default:
		c.Fail("key_format", `must be "plain" or "windowed"; got `+strconv.Quote(f))
	}
	spec.LateOutput = c.Output("late_output", "")
	// A field of another kind of window is a mistake, not a default.
	if kind == "session" && c.Has("size") {
		c.Fail("size", "does not apply to session windows (gap does)")
	}
	if kind != "session" && c.Has("gap") {
		c.Fail("gap", "applies to session windows only")
	}
	if kind != "hopping" && c.Has("advance") {
		c.Fail("advance", "applies to hopping windows only")
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := store.Check(); err != nil {
		return errors.New("windowcount: " + err.Error())
	}
	if err := out.Check(); err != nil {
		return errors.New("windowcount: " + err.Error())
	}
	windows, err = window.New(spec)
	return err
}

// Scratch for emit, reused.
var keyBuf, valBuf []byte

// emit writes one window result: {"start":…,"end":…,"count":…}, or a
// null value for a session merged into another (update and commit modes).
func emit(res *window.Result) error {
	key := res.Key
	if windowedKey {
		keyBuf = append(append(keyBuf[:0], res.Key...), '@')
		keyBuf = strconv.AppendInt(keyBuf, res.Window.Start, 10)
		key = keyBuf
	}
	var val []byte
	if res.Agg != nil {
		n, err := window.CountOf(res.Agg)
		if err != nil {
			return err
		}
		val = append(valBuf[:0], `{"start":`...)
		val = strconv.AppendInt(val, res.Window.Start, 10)
		val = append(val, `,"end":`...)
		val = strconv.AppendInt(val, res.Window.End, 10)
		val = append(val, `,"count":`...)
		val = strconv.AppendUint(val, n, 10)
		val = append(val, '}')
		valBuf = val
	}
	return out.Emit(sdk.Out{Key: key, Value: val, Timestamp: res.Timestamp})
}

func main() {}
