package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by `make build` (-ldflags "-X main.version=... -X
// main.commit=..."); otherwise taken from the build info Go records: the
// module version for `go install ...@v1.2.3`, the VCS revision for a build
// in a git checkout.
var (
	version = ""
	commit  = ""
)

// buildInfo is what `wasmstream version` prints.
type buildInfo struct {
	Version, Commit, Go, Wazero, FranzGo string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version(), Wazero: "unknown", FranzGo: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if b.Version == "" && bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Commit != "" && commit == "" {
			b.Commit += " (modified)"
		}
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version + " (replaced)"
			}
			switch d.Path {
			case "github.com/tetratelabs/wazero":
				b.Wazero = v
			case "github.com/twmb/franz-go":
				b.FranzGo = v
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func (e *env) version(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "wasmstream version: takes no arguments (got %q)\n", args)
		return exitUsage
	}
	b := readBuildInfo()
	fmt.Fprintf(e.stdout, "wasmstream %s\ncommit:   %s\ngo:       %s %s/%s\nwazero:   %s\nfranz-go: %s\n",
		b.Version, b.Commit, b.Go, runtime.GOOS, runtime.GOARCH, b.Wazero, b.FranzGo)
	return exitOK
}
