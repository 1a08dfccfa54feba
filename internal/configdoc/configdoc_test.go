package configdoc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigReferenceUpToDate: docs/config.md is what the doc comments of
// host.Config make now. When it fails, run `go generate ./host/` (or
// `make docs`) and commit docs/config.md.
func TestConfigReferenceUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := Generate(filepath.Join(root, "host"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/config.md is stale: run `go generate ./host/` (or `make docs`) and commit it")
	}
}

// TestGenerateCoversConfig: every field family an operator sets is in the
// reference with its environment variable, nested structs and lists
// included, and a field sharing its neighbour's comment gets that comment.
func TestGenerateCoversConfig(t *testing.T) {
	doc, err := Generate(filepath.Join("..", "..", "host"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### `app_id`\n\ntype: string · env: `WASMSTREAM_APP_ID` · flag: `--app-id`",
		"### `kafka.tls.ca_file`",
		"### `kafka.sasl.password`\n\ntype: secret · env: `WASMSTREAM_KAFKA__SASL__PASSWORD`",
		"### `processors[].limits.memory`\n\ntype: size · env: `WASMSTREAM_PROCESSORS__<i>__LIMITS__MEMORY`",
		"### `state.sync_interval`\n\ntype: duration",
		"### `log.format`",
		"### `kafka.tls.key_file`\n\ntype: string · env: `WASMSTREAM_KAFKA__TLS__KEY_FILE`\n\nCertFile and KeyFile",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	if strings.Contains(string(doc), "canaryWindowSet") {
		t.Error("an unexported field is in the reference")
	}
}
