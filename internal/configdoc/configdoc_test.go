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
		"### `processors[].limits.memory`\n\ntype: size · default: `64MiB` · env: `WASMSTREAM_PROCESSORS__<i>__LIMITS__MEMORY`",
		"### `guarantee`\n\ntype: one of `exactly_once`, `at_least_once` · default: `exactly_once` · env: `WASMSTREAM_GUARANTEE`",
		"### `swap.canary_window`\n\ntype: duration · default: `1m` · env: `WASMSTREAM_SWAP__CANARY_WINDOW`",
		"### `swap.max_failure_ratio`\n\ntype: number · default: `0.01`",
		"### `processors[].outputs.<output>.emit`\n\ntype: one of `each`, `latest_per_key` · default: `each` · env: `WASMSTREAM_PROCESSORS__<i>__OUTPUTS__<OUTPUT>__EMIT`",
		"### `processors[].expire.<store>.clock`",
		"### `log.level`\n\ntype: one of `debug`, `info`, `warn`, `error` · default: `info` · env: `WASMSTREAM_LOG__LEVEL` · flag: `--log-level`",
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

// A comment that does not state the default ApplyDefaults sets fails the
// generation, naming the field: the reference's defaults cannot drift
// from the code's.
func TestGenerateChecksStatedDefaults(t *testing.T) {
	src := filepath.Join("..", "..", "host")
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "config.go" {
			old := "processed record waits before its offset is committed. Default 100ms."
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("config.go no longer says %q: update this test", old)
			}
			b = bytes.Replace(b, []byte(old), []byte("processed record waits before its offset is committed. Default 1s."), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Generate(dir)
	if err == nil || !strings.Contains(err.Error(), "kafka.commit_interval: the comment does not state the default 100ms") {
		t.Fatalf("Generate = %v, want the stale default of kafka.commit_interval named", err)
	}
}
