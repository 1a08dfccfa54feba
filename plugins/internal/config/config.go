// Package config reads a bundled plugin's JSON config (sdk.Config) field
// by field, with errors that name the plugin and the field:
//
//	filter: config: "op": must be one of eq, ne, exists, gt, ge, lt, le, in; got "like"
//
// A field nobody asked for is an error too (a misspelt "feild" should not
// silently mean "no field"). Empty config, whitespace and "null" read as an
// empty object: the host hands a processor without config one of those.
package config

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
)

// Object is a config object being read. Getters record the first problem
// and return zero values after it; Err reports it.
type Object struct {
	plugin string
	m      map[string]any
	asked  map[string]bool
	err    error
}

// Parse decodes raw, which must be a JSON object (or empty, or null).
func Parse(plugin string, raw []byte) (*Object, error) {
	o := &Object{plugin: plugin, m: map[string]any{}, asked: map[string]bool{}}
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		return o, nil
	}
	v, err := jsonx.Decode(raw)
	if err != nil {
		return nil, errors.New(plugin + ": config: " + err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(plugin + ": config: must be a JSON object, got " + typeName(v))
	}
	o.m = m
	return o, nil
}

// Fail records a problem with field key (a dot path for nested fields).
func (o *Object) Fail(key, msg string) {
	if o.err == nil {
		o.err = errors.New(o.plugin + ": config: " + strconv.Quote(key) + ": " + msg)
	}
}

// Err returns the first problem recorded, or else names the fields that no
// getter asked for.
func (o *Object) Err() error {
	if o.err != nil {
		return o.err
	}
	var unknown []string
	for k := range o.m {
		if !o.asked[k] {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := make([]string, 0, len(o.asked))
	for k := range o.asked {
		known = append(known, k)
	}
	slices.Sort(known)
	return errors.New(o.plugin + ": config: unknown field " + strings.Join(unknown, ", ") +
		" (known: " + strings.Join(known, ", ") + ")")
}

// Has reports whether the field is present (even as null).
func (o *Object) Has(key string) bool {
	o.asked[key] = true
	_, ok := o.m[key]
	return ok
}

// Any returns the field's decoded value: map[string]any, []any, string,
// float64, bool or nil.
func (o *Object) Any(key string) (any, bool) {
	o.asked[key] = true
	v, ok := o.m[key]
	return v, ok
}

// String returns a string field, or def when it is absent.
func (o *Object) String(key, def string) string {
	v, ok := o.Any(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		o.Fail(key, "must be a string, got "+typeName(v))
		return def
	}
	return s
}

// RequiredString returns a string field that must be present and not
// empty.
func (o *Object) RequiredString(key string) string {
	if !o.Has(key) {
		o.Fail(key, "required")
		return ""
	}
	s := o.String(key, "")
	if s == "" && o.err == nil {
		o.Fail(key, "must not be empty")
	}
	return s
}

// StringList returns a field that must be a list of strings.
func (o *Object) StringList(key string) []string {
	v, ok := o.Any(key)
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		o.Fail(key, "must be a list of strings, got "+typeName(v))
		return nil
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			o.Fail(key+"["+strconv.Itoa(i)+"]", "must be a string, got "+typeName(e))
			return nil
		}
		out[i] = s
	}
	return out
}

// StringMap returns a field that must be an object whose values are
// strings.
func (o *Object) StringMap(key string) map[string]string {
	v, ok := o.Any(key)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		o.Fail(key, "must be an object, got "+typeName(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			o.Fail(key+"."+k, "must be a string, got "+typeName(e))
			return nil
		}
		out[k] = s
	}
	return out
}

// Path returns a field that must be a dot path (jsonx.ParsePath).
func (o *Object) Path(key string, required bool) jsonx.Path {
	var s string
	if required {
		s = o.RequiredString(key)
	} else {
		s = o.String(key, "")
	}
	if s == "" {
		return nil
	}
	p, err := jsonx.ParsePath(s)
	if err != nil {
		o.Fail(key, err.Error())
	}
	return p
}

// Output returns the handle of the output named by the field (or def when
// the field is absent; no handle when both are empty) after checking that
// the processor declares it, so that a misconfigured deployment fails at
// start, naming the field.
func (o *Object) Output(key, def string) *sdk.OutputHandle {
	name := o.String(key, def)
	if name == "" || o.err != nil {
		return nil
	}
	return o.CheckOutput(key, name)
}

// CheckOutput returns the handle of output name, recording a problem with
// field key if the processor does not declare it.
func (o *Object) CheckOutput(key, name string) *sdk.OutputHandle {
	h := sdk.Output(name)
	if err := h.Check(); err != nil {
		o.Fail(key, "output "+strconv.Quote(name)+" is not declared by the processor ("+err.Error()+")")
		return nil
	}
	return h
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "an unknown type"
}

// Bool returns a boolean field, or def when it is absent.
func (o *Object) Bool(key string, def bool) bool {
	v, ok := o.Any(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		o.Fail(key, "must be true or false, got "+typeName(v))
		return def
	}
	return b
}
