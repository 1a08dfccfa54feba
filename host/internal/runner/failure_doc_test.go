package runner

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The failure kinds the docs list are the code's: docs/design.md section 7
// has one row per kind, and the dead-letter header's row of
// docs/operations.md names every one.
func TestFailureKindsDocumented(t *testing.T) {
	var code []string
	for k := FailureKind(0); k < numFailureKinds; k++ {
		code = append(code, k.String())
	}
	slices.Sort(code)

	design, err := os.ReadFile("../../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(design), "## 7. Failure kinds")
	if !ok {
		t.Fatal("docs/design.md has no section 7, Failure kinds")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if !slices.Equal(listed, code) {
		t.Errorf("docs/design.md section 7 lists %v; the code's kinds are %v", listed, code)
	}

	ops, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(ops), "\n") {
		if strings.HasPrefix(line, "| `"+HeaderErrorKind+"` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatalf("docs/operations.md has no row for the %s header", HeaderErrorKind)
	}
	for _, k := range code {
		if !regexp.MustCompile(`\b` + k + `\b`).MatchString(row) {
			t.Errorf("docs/operations.md's %s row does not name %q", HeaderErrorKind, k)
		}
	}
}
