package scaffold

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The Go SDK is the non-test Go files of sdk/ and package abi, under their
// import paths, with a go.mod of the wasmstream module: no tests, no test
// data, no other language's files, no abi helper packages.
func TestGoSDKFiles(t *testing.T) {
	src := fstest.MapFS{
		"go.mod":                    {Data: []byte("module " + Module + "\n\ngo 1.99.1\n")},
		"abi/abi.go":                {Data: []byte("package abi")},
		"abi/abi_test.go":           {Data: []byte("package abi")},
		"abi/abitest/vectors.go":    {Data: []byte("package abitest")},
		"abi/testdata/records.json": {Data: []byte("[]")},
		"sdk/sdk.go":                {Data: []byte("package sdk")},
		"sdk/sdk_test.go":           {Data: []byte("package sdk")},
		"sdk/window/window.go":      {Data: []byte("package window")},
		"sdk/internal/guest/g.go":   {Data: []byte("package guest")},
		"sdk/rust/src/lib.rs":       {Data: []byte("")},
		"sdk/c/wasmstream.h":        {Data: []byte("")},
		"sdk/x/testdata/t.go":       {Data: []byte("package t")},
	}
	files, err := goSDK(src)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(files))
	want := "abi/abi.go go.mod sdk/internal/guest/g.go sdk/sdk.go sdk/window/window.go"
	if strings.Join(got, " ") != want {
		t.Errorf("Go SDK files %v, want %s", got, want)
	}
	if string(files["go.mod"]) != "module "+Module+"\n\ngo 1.99.1\n" {
		t.Errorf("go.mod %q", files["go.mod"])
	}
}

// Detect tells a project's language by its marker, and names the paths it
// looked at when it cannot.
func TestDetect(t *testing.T) {
	for _, l := range Langs {
		dir := t.TempDir()
		for _, f := range []string{l.Marker, "Makefile", SDKDir + "/README.md"} {
			p := filepath.Join(dir, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := Detect(dir); err != nil || got != l {
			t.Errorf("%s project: Detect = %v, %v", l.Name, got, err)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, SDKDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(dir); err == nil || !strings.Contains(err.Error(), "go.mod (go)") {
		t.Errorf("Detect of a project with no marker: %v", err)
	}
}
