package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func hmacHex(salt, s string) string {
	m := hmac.New(sha256.New, []byte(salt))
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

func mask(t *testing.T, cfg, value string) string {
	t.Helper()
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Config(cfg))
	res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: []byte(value), Timestamp: 9,
		Headers: []abi.Header{{Key: "h", Value: []byte("v")}}})
	if len(res.All) != 1 {
		t.Fatalf("emitted %d records", len(res.All))
	}
	e := res.All[0]
	if string(e.Key) != "k" || e.Timestamp != 9 || len(e.Headers) != 1 {
		t.Fatalf("key, timestamp or headers changed: %+v", e)
	}
	if !json.Valid(e.Value) {
		t.Fatalf("output is not JSON: %s", e.Value)
	}
	return string(e.Value)
}

func TestMask(t *testing.T) {
	const doc = `{"user": {"email": "ann@example.com", "name": "Ann", "age": 31},
  "cards": [{"number": "4111"}, {"number": "5500"}], "note": "x"}`
	for _, tc := range []struct{ cfg, want string }{
		{`{"fields":["user.email"]}`, // default mode mask, mask "***"
			`{"user": {"email": "***", "name": "Ann", "age": 31},
  "cards": [{"number": "4111"}, {"number": "5500"}], "note": "x"}`},
		{`{"fields":["user.email","user.age","cards.*.number","missing.field"],"mask":"<\"redacted\">"}`,
			`{"user": {"email": "<\"redacted\">", "name": "Ann", "age": "<\"redacted\">"},
  "cards": [{"number": "<\"redacted\">"}, {"number": "<\"redacted\">"}], "note": "x"}`},
		{`{"fields":["user","user.email","user"]}`, // nested and repeated: the outermost wins
			`{"user": "***",
  "cards": [{"number": "4111"}, {"number": "5500"}], "note": "x"}`},
		{`{"fields":["user.email","user.age","cards.1"],"mode":"hash"}`,
			`{"user": {"email": "` + sha("ann@example.com") + `", "name": "Ann", "age": "` + sha("31") + `"},
  "cards": [{"number": "4111"}, "` + sha(`{"number": "5500"}`) + `"], "note": "x"}`},
		{`{"fields":["user.email"],"mode":"hash","salt":"s3cret"}`,
			`{"user": {"email": "` + hmacHex("s3cret", "ann@example.com") + `", "name": "Ann", "age": 31},
  "cards": [{"number": "4111"}, {"number": "5500"}], "note": "x"}`},
	} {
		if got := mask(t, tc.cfg, doc); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.cfg, got, tc.want)
		}
	}
}

// Hashes are of the decoded string, so spelling does not change them, and
// they are stable across records and instances (joinable downstream).
func TestHashIsDeterministic(t *testing.T) {
	cfg := `{"fields":["e"],"mode":"hash","salt":"k"}`
	a := mask(t, cfg, `{"e":"ab"}`)
	b := mask(t, cfg, `{"e":"a\u0062"}`)
	if a != b || a != `{"e":"`+hmacHex("k", "ab")+`"}` {
		t.Fatalf("%s vs %s", a, b)
	}
}

func TestMaskNotJSON(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Config(`{"fields":["e"]}`))
	res := h.Process(sdktest.Record{Value: []byte(`{"e":"ann@example.com"`)}) // truncated
	if res.Err == nil || !strings.Contains(res.Err.Error(), "not valid JSON") || len(res.All) != 0 {
		t.Fatalf("a value that cannot be masked must fail the record, not pass: %v %v", res.Err, res.All)
	}
	// A tombstone passes: nothing to mask.
	res = h.MustProcess(sdktest.Record{Key: []byte("k"), Value: nil})
	if len(res.All) != 1 || res.All[0].Value != nil {
		t.Fatalf("tombstone: %+v", res.All)
	}

	h = sdktest.New(t, sdktest.Outputs("out", "bad"), sdktest.Config(`{"fields":["e"],"invalid_output":"bad"}`))
	res = h.MustProcess(sdktest.Record{Value: []byte(`nope`)})
	if len(res.Emitted["bad"]) != 1 || len(res.Emitted["out"]) != 0 {
		t.Fatalf("invalid_output: %+v", res.Emitted)
	}
}

func TestMaskBadConfig(t *testing.T) {
	for cfg, want := range map[string]string{
		`{}`:                                `mask: config: "fields": required`,
		`{"fields":[]}`:                     `mask: config: "fields": must name at least one field`,
		`{"fields":"e"}`:                    `mask: config: "fields": must be a list of strings, got a string`,
		`{"fields":["a",2]}`:                `mask: config: "fields[1]": must be a string, got a number`,
		`{"fields":["a.."]}`:                `mask: config: "fields[0]": empty segment`,
		`{"fields":["a"],"mode":"encrypt"}`: `mask: config: "mode": must be "mask" or "hash"; got "encrypt"`,
		`{"fields":["a"],"salt":"x"}`:       `mask: config: "salt": only used with mode "hash"`,
		`{"fields":["a"],"mode":"hash","mask":"x"}`: `mask: config: "mask": only used with mode "mask"`,
		`{"fields":["a"],"mask":1}`:                 `mask: config: "mask": must be a string, got a number`,
		`{"fields":["a"],"output":"nope"}`:          `mask: config: "output": output "nope" is not declared`,
		`{"fields":["a"],"field":"b"}`:              `mask: config: unknown field "field"`,
	} {
		_, err := sdktest.Start(t, sdktest.Outputs("out"), sdktest.Config(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s:\n got  %v\n want %s", cfg, err, want)
		}
	}
}
