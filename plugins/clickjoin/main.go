// Command clickjoin is a wasmstream plugin that joins ad impressions with
// the clicks on them (a stream-stream join in event time, built on
// sdk/join): a click joins the impression of its key shown at most
// `window` before it. By default every impression is reported, clicked or
// not, once its window has passed without a click (a left join). See
// README.md for the config and formats.
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/join"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	store = sdk.Store("clickjoin")
	out   = sdk.Output("joined")
)

var clicks *join.Join

func init() {
	sdk.OnInit(setup)
	sdk.Handle(func(r *sdk.Record) error { return clicks.Add(r) })
	timer.Handle(func(f *timer.Firing) error {
		if ok, err := clicks.OnTimer(f); ok || err != nil {
			return err
		}
		return errors.New("clickjoin: a timer that is not the join's: " + strconv.Quote(string(f.Key)))
	})
}

func setup() error {
	c, err := config.Parse("clickjoin", sdk.Config())
	if err != nil {
		return err
	}
	spec := join.Spec{Name: "cj", Store: store, Result: emit}
	spec.After = c.Duration("window", 0)
	if spec.After <= 0 && c.Err() == nil {
		c.Fail("window", "required, and more than 0")
	}
	spec.Grace = c.Duration("grace", 0)
	switch k := c.String("join", "left"); k {
	case "left":
		spec.Kind = join.Left
	case "inner":
		spec.Kind = join.Inner
	default:
		c.Fail("join", `must be "left" or "inner"; got `+strconv.Quote(k))
	}
	spec.Left = inputIndex(c, "impressions_input", 0)
	spec.Right = inputIndex(c, "clicks_input", 1)
	if spec.Left == spec.Right && c.Err() == nil {
		c.Fail("clicks_input", "must differ from impressions_input")
	}
	spec.LateOutput = c.Output("late_output", "")
	if err := c.Err(); err != nil {
		return err
	}
	if err := store.Check(); err != nil {
		return errors.New("clickjoin: " + err.Error())
	}
	if err := out.Check(); err != nil {
		return errors.New("clickjoin: " + err.Error())
	}
	clicks, err = join.New(spec)
	return err
}

// inputIndex reads an input index field: a whole number from 0.
func inputIndex(c *config.Object, key string, def int) int {
	v, ok := c.Any(key)
	if !ok {
		return def
	}
	f, isNum := v.(float64)
	if !isNum || f < 0 || f != float64(int(f)) || f > 1<<20 {
		c.Fail(key, "must be an input index: a whole number from 0")
		return def
	}
	return int(f)
}

var valBuf []byte

// emit writes one result: the impression's and the click's times and
// values (as JSON strings), and the time to click; a null click for an
// impression that was not clicked in its window.
func emit(res *join.Result) error {
	v := append(valBuf[:0], `{"impression_at":`...)
	v = strconv.AppendInt(v, res.Left.Timestamp, 10)
	v = append(v, `,"impression":`...)
	v = quoted(v, res.Left.Value)
	if res.Right == nil {
		v = append(v, `,"click_at":null,"click":null,"latency_ms":null}`...)
	} else {
		v = append(v, `,"click_at":`...)
		v = strconv.AppendInt(v, res.Right.Timestamp, 10)
		v = append(v, `,"click":`...)
		v = quoted(v, res.Right.Value)
		v = append(v, `,"latency_ms":`...)
		v = strconv.AppendInt(v, res.Right.Timestamp-res.Left.Timestamp, 10)
		v = append(v, '}')
	}
	valBuf = v
	return out.Emit(sdk.Out{Key: res.Key, Value: v, Timestamp: res.Timestamp})
}

func quoted(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	return jsonx.AppendQuote(dst, string(b))
}

func main() {}
