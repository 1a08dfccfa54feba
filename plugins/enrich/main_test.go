package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// start runs enrich against a fake host whose "customers" store stands for
// the table (the plugin only reads it, as it reads a global table).
func start(t *testing.T, conf string) *sdktest.Host {
	t.Helper()
	h := sdktest.New(t, sdktest.Outputs("out", "missing"), sdktest.Stores("customers"), sdktest.Config(conf))
	c := h.State("customers")
	c.Put("c1", []byte(`{"name":"Ann","tier":"gold"}`))
	c.Put("42", []byte(`{"name":"Bob"}`))
	c.Put("c3", []byte(`plain text`))
	return h
}

const conf = `{"table":"customers","key_field":"customer_id","as":"customer","missing":"missing"}`

func TestEnrich(t *testing.T) {
	h := start(t, conf)
	for _, tc := range []struct{ in, want string }{
		{`{"order":1,"customer_id":"c1"}`, `out:{"order":1,"customer_id":"c1","customer":{"name":"Ann","tier":"gold"}}`},
		{` {"customer_id":42} `, `out:{"customer_id":42,"customer":{"name":"Bob"}}`}, // a number by its spelling
		{`{"customer_id":"c3"}`, `out:{"customer_id":"c3","customer":"plain text"}`}, // not JSON: a string
		{`{"customer_id":"c2"}`, `missing:{"customer_id":"c2"}`},                     // not in the table
		{`{"order":2}`, `missing:{"order":2}`},                                       // no key field
		{`{"customer_id":null}`, `missing:{"customer_id":null}`},
		{`not json`, `missing:not json`},
		{`["c1"]`, `missing:["c1"]`},
	} {
		res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: []byte(tc.in)})
		if len(res.All) != 1 {
			t.Fatalf("%s: %d records emitted", tc.in, len(res.All))
		}
		if got := res.All[0].Output + ":" + string(res.All[0].Value); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestEnrichNestedKeyAndNoMissing(t *testing.T) {
	h := start(t, `{"table":"customers","key_field":"who.id","as":"c"}`)
	res := h.MustProcess(sdktest.Record{Value: []byte(`{"who":{"id":"c1"}}`)})
	if len(res.All) != 1 || string(res.All[0].Value) != `{"who":{"id":"c1"},"c":{"name":"Ann","tier":"gold"}}` {
		t.Fatalf("got %+v", res.All)
	}
	if res := h.MustProcess(sdktest.Record{Value: []byte(`{"who":{"id":"zz"}}`)}); len(res.All) != 0 {
		t.Fatalf("a miss without a missing output emitted %+v", res.All)
	}
	if res := h.MustProcess(sdktest.Record{Value: []byte(`{}`)}); len(res.All) != 0 {
		t.Fatalf("{} emitted %+v", res.All)
	}
}

func TestEnrichConfigErrors(t *testing.T) {
	for conf, want := range map[string]string{
		`{"key_field":"id","as":"c"}`:                                   "table",
		`{"table":"nope","key_field":"id","as":"c"}`:                    "nope",
		`{"table":"customers","as":"c"}`:                                "key_field",
		`{"table":"customers","key_field":"id"}`:                        "as",
		`{"table":"customers","key_field":"id","as":"c","missing":"x"}`: "missing",
	} {
		_, err := sdktest.Start(t, sdktest.Outputs("out"), sdktest.Stores("customers"), sdktest.Config(conf))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", conf, err, want)
		}
	}
}
