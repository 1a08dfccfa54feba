package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fileMaps are the packages whose doc.go maps each of their files to what
// it owns (a line "//\tname.go  what it holds"), for a reader walking a
// record's path through them.
var fileMaps = []string{"host/internal/runner"}

var fileMapLine = regexp.MustCompile(`^//\t([a-z0-9_]+\.go)\s`)

// TestFileMaps: the file map in a package's doc.go names every non-test Go
// file of the package and no file that is gone, so a file added or
// removed without updating the map fails here.
func TestFileMaps(t *testing.T) {
	root := moduleRoot(t)
	for _, pkg := range fileMaps {
		doc, err := os.ReadFile(filepath.Join(root, pkg, "doc.go"))
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		var mapped []string
		for _, line := range strings.Split(string(doc), "\n") {
			if m := fileMapLine.FindStringSubmatch(line); m != nil {
				mapped = append(mapped, m[1])
			}
		}
		if len(mapped) == 0 {
			t.Errorf("%s/doc.go has no file map (lines \"//\\tname.go  ...\"): the entry in fileMaps is stale", pkg)
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
				continue
			}
			if !slices.Contains(mapped, name) {
				t.Errorf("%s/doc.go's file map does not name %s: add a line saying what it owns", pkg, name)
			}
		}
		for _, name := range mapped {
			if _, err := os.Stat(filepath.Join(root, pkg, name)); err != nil {
				t.Errorf("%s/doc.go's file map names %s, which is not in the package: remove or rename its line", pkg, name)
			}
		}
	}
}
