// Command filter is a wasmstream plugin that keeps the records whose JSON
// value satisfies one condition and emits them, unchanged, to an output.
// See README.md for the config.
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
)

// scalar is a JSON string, number, boolean or null from the config.
type scalar struct {
	kind jsonx.Kind
	s    string  // String
	n    float64 // Number
	b    bool    // Bool
}

// settings is the parsed config. setup assigns it whole, so an instance
// never runs with half of one config and half of another.
type settings struct {
	path    jsonx.Path
	op      string
	value   scalar   // eq, ne, gt, ge, lt, le
	values  []scalar // in
	out     *sdk.OutputHandle
	invalid *sdk.OutputHandle // nil: drop records that are not JSON
}

var cfg settings

const ops = "eq, ne, exists, gt, ge, lt, le, in"

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	c, err := config.Parse("filter", sdk.Config())
	if err != nil {
		return err
	}
	var s settings
	s.path = c.Path("field", true)
	s.op = c.String("op", "eq")
	v, hasValue := c.Any("value")
	switch s.op {
	case "eq", "ne":
		if !hasValue {
			c.Fail("value", "required for op "+s.op)
		} else if sc, ok := toScalar(v); !ok {
			c.Fail("value", "must be a string, number, boolean or null for op "+s.op)
		} else {
			s.value = sc
		}
	case "gt", "ge", "lt", "le":
		n, ok := v.(float64)
		if !ok {
			c.Fail("value", "must be a number for op "+s.op)
		}
		s.value = scalar{kind: jsonx.Number, n: n}
	case "in":
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			c.Fail("value", "must be a non-empty list for op in")
		}
		for i, e := range list {
			sc, ok := toScalar(e)
			if !ok {
				c.Fail("value["+strconv.Itoa(i)+"]", "must be a string, number, boolean or null")
			}
			s.values = append(s.values, sc)
		}
	case "exists":
		if hasValue {
			c.Fail("value", "not used by op exists; remove it")
		}
	default:
		c.Fail("op", "must be one of "+ops+"; got "+strconv.Quote(s.op))
	}
	s.out = c.Output("output", "out")
	s.invalid = c.Output("invalid_output", "")
	if err := c.Err(); err != nil {
		return err
	}
	cfg = s
	return nil
}

func toScalar(v any) (scalar, bool) {
	switch v := v.(type) {
	case nil:
		return scalar{kind: jsonx.Null}, true
	case bool:
		return scalar{kind: jsonx.Bool, b: v}, true
	case float64:
		return scalar{kind: jsonx.Number, n: v}, true
	case string:
		return scalar{kind: jsonx.String, s: v}, true
	}
	return scalar{}, false
}

func process(r *sdk.Record) error {
	raw, found, valid := jsonx.Lookup(r.Value, cfg.path)
	if !valid {
		if cfg.invalid == nil {
			return nil // documented: records that are not JSON are dropped
		}
		return cfg.invalid.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	if !match(raw, found) {
		return nil
	}
	return cfg.out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
}

// match applies the condition to the field's raw JSON value.
func match(raw []byte, found bool) bool {
	switch cfg.op {
	case "exists":
		return found
	case "ne":
		return !found || !equal(raw, &cfg.value)
	}
	if !found {
		return false
	}
	switch cfg.op {
	case "eq":
		return equal(raw, &cfg.value)
	case "in":
		for i := range cfg.values {
			if equal(raw, &cfg.values[i]) {
				return true
			}
		}
		return false
	}
	n, ok := number(raw)
	if !ok {
		return false // gt, ge, lt, le compare numbers only
	}
	switch cfg.op {
	case "gt":
		return n > cfg.value.n
	case "ge":
		return n >= cfg.value.n
	case "lt":
		return n < cfg.value.n
	case "le":
		return n <= cfg.value.n
	}
	return false
}

// equal compares a raw JSON value with a config scalar: same kind, and
// for numbers the same value (1 equals 1.0 and 1e0), for strings the same
// text after unescaping. Objects and arrays equal nothing.
func equal(raw []byte, want *scalar) bool {
	k := jsonx.KindOf(raw)
	if k != want.kind {
		return false
	}
	switch k {
	case jsonx.Null:
		return true
	case jsonx.Bool:
		return (raw[0] == 't') == want.b
	case jsonx.Number:
		n, ok := number(raw)
		return ok && n == want.n
	case jsonx.String:
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			return string(inner) == want.s
		}
		s, ok := jsonx.Unquote(raw)
		return ok && s == want.s
	}
	return false
}

func number(raw []byte) (float64, bool) {
	if jsonx.KindOf(raw) != jsonx.Number {
		return 0, false
	}
	// A number beyond float64 parses as ±Inf (or 0 when too small) with
	// ErrRange; those still order correctly, so they are kept.
	n, err := strconv.ParseFloat(string(raw), 64)
	return n, err == nil || errors.Is(err, strconv.ErrRange)
}

func main() {}
