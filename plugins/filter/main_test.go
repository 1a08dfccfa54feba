package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

var records = []string{
	`{"user": {"country": "NL", "age": 31}, "tags": ["a"]}`,
	`{"user": {"country": "DE", "age": 17.5}}`,
	`{"user": {"country": "N\u004c", "age": 1e400}}`, // escaped "NL"; a number beyond float64
	`{"user": {"country": null, "age": "31"}}`,
	`{"user": {}}`,
	`{"user": {"country": ["NL"], "age": -1}}`,
	`not json`,
	``,
}

// run starts the filter with cfg and returns, per record above, "out",
// "invalid" or "" (dropped).
func run(t *testing.T, cfg string) []string {
	t.Helper()
	h := sdktest.New(t, sdktest.Outputs("out", "invalid", "kept"), sdktest.Config(cfg))
	var got []string
	for _, v := range records {
		res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: []byte(v)})
		switch {
		case len(res.All) == 0:
			got = append(got, "")
		case len(res.All) == 1:
			e := res.All[0]
			if string(e.Value) != v || string(e.Key) != "k" {
				t.Fatalf("emitted %q, want the record unchanged", e.Value)
			}
			got = append(got, e.Output)
		default:
			t.Fatalf("emitted %d records for one", len(res.All))
		}
	}
	return got
}

func TestFilterOps(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want string // per record, comma-separated
	}{
		{`{"field":"user.country","value":"NL"}`, "out,,out,,,,,"}, // op defaults to eq
		{`{"field":"user.country","op":"eq","value":"NL"}`, "out,,out,,,,,"},
		{`{"field":"user.country","op":"ne","value":"NL"}`, ",out,,out,out,out,,"}, // ne is exactly not-eq, missing included
		{`{"field":"user.country","op":"eq","value":null}`, ",,,out,,,,"},
		{`{"field":"user.country","op":"exists"}`, "out,out,out,out,,out,,"},
		{`{"field":"user.age","op":"gt","value":18}`, "out,,out,,,,,"}, // "31" is a string, not a number
		{`{"field":"user.age","op":"ge","value":31}`, "out,,out,,,,,"},
		{`{"field":"user.age","op":"lt","value":18}`, ",out,,,,out,,"},
		{`{"field":"user.age","op":"le","value":17.5}`, ",out,,,,out,,"},
		{`{"field":"user.age","op":"eq","value":31.0}`, "out,,,,,,,"},
		{`{"field":"user.country","op":"in","value":["DE","NL"]}`, "out,out,out,,,,,"},
		{`{"field":"user.country","op":"in","value":[null, 1]}`, ",,,out,,,,"},
		{`{"field":"tags.0","op":"eq","value":"a"}`, "out,,,,,,,"},
		{`{"field":"user.country","value":"NL","output":"kept"}`, "kept,,kept,,,,,"},
		{`{"field":"user.country","value":"NL","invalid_output":"invalid"}`, "out,,out,,,,invalid,invalid"},
	} {
		t.Run(tc.cfg, func(t *testing.T) {
			if got := strings.Join(run(t, tc.cfg), ","); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A tombstone (null value) is not JSON: dropped, or sent to invalid_output.
func TestFilterTombstone(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("out", "bad"), sdktest.Config(`{"field":"a","op":"exists","invalid_output":"bad"}`))
	res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: nil})
	if len(res.Emitted["bad"]) != 1 || res.Emitted["bad"][0].Value != nil {
		t.Fatalf("tombstone: %+v", res.Emitted)
	}
}

func TestFilterBadConfig(t *testing.T) {
	for cfg, want := range map[string]string{
		``:                                    `filter: config: "field": required`,
		`[]`:                                  `filter: config: must be a JSON object, got a list`,
		`{"field":`:                           `filter: config: invalid JSON`,
		`{"field":"a..b","value":1}`:          `filter: config: "field": empty segment`,
		`{"field":"a","value":1,"op":"like"}`: `filter: config: "op": must be one of eq, ne, exists, gt, ge, lt, le, in; got "like"`,
		`{"field":"a"}`:                       `filter: config: "value": required for op eq`,
		`{"field":"a","value":{"x":1}}`:       `filter: config: "value": must be a string, number, boolean or null for op eq`,
		`{"field":"a","op":"gt","value":"5"}`: `filter: config: "value": must be a number for op gt`,
		`{"field":"a","op":"in","value":[]}`:  `filter: config: "value": must be a non-empty list for op in`,
		`{"field":"a","op":"in","value":[1,[2]]}`:         `filter: config: "value[1]": must be a string, number, boolean or null`,
		`{"field":"a","op":"exists","value":1}`:           `filter: config: "value": not used by op exists`,
		`{"field":1,"value":1}`:                           `filter: config: "field": must be a string, got a number`,
		`{"field":"a","value":1,"output":"nope"}`:         `filter: config: "output": output "nope" is not declared by the processor`,
		`{"field":"a","value":1,"invalid_output":"nope"}`: `filter: config: "invalid_output": output "nope" is not declared`,
		`{"field":"a","value":1,"feild":"b"}`:             `filter: config: unknown field "feild" (known: field, invalid_output, op, output, value)`,
	} {
		_, err := sdktest.Start(t, sdktest.Outputs("out"), sdktest.Config(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s:\n got  %v\n want %s", cfg, err, want)
		}
	}
}

// A failed start leaves no trace: the next good config works in full.
func TestFilterReconfigure(t *testing.T) {
	if _, err := sdktest.Start(t, sdktest.Outputs("out"), sdktest.Config(`{"field":"x","op":"bad"}`)); err == nil {
		t.Fatal("bad config accepted")
	}
	if got := strings.Join(run(t, `{"field":"user.country","value":"DE"}`), ","); got != ",out,,,,,," {
		t.Fatalf("after a failed start: %s", got)
	}
}
