package lint

import (
	"bufio"
	"os"
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
	// issueCite is a number in the project's tracker: the word issue,
	// then the number, with or without a #. Other projects' issues are cited by their
	// project and a URL or a KAFKA- key, which this does not match.
	issueCite = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+`)
	// mdCite is a Markdown document named in the text.
	mdCite = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	// sectionCite is a section of RATIONALE.md cited by its title.
	sectionCite = regexp.MustCompile(`RATIONALE\.md(?:\]\([^)]*\))?,? "([^"]+)"`)
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

// commentText is a line without its indentation and comment marker (//,
// #, *, ;;, //!, --), as it reads when joined to the line before.
func commentText(line string) string {
	line = strings.TrimSpace(line)
	for _, p := range []string{"//!", "///", "//", ";;", "#", "*", "--"} {
		if strings.HasPrefix(line, p) {
			return strings.TrimSpace(line[len(p):])
		}
	}
	return line
}

// TestCitationsResolve fails on a comment or doc that cites an issue
// number, a Markdown document the repository does not have, or a section
// of RATIONALE.md whose title is not in it.
func TestCitationsResolve(t *testing.T) {
	root := moduleRoot(t)
	files := trackedFiles(t, root)
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
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		for i, line := range lines {
			n := i + 1
			// A citation may run onto the next line: it is looked for in
			// the line joined with the next one's text, and reported
			// where it begins.
			joined := line
			if i+1 < len(lines) {
				joined += " " + commentText(lines[i+1])
			}
			for _, loc := range issueCite.FindAllStringIndex(joined, -1) {
				if loc[0] < len(line) {
					t.Errorf("%s:%d: cites %q, a number in a tracker a clone does not have; say what it stood for", rel, n, joined[loc[0]:loc[1]])
				}
			}
			for _, m := range mdCite.FindAllString(line, -1) {
				if strings.Contains(line, "://") {
					break // a URL: another project's document
				}
				if !docs[path.Base(m)] {
					t.Errorf("%s:%d: cites %s, which is not in the repository", rel, n, m)
				}
			}
			for _, loc := range sectionCite.FindAllStringSubmatchIndex(joined, -1) {
				if title := joined[loc[2]:loc[3]]; loc[0] < len(line) && !strings.Contains(flat, title) {
					t.Errorf("%s:%d: cites RATIONALE.md %q, a title RATIONALE.md does not have", rel, n, title)
				}
			}
		}
		f.Close()
	}
}
