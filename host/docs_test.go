package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// TestDeadLetterDocs: docs/operations.md names the dead-letter topic as
// the host does and lists every header the host puts on a dead letter.
func TestDeadLetterDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := Config{AppID: "<app_id>"}
	if topic := c.DeadLetterTopic(&ProcessorConfig{Name: "<processor>"}); !strings.Contains(string(doc), "**`"+topic+"`**") {
		t.Errorf("docs/operations.md does not name the dead-letter topic %s", topic)
	}
	for _, h := range []string{runner.HeaderErrorKind, runner.HeaderError, runner.HeaderProcessor, runner.HeaderSourceTopic,
		runner.HeaderSourcePart, runner.HeaderSourceOff, runner.HeaderSourceTime, runner.HeaderVersion} {
		if !strings.Contains(string(doc), "| `"+h+"` |") {
			t.Errorf("docs/operations.md does not list the dead-letter header %s", h)
		}
	}
}
