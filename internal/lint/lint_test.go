package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/wasmstream/wasmstream"

// pkg is the part of `go list -json` these rules read.
type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	Imports    []string
	Error      *struct{ Err string }
}

// list runs `go list -e -deps -json` for patterns in the module root with
// the extra environment, and returns every package by import path.
func list(t *testing.T, env []string, patterns ...string) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-json"}, patterns...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr.String())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// rule is who may be imported by the non-test files of the packages under
// a directory of the module.
type rule struct {
	under string   // module-relative directory, such as "sdk"
	allow []string // module packages allowed besides the standard library; "x/..." allows the tree
	deny  []string // standard packages not allowed either; "x/..." denies the tree
	why   string
}

var rules = []rule{
	{under: "abi", allow: []string{"abi/..."},
		why: "abi/ is the contract every host and SDK shares: standard library only (docs/design.md section 2)"},
	{under: "sdk", allow: []string{"abi", "sdk/..."},
		why: "the SDK imports only the standard library and abi/ (docs/design.md section 2: every plugin links it, so it must carry no weight)"},
	{under: "plugins", allow: []string{"abi", "sdk", "sdk/timer", "sdk/window", "sdk/join", "plugins/..."},
		why: "plugins link the SDK and their shared helpers only; never sdk/sdktest (testing) or the host"},
}

// wasmWeight is what a plugin must not link through the SDK: each of these
// adds hundreds of KB to every .wasm (measured: encoding/json +1.4 MB)
// or is useless in the sandbox (os, net, log).
var wasmWeight = []string{"fmt", "encoding/json", "encoding/gob", "os", "log", "log/slog", "net/...",
	"text/template", "html/template", "crypto/..."}

func matches(path string, patterns []string) bool {
	for _, p := range patterns {
		if tree, ok := strings.CutSuffix(p, "/..."); ok {
			if path == tree || strings.HasPrefix(path, tree+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func TestImports(t *testing.T) {
	// Both builds: the SDK's Wasm imports and its native stub are in
	// different files.
	for _, env := range [][]string{nil, {"GOOS=wasip1", "GOARCH=wasm"}} {
		build := "native"
		if env != nil {
			build = "wasip1"
		}
		pkgs := list(t, env, module+"/abi/...", module+"/sdk/...", module+"/plugins/...")
		for _, r := range rules {
			checked := 0
			for path, p := range pkgs {
				if p.Standard || !matches(rel(path), []string{r.under + "/..."}) {
					continue
				}
				checked++
				consult(p)
				for _, imp := range p.Imports {
					dep := pkgs[imp]
					allowed := (dep != nil && dep.Standard && !matches(imp, r.deny)) ||
						(strings.HasPrefix(imp, module+"/") && matches(rel(imp), r.allow))
					if !allowed {
						t.Errorf("%s build: %s imports %q (in %s): %s", build, rel(path), imp, where(p, imp), r.why)
					}
				}
			}
			if checked == 0 {
				t.Errorf("%s build: no packages under %s/ checked: the rule is stale", build, r.under)
			}
		}
	}
}

// What a plugin links through the SDK on wasip1 stays light.
func TestSDKWasmWeight(t *testing.T) {
	pkgs := list(t, []string{"GOOS=wasip1", "GOARCH=wasm"}, module+"/sdk", module+"/sdk/timer", module+"/sdk/window", module+"/sdk/join")
	for path := range pkgs {
		if matches(path, wasmWeight) {
			t.Errorf("sdk links %s on wasip1 (every plugin pays for it in size and instantiation time)", path)
		}
	}
}

// consult reads the package's directory and Go files in this process. go
// test caches a result until a file the test process consulted changes;
// go list reads them in a subprocess, so without this an added import
// would not rerun the test.
func consult(p *pkg) {
	os.ReadDir(p.Dir)
	for _, f := range p.GoFiles {
		os.ReadFile(filepath.Join(p.Dir, f))
	}
}

// where names the file of p that imports imp, for the error message.
func where(p *pkg, imp string) string {
	for _, f := range p.GoFiles {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, s := range file.Imports {
			if path, _ := strconv.Unquote(s.Path.Value); path == imp {
				return rel(p.ImportPath) + "/" + f
			}
		}
	}
	return "?"
}
