package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// testPipeline is a word count through a repartition topic with plugins
// in two languages other than Go: wasmstream test runs whatever .wasm the
// config names.
const testPipeline = `app_id: words
processors:
  - name: split
    plugin: split.wasm        # C
    inputs: [lines]
    repartition: [words]
  - name: count
    plugin: wordcount.wasm    # Rust
    inputs: [split.words]
    outputs: {counts: word-counts}
    stores: [counts]
`

const testCases = `cases:
  - name: counts across the repartition topic
    steps:
      - pipe: {topic: lines, records: [{key: l1, value: "the cat the", timestamp: 1s}]}
      - expect: {outputs: {word-counts: []}}
      - commit
      - expect:
          outputs:
            word-counts: [{key: the, value: "1"}, {key: cat, value: "1"}, {key: the, value: "2"}]
          stores:
            count: {counts: [{key: cat, value_hex: "0000000000000001"}, {key: the, value_hex: "0000000000000002"}]}
  - name: each case starts empty
    steps:
      - pipe: {topic: lines, records: [{key: l1, value: "cat"}]}
      - commit
      - expect: {outputs: {word-counts: [{key: cat, value: "1"}]}}
`

const testFailing = `cases:
  - name: a count that is wrong
    steps:
      - pipe: {topic: lines, records: [{key: l1, value: "the the"}]}
      - commit
      - expect: {outputs: {word-counts: [{key: the, value: "1"}, {key: the, value: "3"}]}}
`

// TestTestCommand runs YAML cases end to end: exit 0 and a line per case
// when they pass; exit 1 and a diff of the output when one fails; exit 2
// on a bad command line.
func TestTestCommand(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"pipeline.yaml": []byte(testPipeline), "cases.yaml": []byte(testCases), "failing.yaml": []byte(testFailing)}
	for name, lang := range map[string]string{"split": "c", "wordcount": "rust"} {
		b, err := os.ReadFile(polybuild.Plugin(t, lang, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name+".wasm"] = b
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pipeline := filepath.Join(dir, "pipeline.yaml")
	code, out, errs := runCLI(t, "test", pipeline, filepath.Join(dir, "cases.yaml"))
	if code != exitOK || !strings.Contains(out, "ok   counts across the repartition topic\nok   each case starts empty\nok: 2 cases\n") {
		t.Errorf("passing cases: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "test", pipeline, filepath.Join(dir, "failing.yaml"))
	want := `FAIL a count that is wrong
    steps[2] (expect): output word-counts (- want, + got):
      key="the" value="1"
    - key="the" value="3"
    + key="the" value="2"
FAIL: 1 of 1 cases
`
	if code != exitError || !strings.HasSuffix(out, want) {
		t.Errorf("failing case: exit %d\nstdout:\n%s\nwant it to end with:\n%s\nstderr:\n%s", code, out, want, errs)
	}
	if code, _, errs := runCLI(t, "test", pipeline); code != exitUsage || !strings.Contains(errs, "usage: wasmstream test pipeline.yaml CASES.yaml") {
		t.Errorf("test without cases: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "test", pipeline, filepath.Join(dir, "nothere.yaml")); code != exitError || !strings.Contains(errs, "nothere.yaml") {
		t.Errorf("a missing cases file: exit %d, %q", code, errs)
	}
}
