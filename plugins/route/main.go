// Command route is a wasmstream plugin that sends each record, unchanged,
// to one of several outputs, chosen by a JSON field of the value or by a
// prefix of the key. See README.md for the config.
package main

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
)

type prefixRoute struct {
	prefix []byte
	out    *sdk.OutputHandle
}

// settings is the parsed config, assigned whole by setup.
type settings struct {
	byField  bool
	field    jsonx.Path
	values   map[string]*sdk.OutputHandle // by field: the value's text -> output
	prefixes []prefixRoute                // by key_prefix: longest prefix first
	def      *sdk.OutputHandle            // nil: unmatched records are dropped
	invalid  *sdk.OutputHandle            // by field: values that are not JSON; nil: as unmatched
}

var cfg settings

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	c, err := config.Parse("route", sdk.Config())
	if err != nil {
		return err
	}
	var s settings
	switch by := c.String("by", "field"); by {
	case "field":
		s.byField = true
		s.field = c.Path("field", true)
	case "key_prefix":
		if c.Has("field") {
			c.Fail("field", "not used with by key_prefix; remove it")
		}
	default:
		c.Fail("by", `must be "field" or "key_prefix"; got `+strconv.Quote(by))
	}
	if !c.Has("routes") {
		c.Fail("routes", "required")
	}
	routes := c.StringMap("routes")
	if routes != nil && len(routes) == 0 {
		c.Fail("routes", "must have at least one route")
	}
	// One handle per output name, checked once; map order is random, so
	// walk the routes sorted to make the first error reported stable.
	handles := map[string]*sdk.OutputHandle{}
	s.values = map[string]*sdk.OutputHandle{}
	for _, k := range sortedKeys(routes) {
		name := routes[k]
		h, ok := handles[name]
		if !ok {
			h = c.CheckOutput("routes."+k, name)
			handles[name] = h
		}
		if s.byField {
			s.values[k] = h
		} else {
			s.prefixes = append(s.prefixes, prefixRoute{prefix: []byte(k), out: h})
		}
	}
	// Longest prefix wins: "user-admin-" before "user-".
	slices.SortStableFunc(s.prefixes, func(a, b prefixRoute) int { return len(b.prefix) - len(a.prefix) })
	s.def = c.Output("default", "")
	if c.Has("invalid_output") && !s.byField {
		c.Fail("invalid_output", "only used with by field; remove it")
	}
	s.invalid = c.Output("invalid_output", "")
	if err := c.Err(); err != nil {
		return err
	}
	cfg = s
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func process(r *sdk.Record) error {
	out := cfg.def
	if cfg.byField {
		if o, valid := byField(r.Value); !valid && cfg.invalid != nil {
			out = cfg.invalid
		} else if o != nil {
			out = o
		}
	} else {
		for _, p := range cfg.prefixes {
			if r.Key != nil && bytes.HasPrefix(r.Key, p.prefix) {
				out = p.out
				break
			}
		}
	}
	if out == nil {
		return nil // documented: unmatched records without a default are dropped
	}
	return out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
}

// byField returns the route of the field's value, nil when there is none,
// and whether the value is JSON. A string matches a route by its text; a
// number, boolean or null by its JSON spelling (1, true, null); an object
// or array matches no route.
func byField(value []byte) (*sdk.OutputHandle, bool) {
	raw, found, valid := jsonx.Lookup(value, cfg.field)
	if !found {
		return nil, valid
	}
	switch jsonx.KindOf(raw) {
	case jsonx.Object, jsonx.Array:
		return nil, true
	case jsonx.String:
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			return cfg.values[string(inner)], true
		}
		s, _ := jsonx.Unquote(raw)
		return cfg.values[s], true
	}
	return cfg.values[string(raw)], true
}

func main() {}
