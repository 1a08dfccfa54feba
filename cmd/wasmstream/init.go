package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wasmstream/wasmstream"
	"github.com/wasmstream/wasmstream/internal/scaffold"
)

// initUsage is the help of `wasmstream init`.
var initUsage = `usage: wasmstream init NAME --lang ` + langList("|") + ` [--dir DIR] [--sdk DIR]
       wasmstream init --update-sdk [--dir DIR] [--sdk DIR]

Writes a new processor project into DIR (default ./NAME): the processor, its
native test, a build file (Makefile), a pipeline.yaml that runs it, its test
cases (cases.yaml), and the
language's SDK in DIR/` + scaffold.SDKDir + `/, so the project builds offline on any
machine with only the language's toolchain and names no path outside itself.
Then:

  make test       the processor's native test (a fake host, no Kafka)
  make            the plugin, NAME.wasm (a "-" in NAME becomes "_")
  wasmstream validate -c pipeline.yaml
  wasmstream test pipeline.yaml cases.yaml    the whole pipeline, in process
  wasmstream run -c pipeline.yaml

TypeScript (AssemblyScript) needs node 20 or later and npm: the first make
installs the compiler the SDK pins (npm ci in DIR/` + scaffold.SDKDir + `/), from
npm's cache when it is there, else from the registry.

The SDK is the one built into this wasmstream binary; --sdk DIR (or
$WASMSTREAM_SDK) copies it from a wasmstream checkout instead: DIR is the
checkout's root or its sdk/ directory.

--update-sdk replaces the SDK of the existing project in DIR (default .)
with this binary's (or --sdk's), and changes nothing else: how a project
moves to a newer SDK.
`

// langList lists the languages init writes, separated by sep.
func langList(sep string) string {
	var names []string
	for _, l := range scaffold.Langs {
		names = append(names, l.Name)
	}
	return strings.Join(names, sep)
}

func (e *env) initProject(args []string) int {
	fs := e.flagSet("init")
	lang := fs.String("lang", "", "the project's language: "+scaffold.Names())
	dir := fs.String("dir", "", "directory to write (default ./NAME; must not exist or be empty); with --update-sdk the project's (default .)")
	sdk := fs.String("sdk", "", "copy the SDK from this wasmstream checkout (its root or its sdk/ directory) instead of the one built into wasmstream")
	update := fs.Bool("update-sdk", false, "replace the SDK of the project in --dir with this wasmstream's, and nothing else")
	if err := fs.Parse(args); err != nil {
		return e.flagError("init", err)
	}
	src, err := e.sdkSource(*sdk)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init: %v\n", err)
		return exitError
	}
	if *update {
		return e.updateSDK(fs.Args(), *dir, *lang, src)
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, initUsage)
		return exitUsage
	}
	l := scaffold.Find(*lang)
	switch {
	case *lang == "":
		fmt.Fprintf(e.stderr, "wasmstream init: --lang is required: %s (wasmstream init %s --lang go)\n", scaffold.Names(), fs.Arg(0))
		return exitUsage
	case l == nil:
		fmt.Fprintf(e.stderr, "wasmstream init: unknown --lang %q: the languages are %s\n", *lang, scaffold.Names())
		return exitUsage
	}
	name := fs.Arg(0)
	if !scaffold.ProjectName.MatchString(name) {
		fmt.Fprintf(e.stderr, "wasmstream init: name %q: use lowercase letters, digits, - and _, starting with a letter\n", name)
		return exitUsage
	}
	if *dir == "" {
		*dir = name
	}
	files, err := scaffold.Render(name, l, src)
	if err == nil {
		err = scaffold.Write(*dir, files)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.stdout, "wrote %s (%s; the SDK of %s in %s)\n"+
		"next: cd %s && make test && make && wasmstream validate -c pipeline.yaml && wasmstream test pipeline.yaml cases.yaml\n"+
		"then: wasmstream run -c pipeline.yaml (an embedded broker), and in another terminal\n"+
		"  printf 'k:hello\\n' | wasmstream topic produce %s-in -c pipeline.yaml -k :\n"+
		"  wasmstream topic consume %s-out -c pipeline.yaml --follow\n",
		*dir, l.Name, src.From, filepath.Join(*dir, scaffold.SDKDir), *dir, name, name)
	return exitOK
}

// updateSDK runs `wasmstream init --update-sdk`.
func (e *env) updateSDK(args []string, dir, lang string, src scaffold.Source) int {
	if len(args) > 0 || lang != "" {
		fmt.Fprintln(e.stderr, "wasmstream init --update-sdk: takes no NAME and no --lang (the project's language is found from its files); --dir names the project (default .)")
		return exitUsage
	}
	if dir == "" {
		dir = "."
	}
	l, err := scaffold.UpdateSDK(dir, src)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream init --update-sdk: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.stdout, "replaced %s with the %s SDK of %s\n", filepath.Join(dir, scaffold.SDKDir), l.Title, src.From)
	return exitOK
}

// sdkSource is where the SDK comes from: the checkout of --sdk or
// $WASMSTREAM_SDK, else the sources built into this binary.
func (e *env) sdkSource(flag string) (scaffold.Source, error) {
	for _, dir := range []string{flag, e.getenv("WASMSTREAM_SDK")} {
		if dir != "" {
			return scaffold.Checkout(dir)
		}
	}
	b := readBuildInfo()
	from := "wasmstream " + b.Version
	if b.Commit != "unknown" {
		from += " (commit " + b.Commit + ")"
	}
	return scaffold.Source{FS: wasmstream.SDK, From: from}, nil
}

func (e *env) getenv(key string) string {
	for _, kv := range e.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
