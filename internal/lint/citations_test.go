package lint

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Comments and docs cite only what a clone has: a file of the repository,
// or a section of RATIONALE.md by its title. An issue number or a document
// that lives elsewhere means nothing to a reader of the code, and goes
// stale without anyone noticing; say what the number stood for instead.
var (
	// issueCite is a number in the project's tracker ("issue 27",
	// "issue #13", "Issue 29.7"). Other projects' issues are cited by their
	// project and a URL or a KAFKA- key, which this does not match.
	issueCite = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+`)
	// mdCite is a Markdown document named in the text.
	mdCite = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	// sectionCite is a section of RATIONALE.md cited by its title.
	sectionCite = regexp.MustCompile(`RATIONALE\.md,? "([^"]+)"`)
)

// citedIn are the tracked files whose text is checked: source, scripts,
// Makefiles and docs (not vendored packages, lock files or fixtures).
func citedIn(rel string) bool {
	if strings.Contains(rel, "node_modules/") || strings.HasPrefix(rel, ".ci/") {
		return false
	}
	switch filepath.Ext(rel) {
	case ".go", ".md", ".rs", ".c", ".h", ".ts", ".mjs", ".wat", ".sh", ".yaml", ".yml", ".toml", ".java":
		return true
	}
	return filepath.Base(rel) == "Makefile"
}

// TestCitationsResolve fails on a comment or doc that cites an issue
// number, a Markdown document the repository does not have, or a section
// of RATIONALE.md whose title is not in it.
func TestCitationsResolve(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (this test needs a git checkout)", root, err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	docs := map[string]bool{} // base names of the tracked Markdown files
	for _, rel := range files {
		if strings.HasSuffix(rel, ".md") {
			docs[path.Base(rel)] = true
		}
	}
	rationale, err := os.ReadFile(filepath.Join(root, "RATIONALE.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Titles are matched in the text with its emphasis and line breaks
	// taken out, so a bold lead sentence counts as a title too.
	flat := strings.Join(strings.Fields(strings.ReplaceAll(string(rationale), "*", "")), " ")

	for _, rel := range files {
		if !citedIn(rel) {
			continue
		}
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			continue // deleted in the work tree
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if m := issueCite.FindString(line); m != "" {
				t.Errorf("%s:%d: cites %q, a number in a tracker a clone does not have; say what it stood for", rel, n, m)
			}
			for _, m := range mdCite.FindAllString(line, -1) {
				if strings.Contains(line, "://") {
					break // a URL: another project's document
				}
				if !docs[path.Base(m)] {
					t.Errorf("%s:%d: cites %s, which is not in the repository", rel, n, m)
				}
			}
			for _, m := range sectionCite.FindAllStringSubmatch(line, -1) {
				if !strings.Contains(flat, m[1]) {
					t.Errorf("%s:%d: cites RATIONALE.md %q, a title RATIONALE.md does not have", rel, n, m[1])
				}
			}
		}
		f.Close()
	}
}
