// Command enrich is a wasmstream plugin that joins a stream with a table:
// for each JSON record it looks up one of its fields in a table (a global
// table of the processor, read through the state imports) and emits the
// record with the table's value added under a new field. Records whose key
// is not in the table go to an optional "missing" output. See README.md.
package main

import (
	"bytes"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
)

// settings is the parsed config, assigned whole by setup.
type settings struct {
	table   *sdk.StoreHandle
	key     jsonx.Path
	as      []byte            // the new field's name, quoted, with its colon
	out     *sdk.OutputHandle // joined records
	missing *sdk.OutputHandle // nil: records without a match are dropped
}

var cfg settings

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	c, err := config.Parse("enrich", sdk.Config())
	if err != nil {
		return err
	}
	var s settings
	if name := c.RequiredString("table"); name != "" {
		s.table = sdk.Store(name)
		if err := s.table.Check(); err != nil {
			c.Fail("table", "the processor declares no table or store "+name+" ("+err.Error()+")")
		}
	}
	s.key = c.Path("key_field", true)
	s.as = append(jsonx.AppendQuote(nil, c.RequiredString("as")), ':')
	s.out = c.Output("output", "out")
	s.missing = c.Output("missing", "")
	if err := c.Err(); err != nil {
		return err
	}
	cfg = s
	return nil
}

// buf holds the joined record; reused, the SDK copies what it emits.
var buf []byte

func process(r *sdk.Record) error {
	value := bytes.TrimSpace(r.Value)
	v, found, err := lookup(value)
	if err != nil {
		return err // the host could not read the table: the record fails
	}
	if !found {
		if cfg.missing == nil {
			return nil
		}
		return cfg.missing.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	if !jsonx.Valid(v) {
		v = jsonx.AppendQuote(nil, string(v)) // a table value that is not JSON joins as a string
	}
	// {...} becomes {..., "as": value}: the record's last '}' is its end.
	end := len(value) - 1
	buf = append(buf[:0], value[:end]...)
	if bytes.IndexByte(value[1:end], ':') >= 0 { // not {}
		buf = append(buf, ',')
	}
	buf = append(append(append(buf, cfg.as...), v...), '}')
	return cfg.out.Emit(sdk.Out{Key: r.Key, Value: buf, Headers: r.Headers})
}

// lookup returns the table's value for the record's key field (value is
// trimmed): a string
// field by its text, a number or boolean by its JSON spelling. A record
// that is not a JSON object, or has no such field, finds nothing.
func lookup(value []byte) ([]byte, bool, error) {
	if jsonx.KindOf(value) != jsonx.Object || !jsonx.Valid(value) {
		return nil, false, nil
	}
	raw, found, _ := jsonx.Lookup(value, cfg.key)
	if !found {
		return nil, false, nil
	}
	key := raw
	switch jsonx.KindOf(raw) {
	case jsonx.String:
		s, _ := jsonx.Unquote(raw)
		key = []byte(s)
	case jsonx.Object, jsonx.Array, jsonx.Null:
		return nil, false, nil
	}
	return cfg.table.Get(key)
}

func main() {}
