// Package scaffold is `wasmstream init`: it writes a processor project in
// one of the SDK languages, with that language's SDK vendored into the
// project (SDKDir), so the project builds offline anywhere with only the
// language's toolchain, and names no path outside itself.
//
// A language is a Lang in Langs: its project files (templates), the SDK
// files it vendors and how to recognize one of its projects. Adding a
// language is one more Lang and its templates (lang_ts.go was one);
// nothing else here changes.
package scaffold

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"
)

// SDKDir is the directory of a project that holds its copy of the SDK.
// The project's build refers to it by this relative path only.
const SDKDir = "wasmstream-sdk"

// Module is the Go module path of the wasmstream repository, which the Go
// SDK's import paths start with.
const Module = "github.com/wasmstream/wasmstream"

// Lang is a language a project can be written in.
type Lang struct {
	// Name is the value of --lang.
	Name string
	// Title names the language and its SDK in messages.
	Title string
	// Files are the project's own files: text/template sources with [[ ]]
	// delimiters (data: Name, Ident, GoVersion, SDKDir) by path, where
	// NAME in a path becomes the project's identifier.
	Files map[string]string
	// SDK returns the files of the language's SDK, read from src (a tree
	// laid out as the repository: sdk/..., abi/..., go.mod), by path
	// relative to SDKDir.
	SDK func(src fs.FS) (map[string][]byte, error)
	// Marker is a file (path relative to the project) that only a project
	// of this language has; it recognizes one for --update-sdk.
	Marker string
}

// Langs are the languages, in the order help lists them.
var Langs = []*Lang{goLang, rustLang, cLang, tsLang}

// Find returns the language named name, or nil.
func Find(name string) *Lang {
	for _, l := range Langs {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// Names lists the languages: "go, rust or c".
func Names() string {
	var n []string
	for _, l := range Langs {
		n = append(n, l.Name)
	}
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// ProjectName is what a project's name may be: it becomes a Go module
// path, a Rust crate, a C file, a processor name and topic names.
var ProjectName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// Source is where the SDK files come from.
type Source struct {
	// FS is laid out as the repository: sdk/..., abi/..., go.mod.
	FS fs.FS
	// From says where that is, for the README of SDKDir and messages:
	// "wasmstream v1.2.0 (commit abc)" or a checkout's directory.
	From string
}

// Render returns every file of a new project named name in lang, by path
// relative to the project directory: its own files and the SDK's under
// SDKDir.
func Render(name string, lang *Lang, src Source) (map[string][]byte, error) {
	if !ProjectName.MatchString(name) {
		return nil, fmt.Errorf("name %q: use lowercase letters, digits, - and _, starting with a letter", name)
	}
	data := struct {
		Name, Ident, GoVersion, SDKDir string
	}{name, strings.ReplaceAll(name, "-", "_"), goVersion(src.FS), SDKDir}
	files := map[string][]byte{}
	own := map[string]string{"pipeline.yaml": pipelineTemplate, "cases.yaml": casesTemplate}
	for k, v := range lang.Files {
		own[k] = v
	}
	for p, text := range own {
		p = strings.ReplaceAll(p, "NAME", data.Ident)
		t, err := template.New(p).Delims("[[", "]]").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		files[p] = b.Bytes()
	}
	sdk, err := sdkFiles(lang, src)
	if err != nil {
		return nil, err
	}
	for p, b := range sdk {
		files[path.Join(SDKDir, p)] = b
	}
	return files, nil
}

// sdkFiles is lang's SDK from src, with the README that says where it
// came from and how to update it.
func sdkFiles(lang *Lang, src Source) (map[string][]byte, error) {
	files, err := lang.SDK(src.FS)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("the %s SDK has no files in %s", lang.Title, src.From)
	}
	files["README.md"] = []byte(fmt.Sprintf(`# The wasmstream SDK for %s, vendored

This directory is the %s SDK of %s, copied here by
wasmstream init so that the project builds offline, anywhere, with only
the %s toolchain. Keep it under version control with the project and do
not edit it.

To move the project to a newer SDK, run in the project directory:

    wasmstream init --update-sdk

with the wasmstream binary whose SDK you want: it replaces this directory
and nothing else.
`, lang.Title, lang.Title, src.From, lang.Title))
	return files, nil
}

// Write writes files under dir, which must not exist or be empty, so that
// init never overwrites anything.
func Write(dir string, files map[string][]byte) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		abs, _ := filepath.Abs(dir)
		return fmt.Errorf("%s exists and is not empty (init writes new projects only; --update-sdk replaces the SDK of an existing one)", abs)
	}
	return writeFiles(dir, files)
}

func writeFiles(dir string, files map[string][]byte) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, rel := range paths {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[rel], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Detect returns the language of the project in dir, by its marker file.
func Detect(dir string) (*Lang, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, SDKDir)); err != nil {
		return nil, fmt.Errorf("%s is not a project wasmstream init wrote: it has no %s/ directory (looked for %s)", abs, SDKDir, filepath.Join(abs, SDKDir))
	}
	var markers []string
	for _, l := range Langs {
		if _, err := os.Stat(filepath.Join(abs, l.Marker)); err == nil {
			return l, nil
		}
		markers = append(markers, l.Marker+" ("+l.Name+")")
	}
	return nil, fmt.Errorf("%s: cannot tell the project's language: none of %s is there", abs, strings.Join(markers, ", "))
}

// UpdateSDK replaces the SDK of the project in dir with src's, leaving
// every other file as it is. It returns the project's language.
func UpdateSDK(dir string, src Source) (*Lang, error) {
	lang, err := Detect(dir)
	if err != nil {
		return nil, err
	}
	files, err := sdkFiles(lang, src)
	if err != nil {
		return nil, err
	}
	// Write the new copy beside the old one, then swap them, so that a
	// failure leaves the old SDK in place.
	sdk := filepath.Join(dir, SDKDir)
	next, old := sdk+".new", sdk+".old"
	for _, d := range []string{next, old} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	if err := writeFiles(next, files); err != nil {
		_ = os.RemoveAll(next)
		return nil, err
	}
	if err := os.Rename(sdk, old); err != nil {
		_ = os.RemoveAll(next)
		return nil, err
	}
	if err := os.Rename(next, sdk); err != nil {
		_ = os.Rename(old, sdk)
		return nil, err
	}
	return lang, os.RemoveAll(old)
}

// Checkout is the SDK source of a wasmstream checkout: dir is its root or
// its sdk/ directory.
func Checkout(dir string) (Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, err
	}
	root := abs
	if !isCheckout(root) && isCheckout(filepath.Dir(abs)) && filepath.Base(abs) == "sdk" {
		root = filepath.Dir(abs)
	}
	if !isCheckout(root) {
		return Source{}, fmt.Errorf("%s is neither a wasmstream checkout nor its sdk/ directory (looked for %s declaring module %s, and for sdk/rust and sdk/c in it)",
			abs, filepath.Join(root, "go.mod"), Module)
	}
	return Source{FS: os.DirFS(root), From: "the checkout " + root}, nil
}

// isCheckout reports whether dir is the root of a wasmstream checkout.
func isCheckout(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "module "+Module {
			_, err1 := os.Stat(filepath.Join(dir, "sdk", "rust", "Cargo.toml"))
			_, err2 := os.Stat(filepath.Join(dir, "sdk", "c", "wasmstream.h"))
			return err1 == nil && err2 == nil
		}
	}
	return false
}

// goVersion is the go directive of the source's go.mod: a project needs
// at least the version the SDK declares.
func goVersion(src fs.FS) string {
	b, err := fs.ReadFile(src, "go.mod")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "1.26.0"
}

// copyTree returns the files under dir in src that keep says to, by path
// relative to dir with to prefixed.
func copyTree(src fs.FS, dir, to string, keep func(p string, d fs.DirEntry) bool) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(src, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && !keep(p, d) {
				return fs.SkipDir
			}
			return nil
		}
		if !keep(p, d) {
			return nil
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		out[path.Join(to, rel)] = b
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no %s in the SDK source: %w", dir, err)
	}
	return out, err
}
