package jsonx

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var docs = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e10`, `-12.25E-3`, `"a"`, `""`,
	` {"a" : [1, 2, {"b": null}], "c": "\u00e9\n\"x\"\\/" } `,
	`{"a":1,"a":2}`, `[[[[]]]]`, `"\ud83d\ude00"`, `"\ud800x"`, `"\udc00"`, "\"caf\xe9\"",
	// invalid
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`,
	`tru`, `nul`, `"abc`, `"\x"`, `"\u12g4"`, "\"a\x01\"", `[1 2]`, `1 2`, `{"a":1}}`, `NaN`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, d := range docs {
		if got, want := Valid([]byte(d)), json.Valid([]byte(d)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", d, got, want)
		}
	}
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, d := range append(docs, `1e400`, `{"x":[1,"2",true,null,{"y":{}}]}`) {
		checkDecode(t, []byte(d))
	}
}

func checkDecode(t *testing.T, d []byte) {
	t.Helper()
	var want any
	wantErr := json.Unmarshal(d, &want)
	got, err := Decode(d)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("Decode(%q) error %v, encoding/json error %v", d, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %#v, encoding/json gives %#v", d, got, want)
	}
}

func FuzzDecode(f *testing.F) {
	for _, d := range docs {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		if strings.Count(string(d), "[")+strings.Count(string(d), "{") >= MaxDepth {
			t.Skip("beyond MaxDepth, where the two limits differ")
		}
		if got, want := Valid(d), json.Valid(d); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", d, got, want)
		}
		checkDecode(t, d)
	})
}

func TestMaxDepth(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	deep := "[" + ok + "]"
	if !Valid([]byte(ok)) || Valid([]byte(deep)) {
		t.Fatalf("depth %d must be valid, %d invalid", MaxDepth, MaxDepth+1)
	}
	if _, err := Decode([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Fatalf("Decode of a too-deep document = %v", err)
	}
}

func TestUnquoteAndQuote(t *testing.T) {
	for _, tok := range []string{`""`, `"abc"`, `"\u00e9\n\t\"\\\/\b\f\r"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"\xff\xfe\""} {
		var want string
		if err := json.Unmarshal([]byte(tok), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := Unquote([]byte(tok))
		if !ok || got != want {
			t.Errorf("Unquote(%s) = %q %v, want %q", tok, got, ok, want)
		}
	}
	for _, bad := range []string{``, `"`, `abc`, `"a"b`, `"\q"`} {
		if _, ok := Unquote([]byte(bad)); ok {
			t.Errorf("Unquote(%q) accepted", bad)
		}
	}
	for _, s := range []string{"", "plain", "quote\" backslash\\ nl\n cr\r tab\t nul\x00 \x1f", "é😀", "bad\xffutf8"} {
		q := AppendQuote(nil, s)
		var back string
		if err := json.Unmarshal(q, &back); err != nil {
			t.Fatalf("AppendQuote(%q) = %s: %v", s, q, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Errorf("AppendQuote(%q) round trip = %q, want %q", s, back, want)
		}
		if !utf8.Valid(q) {
			t.Errorf("AppendQuote(%q) is not valid UTF-8", s)
		}
	}
}

func TestParsePath(t *testing.T) {
	p, err := ParsePath("user.address.0.city")
	if err != nil || len(p) != 4 || p[2] != "0" || p.String() != "user.address.0.city" {
		t.Fatalf("ParsePath = %q, %v", p, err)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
}

func findAll(t *testing.T, doc, path string) ([]string, bool) {
	t.Helper()
	p, err := ParsePath(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	ok := Find([]byte(doc), p, func(s, e int) { got = append(got, doc[s:e]) })
	return got, ok
}

func TestFind(t *testing.T) {
	doc := ` {"user": {"name": "Ann", "country": "NL", "tags": ["a", {"k": 1}], "n\u0061me2": 2},
		"items": [{"email": "a@x"}, {"email": "b@x"}, {"other": 1}], "dup": 1, "dup": [2] } `
	for path, want := range map[string][]string{
		"user.country":  {`"NL"`},
		"user":          {`{"name": "Ann", "country": "NL", "tags": ["a", {"k": 1}], "n\u0061me2": 2}`},
		"user.tags.1.k": {`1`},
		"user.tags.0":   {`"a"`},
		"user.tags.2":   nil,
		"user.name2":    {`2`}, // escaped key
		"items.*.email": {`"a@x"`, `"b@x"`},
		"items.1.email": {`"b@x"`},
		"dup":           {`1`, `[2]`},
		"user.name.x":   nil, // through a string
		"missing":       nil,
		"user.*":        {`"Ann"`, `"NL"`, `["a", {"k": 1}]`, `2`},
	} {
		got, ok := findAll(t, doc, path)
		if !ok || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Find(%s) = %q ok=%v, want %q", path, got, ok, want)
		}
	}
	raw, found, valid := Lookup([]byte(doc), Path{"dup"})
	if !found || !valid || string(raw) != `[2]` {
		t.Errorf("Lookup(dup) = %s %v %v; the last duplicate wins", raw, found, valid)
	}
	for _, bad := range []string{`{"a": 1`, `{"a": 1} x`, `not json`, ``} {
		if _, ok := findAll(t, bad, "a"); ok {
			t.Errorf("Find on %q reported valid", bad)
		}
		if _, found, valid := Lookup([]byte(bad), Path{"a"}); found || valid {
			t.Errorf("Lookup on %q = found %v valid %v", bad, found, valid)
		}
	}
}

func TestKindOf(t *testing.T) {
	for raw, want := range map[string]Kind{`null`: Null, `true`: Bool, `false`: Bool, `-1`: Number, `0.5`: Number,
		`"s"`: String, `{}`: Object, `[]`: Array, ``: Invalid, `x`: Invalid} {
		if got := KindOf([]byte(raw)); got != want {
			t.Errorf("KindOf(%q) = %d, want %d", raw, got, want)
		}
	}
}

func TestFindDoesNotAllocate(t *testing.T) {
	doc := []byte(`{"user": {"name": "Ann", "country": "NL"}, "items": [1, 2, 3]}`)
	p := Path{"user", "country"}
	n := testing.AllocsPerRun(100, func() { Lookup(doc, p) })
	if n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}
