package scaffold

import (
	"io/fs"
	"path"
	"strings"
)

var goLang = &Lang{
	Name:   "go",
	Title:  "Go",
	Files:  goFiles,
	SDK:    goSDK,
	Marker: "go.mod",
}

// goSDK is the Go SDK as a module of its own: the non-test Go files of
// sdk/ and of abi/ (which the SDK imports) under their import paths, and a
// go.mod naming the wasmstream module. The project's go.mod replaces the
// wasmstream module with this directory; the SDK needs only the standard
// library, so no other module is fetched.
func goSDK(src fs.FS) (map[string][]byte, error) {
	isGo := func(p string) bool { return strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") }
	files, err := copyTree(src, "sdk", "sdk", func(p string, d fs.DirEntry) bool {
		if d.IsDir() { // the Rust and C SDKs, and test data, are not Go packages
			return p != "sdk/rust" && p != "sdk/c" && d.Name() != "testdata"
		}
		return isGo(p)
	})
	if err != nil {
		return nil, err
	}
	abi, err := copyTree(src, "abi", "abi", func(p string, d fs.DirEntry) bool {
		return !d.IsDir() && isGo(p) && path.Dir(p) == "abi" // package abi only
	})
	if err != nil {
		return nil, err
	}
	for p, b := range abi {
		files[p] = b
	}
	files["go.mod"] = []byte("module " + Module + "\n\ngo " + goVersion(src) + "\n")
	return files, nil
}

var goFiles = map[string]string{
	"go.mod": `module [[.Name]]

go [[.GoVersion]]

require github.com/wasmstream/wasmstream v0.0.0-00010101000000-000000000000

// The wasmstream SDK (packages sdk and abi; standard library only), vendored
// in ./[[.SDKDir]] by wasmstream init. "wasmstream init --update-sdk" replaces
// it with the SDK of the wasmstream binary that runs it.
replace github.com/wasmstream/wasmstream => ./[[.SDKDir]]
`,
	"main.go": `// Command [[.Name]] is a wasmstream processor: it uppercases each record's
// value, counts the records seen per key in the store "seen", and emits the
// result to the output "out" with the count in a header "seen".
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

var (
	out  = sdk.Output("out")
	seen = sdk.Store("seen")
	// prefix is prepended to every value; from the config's "prefix".
	prefix []byte
	value  []byte
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	if err := out.Check(); err != nil {
		return err
	}
	if err := seen.Check(); err != nil {
		return err
	}
	prefix = configString(sdk.Config(), "prefix")
	return nil
}

// configString finds "key": "value" in the config (no escapes); nil if absent.
func configString(cfg []byte, key string) []byte {
	i := bytes.Index(cfg, []byte("\""+key+"\":"))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(cfg[i+len(key)+3:], " ")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return nil
	}
	return append([]byte(nil), rest[1:1+end]...)
}

func process(r *sdk.Record) error {
	if r.Value == nil {
		return errors.New("[[.Name]]: a tombstone has no value to process")
	}
	n := uint64(0)
	if v, ok, err := seen.Get(r.Key); err != nil {
		return err
	} else if ok {
		n, _ = strconv.ParseUint(string(v), 10, 64)
	}
	n++
	count := strconv.AppendUint(nil, n, 10)
	if err := seen.Put(r.Key, count); err != nil {
		return err
	}
	// Scratch reused across records: the emitted value (Emit copies it).
	value = append(value[:0], prefix...)
	for _, c := range r.Value {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		value = append(value, c)
	}
	return out.Emit(sdk.Out{Key: r.Key, Value: value, Headers: []sdk.Header{{Key: "seen", Value: count}}})
}

func main() {}
`,
	"main_test.go": `package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

func TestProcess(t *testing.T) {
	h := sdktest.New(t, sdktest.Outputs("out"), sdktest.Stores("seen"), sdktest.Config(` + "`" + `{"prefix":"> "}` + "`" + `))
	for i, want := range []string{"1", "2"} {
		res := h.Process(sdktest.Record{Key: []byte("k"), Value: []byte("hello")})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		e := res.Emitted["out"]
		if len(e) != 1 || string(e[0].Value) != "> HELLO" || string(e[0].Headers[0].Value) != want {
			t.Fatalf("record %d: emitted %+v", i, e)
		}
	}
	if res := h.Process(sdktest.Record{Key: []byte("k")}); res.Err == nil {
		t.Fatal("a tombstone was accepted")
	}
}
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test). The SDK is
# in [[.SDKDir]]/ (go.mod replaces the wasmstream module with it): nothing
# is downloaded.
GO ?= go

[[.Ident]].wasm: $(wildcard *.go) go.mod $(shell find [[.SDKDir]] -name '*.go')
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ .

.PHONY: test
test:
	$(GO) test ./...
`,
	".gitignore": "*.wasm\nwasmstream-state/\n",
}
