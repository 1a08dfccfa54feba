package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

var outputs = sdktest.Outputs("clicks", "views", "other", "bad", "users", "admins")

// route runs each record and returns the output it went to ("" = dropped).
func route(t *testing.T, cfg string, recs ...sdktest.Record) string {
	t.Helper()
	h := sdktest.New(t, outputs, sdktest.Config(cfg))
	var got []string
	for _, r := range recs {
		res := h.MustProcess(r)
		switch len(res.All) {
		case 0:
			got = append(got, "")
		case 1:
			if e := res.All[0]; string(e.Value) != string(r.Value) || string(e.Key) != string(r.Key) {
				t.Fatalf("record changed on the way: %+v", e)
			}
			got = append(got, res.All[0].Output)
		default:
			t.Fatalf("one record emitted %d times", len(res.All))
		}
	}
	return strings.Join(got, ",")
}

func val(v string) sdktest.Record { return sdktest.Record{Key: []byte("k"), Value: []byte(v)} }
func key(k string) sdktest.Record { return sdktest.Record{Key: []byte(k), Value: []byte("v")} }

func TestRouteByField(t *testing.T) {
	recs := []sdktest.Record{
		val(`{"type":"click"}`), val(`{"type":"view","x":1}`), val(`{"type":"cl\u0069ck"}`),
		val(`{"type":"scroll"}`), val(`{"other":1}`), val(`{"type":{"a":1}}`), val(`{"type":1}`),
		val(`{"type":true}`), val(`not json`), {Key: []byte("k")},
	}
	const routes = `"routes":{"click":"clicks","view":"views","1":"clicks","true":"views"}`
	for cfg, want := range map[string]string{
		`{"by":"field","field":"type",` + routes + `,"default":"other"}`:                   "clicks,views,clicks,other,other,other,clicks,views,other,other",
		`{"field":"type",` + routes + `}`:                                                  "clicks,views,clicks,,,,clicks,views,,",
		`{"field":"type",` + routes + `,"default":"other","invalid_output":"bad"}`:         "clicks,views,clicks,other,other,other,clicks,views,bad,bad",
		`{"field":"type",` + routes + `,"invalid_output":"bad"}`:                           "clicks,views,clicks,,,,clicks,views,bad,bad",
		`{"by":"field","field":"meta.kind","routes":{"click":"clicks"},"default":"other"}`: "other,other,other,other,other,other,other,other,other,other",
	} {
		if got := route(t, cfg, recs...); got != want {
			t.Errorf("%s:\n got  %s\n want %s", cfg, got, want)
		}
	}
	nested := route(t, `{"field":"meta.kind","routes":{"click":"clicks"}}`, val(`{"meta":{"kind":"click"}}`))
	if nested != "clicks" {
		t.Errorf("nested field: %s", nested)
	}
}

func TestRouteByKeyPrefix(t *testing.T) {
	cfg := `{"by":"key_prefix","routes":{"user-":"users","user-admin-":"admins","":"other"}}`
	got := route(t, cfg, key("user-1"), key("user-admin-2"), key("order-3"), sdktest.Record{Value: []byte("null key")})
	// "" matches every non-null key; the longest prefix wins; a null key
	// matches no prefix and there is no default.
	if got != "users,admins,other," {
		t.Fatalf("got %s", got)
	}
	got = route(t, `{"by":"key_prefix","routes":{"user-":"users"},"default":"other"}`, key("user-1"), key("x"))
	if got != "users,other" {
		t.Fatalf("got %s", got)
	}
}

func TestRouteBadConfig(t *testing.T) {
	for cfg, want := range map[string]string{
		`{}`:                                     `route: config: "field": required`,
		`{"field":"type"}`:                       `route: config: "routes": required`,
		`{"field":"type","routes":{}}`:           `route: config: "routes": must have at least one route`,
		`{"field":"type","routes":[]}`:           `route: config: "routes": must be an object, got a list`,
		`{"field":"type","routes":{"a":1}}`:      `route: config: "routes.a": must be a string, got a number`,
		`{"by":"value","routes":{"a":"clicks"}}`: `route: config: "by": must be "field" or "key_prefix"; got "value"`,
		`{"field":"type","routes":{"a":"nope"}}`: `route: config: "routes.a": output "nope" is not declared by the processor`,
		`{"field":"type","routes":{"a":"clicks"},"default":"nope"}`:          `route: config: "default": output "nope" is not declared`,
		`{"by":"key_prefix","field":"x","routes":{"a":"clicks"}}`:            `route: config: "field": not used with by key_prefix`,
		`{"by":"key_prefix","routes":{"a":"clicks"},"invalid_output":"bad"}`: `route: config: "invalid_output": only used with by field`,
		`{"field":"type","routes":{"a":"clicks"},"defualt":"x"}`:             `route: config: unknown field "defualt"`,
	} {
		_, err := sdktest.Start(t, outputs, sdktest.Config(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s:\n got  %v\n want %s", cfg, err, want)
		}
	}
}
