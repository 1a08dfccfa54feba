package conformance

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/abitest"
	"github.com/wasmstream/wasmstream/internal/polybuild"
)

// The bundled plugins written in Rust (plugins/rust), C (plugins/c) and
// TypeScript (plugins/ts) must do exactly what the Go ones
// (plugins/<name>) do: these tests run each language's module through the
// engine on the same records and compare every emitted record, failure
// and final store byte for byte.

var langs = []string{"go", "rust", "c", "ts"}

// splitLangs are the languages split exists in (no TypeScript split yet).
var splitLangs = []string{"go", "rust", "c"}

// pluginWasm builds plugin name in lang and returns the module.
func pluginWasm(t testing.TB, lang, name string) []byte {
	t.Helper()
	wasm, err := os.ReadFile(polybuild.Plugin(t, lang, name))
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// compareLangs runs records through plugin name in every language with
// binding b, one record at a time and in batches, and requires every
// transcript (and final store) of Go, Rust, C and TypeScript to equal Go's
// one at a time. It returns Go's steps for the caller's own checks.
func compareLangs(t *testing.T, name string, b binding, records []abi.Record) []step {
	t.Helper()
	return compareIn(t, langs, name, b, records)
}

// compareIn is compareLangs for the languages in which plugin name exists;
// the first must be "go".
func compareIn(t *testing.T, langs []string, name string, b binding, records []abi.Record) []step {
	t.Helper()
	var goSteps []step
	var want, wantState string
	for _, lang := range langs {
		for _, batched := range []bool{false, true} {
			p := start(t, name+"-"+lang, pluginWasm(t, lang, name), b)
			steps := []step{{name: "init", logs: p.initLogs}}
			if batched {
				steps = append(steps, p.batched(t, records)...)
			} else {
				for i, r := range records {
					steps = append(steps, p.process("record "+itoa(i), r))
					// With marks, a commit point after every fourth record and
					// after the last.
					if b.marks && (i%4 == 3 || i == len(records)-1) {
						steps = append(steps, p.commit()...)
					}
				}
			}
			got := transcript(b.outputs, steps)
			state := strings.Join(p.state.dump(b.stores), "\n")
			label := lang
			if batched {
				label += " batched"
			}
			if want == "" {
				goSteps, want, wantState = steps, got, state
				continue
			}
			if got != want {
				t.Errorf("%s %s differs from go: %s", label, name, firstDiff(want, got))
			}
			if state != wantState {
				t.Errorf("%s %s: final state differs from go: %s", label, name, firstDiff(wantState, state))
			}
		}
	}
	return goSteps
}

// batched runs records through ProcessBatch, with marks a commit point
// (its calls in a batch too) after every fourth record and after the last,
// as the one-at-a-time run has them. A plugin that speaks ABI version 2
// must take them in batches: every batch but the first of a run is
// explained by a failed call, after which the host cuts.
func (p *plugin) batched(t *testing.T, records []abi.Record) []step {
	t.Helper()
	var steps []step
	batches, cuts := 0, 0
	run := func(done []step, n int) {
		steps = append(steps, done...)
		batches += n
		cuts++
		for _, s := range done {
			if s.err != nil {
				cuts++
			}
		}
	}
	for lo := 0; lo < len(records); {
		hi := len(records)
		if p.b.marks {
			hi = min(lo+4, hi)
		}
		var names []string
		for i := lo; i < hi; i++ {
			names = append(names, "record "+itoa(i))
		}
		run(p.processBatch(names, records[lo:hi]))
		if p.b.marks {
			run(p.commitBatch())
		}
		lo = hi
	}
	if !p.inst.Info().Batch {
		t.Errorf("the module speaks ABI version %d: no batches", p.inst.Info().ABIVersion)
	} else if batches > cuts {
		t.Errorf("%d batches for %d records, where failures explain %d: the plugin took them (nearly) one at a time", batches, len(records), cuts)
	}
	return steps
}

func TestPassthroughSameInEveryLanguage(t *testing.T) {
	vectors, _, err := abitest.Load(abitest.Path())
	if err != nil {
		t.Fatal(err)
	}
	var recs []abi.Record
	for _, v := range vectors {
		recs = append(recs, v.Record)
	}
	big := abi.Record{Key: []byte("big"), Value: []byte(strings.Repeat("v", 300000))} // regrows the input buffer
	recs = append(recs, big, vectors[4].Record)
	steps := compareLangs(t, "passthrough", binding{outputs: []string{"out"}}, recs)
	for i, s := range steps[1:] {
		want := recs[i]
		want.Offset, want.Partition, want.Index = abi.NoOffset, abi.AnyPartition, 0
		if s.err != nil || len(s.emits) != 1 || string(s.emits[0].raw) != string(want.AppendEncode(nil)) {
			t.Errorf("go passthrough, record %d: %v, %d emits", i, s.err, len(s.emits))
		}
	}
}

// filterRecords and filterConfigs are the Go filter's own table
// (plugins/filter/main_test.go), plus a tombstone and nested paths.
var filterRecords = []string{
	`{"user": {"country": "NL", "age": 31}, "tags": ["a"]}`,
	`{"user": {"country": "DE", "age": 17.5}}`,
	`{"user": {"country": "N\u004c", "age": 1e400}}`,
	`{"user": {"country": null, "age": "31"}}`,
	`{"user": {}}`,
	`{"user": {"country": ["NL"], "age": -1}}`,
	`not json`,
	``,
	`{"items": [{"sku": "x"}, {"sku": "y"}], "user": {"country": "NL", "country": "DE"}}`,
	`{"a": {"b\u002ec": 1}, "user": {"country": "\ud83d\ude00"}} `,
	`[1, 2, {"x": true}]`,
	`{"user": {"country": "NL"}} trailing`,
}

var filterConfigs = []string{
	`{"field":"user.country","value":"NL"}`,
	`{"field":"user.country","op":"ne","value":"NL"}`,
	`{"field":"user.country","op":"eq","value":null}`,
	`{"field":"user.country","op":"exists"}`,
	`{"field":"user.age","op":"gt","value":18}`,
	`{"field":"user.age","op":"ge","value":31}`,
	`{"field":"user.age","op":"lt","value":18}`,
	`{"field":"user.age","op":"le","value":17.5}`,
	`{"field":"user.age","op":"eq","value":31.0}`,
	`{"field":"user.country","op":"in","value":["DE","NL"]}`,
	`{"field":"user.country","op":"in","value":[null, 1]}`,
	`{"field":"tags.0","op":"eq","value":"a"}`,
	`{"field":"items.*.sku","op":"eq","value":"y"}`,
	`{"field":"2.x","op":"eq","value":true}`,
	`{"field":"user.country","op":"eq","value":"😀"}`,
	`{"field":"user.country","value":"NL","output":"kept"}`,
	`{"field":"user.country","value":"NL","invalid_output":"invalid"}`,
}

func TestFilterSameInEveryLanguage(t *testing.T) {
	var recs []abi.Record
	for i, v := range filterRecords {
		recs = append(recs, abi.Record{Timestamp: int64(i), Key: []byte("k"), Value: []byte(v),
			Headers: []abi.Header{{Key: "h", Value: []byte(v)}}})
	}
	recs = append(recs, abi.Record{Key: []byte("tombstone")})
	for _, cfg := range filterConfigs {
		t.Run(cfg, func(t *testing.T) {
			steps := compareLangs(t, "filter", binding{outputs: []string{"invalid", "kept", "out"}, config: cfg}, recs)
			n := 0
			for _, s := range steps {
				n += len(s.emits)
			}
			if n == 0 {
				t.Errorf("go filter kept nothing: the comparison would prove little")
			}
		})
	}
}

// wordTexts are lines for the plugins that split words.
var wordTexts = []string{
	"The cat and the hat", "THE CAT, the end; don't stop", "Ça va? ÇA VA! Über straße STRASSE",
	"Привет мир, ПРИВЕТ", "Καλημέρα κόσμε ΚΑΛΗΜΕΡΑ", "日本語 テキスト", "", "a1 b2 a1 1a",
	"tab\tseparated\nlines\r\nhere", strings.Repeat("x", 5000) + " short", "ab\xffcd\xc3",
}

// wordRecords are wordTexts as records, then a tombstone.
func wordRecords() []abi.Record {
	var recs []abi.Record
	for i, s := range wordTexts {
		recs = append(recs, abi.Record{Timestamp: int64(100 + i), Key: []byte("line"), Value: []byte(s)})
	}
	return append(recs, abi.Record{Key: []byte("tombstone")})
}

// split, the general word count's first step in the Kafka Streams
// benchmark (make bench-kstreams), is the same in Go, Rust and C.
func TestSplitSameInEveryLanguage(t *testing.T) {
	// split is the general word count's first step, in the languages
	// the benchmark runs it in (no TypeScript split yet).
	steps := compareIn(t, splitLangs, "split", binding{outputs: []string{"words"}}, wordRecords())
	if got := len(steps[1].emits); got != 5 {
		t.Errorf("go split: %d emits for %q, want 5", got, wordTexts[0])
	}
}

// wordcount's emit: commit (commit marks, ABI.md 8.2) is the same in
// every language: the records emit nothing, the commit calls each marked
// word's count.
func TestWordcountEmitCommitSameInEveryLanguage(t *testing.T) {
	recs := wordRecords()
	for i := range recs {
		recs[i].Timestamp = int64(1000 + i)
	}
	for _, format := range []string{"decimal", "int64"} {
		t.Run(format, func(t *testing.T) {
			b := binding{outputs: []string{"counts"}, stores: []string{"counts"}, marks: true,
				config: `{"value_format":"` + format + `","emit":"commit"}`}
			steps := compareLangs(t, "wordcount", b, recs)
			var commits, recordEmits int
			for _, s := range steps {
				if strings.HasPrefix(s.name, "commit ") {
					commits += len(s.emits)
				} else {
					recordEmits += len(s.emits)
				}
			}
			if commits < 10 || recordEmits != 0 {
				t.Errorf("go wordcount emit: commit: %d emits from commit calls, %d from records; want many, and none", commits, recordEmits)
			}
		})
	}
}

func TestWordcountSameInEveryLanguage(t *testing.T) {
	texts, recs := wordTexts, wordRecords()
	for _, format := range []string{"decimal", "int64"} {
		t.Run(format, func(t *testing.T) {
			b := binding{outputs: []string{"counts"}, stores: []string{"counts"}, config: `{"value_format":"` + format + `"}`}
			steps := compareLangs(t, "wordcount", b, recs)
			if got := len(steps[1].emits); got != 4 {
				t.Errorf("go wordcount: %d emits for %q, want 4", got, texts[0])
			}
		})
	}
}

// TestPluginsNative runs the Rust plugins' cargo tests and the C plugins'
// native tests (against the C SDK's fake host, under ASan and UBSan).
func TestPluginsNative(t *testing.T) {
	t.Run("rust", func(t *testing.T) { polybuild.RustTest(t, "plugins/rust") })
	for _, name := range []string{"passthrough", "filter", "wordcount", "split"} {
		t.Run("c/"+name, func(t *testing.T) {
			test := "plugins/c/" + name + "/" + name + "_test.c"
			bin := polybuild.CNative(t, append([]string{test}, polybuild.CPluginSources(name)...)...)
			if out, err := exec.Command(bin).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", bin, err, out)
			}
		})
	}
}
