package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// replay --out FILE twice over an input written in transactions (its last
// offsets are commit markers, which replay must get past) gives the same
// bytes; usage errors are refused.
func TestReplayCommand(t *testing.T) {
	b := testbroker.New(t)
	in := b.Name(t, "in")
	b.CreateTopic(t, in, 2, nil)
	cl := b.Client(t, kgo.TransactionalID(b.Name(t, "txn")), kgo.DefaultProduceTopic(in))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for batch := 0; batch < 3; batch++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(batch*10+i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	plugin, _ := filepath.Abs(testdata("passthrough"))
	dir := t.TempDir()
	conf := writeFile(t, dir, "pipeline.yaml", "app_id: "+b.Name(t, "app")+"\nkafka:\n  brokers: ["+strings.Join(b.Addrs(), ",")+"]\n"+
		"runtime: {cache_dir: \"off\"}\nprocessors:\n  - name: proc\n    plugin: "+plugin+"\n    inputs: ["+in+"]\n    outputs: {out: out}\n")
	var outs [][]byte
	for i := 0; i < 2; i++ {
		out := filepath.Join(dir, "run"+strconv.Itoa(i)+".jsonl")
		code, stdout, errs := runCLI(t, "replay", "-c", conf, "proc", "--plugin", testdata("passthrough"), "--out", out)
		if code != exitOK || !strings.Contains(stdout, "30 records in, 30 emitted, 0 failed; written to "+out) {
			t.Fatalf("replay: exit %d, %q, %q", code, stdout, errs)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	if !bytes.Equal(outs[0], outs[1]) || bytes.Count(outs[0], []byte("\n")) != 30 {
		t.Fatalf("two replays differ or are not 30 lines:\n%s\n---\n%s", outs[0], outs[1])
	}
	for _, args := range [][]string{
		{"replay", "-c", conf, "proc"},
		{"replay", "-c", conf, "--out", "-"},
		{"replay", "-c", conf, "proc", "--out", "-", "--from", "5", "--to", "2"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "nope", "--out", "-"); code != exitError || !strings.Contains(errs, `unknown processor "nope"`) {
		t.Errorf("replay of an unknown processor: exit %d, %q", code, errs)
	}
}

// replay --diff-against a FILE or a deployed LABEL: exit 1 and the
// planted difference (internal/testplugins/counterdiff changes the output
// of keys k7, k17, k27) when the versions differ, exit 0 when they do not,
// exit 3 for a label the control topic lacks; --state current refuses a
// missing state directory.
func TestReplayDiffCommand(t *testing.T) {
	b := testbroker.New(t)
	in := b.Name(t, "in")
	b.CreateTopic(t, in, 2, nil)
	recs := make([]*kgo.Record, 60)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte("id" + strconv.Itoa(i))}
	}
	b.Produce(t, recs...)
	counter, _ := filepath.Abs(wasmbuild.Build(t, "./internal/testplugins/counter"))
	variant, _ := filepath.Abs(wasmbuild.Build(t, "./internal/testplugins/counterdiff"))
	dir := t.TempDir()
	conf := writeFile(t, dir, "pipeline.yaml", "app_id: "+b.Name(t, "app")+"\nkafka:\n  brokers: ["+strings.Join(b.Addrs(), ",")+"]\n"+
		"runtime: {cache_dir: \"off\"}\nstate: {dir: "+filepath.Join(dir, "state")+"}\nprocessors:\n  - name: proc\n    plugin: "+counter+
		"\n    inputs: ["+in+"]\n    outputs: {out: out}\n    stores: [counts]\n")
	out := filepath.Join(dir, "diff.json")

	code, stdout, errs := runCLI(t, "replay", "-c", conf, "proc", "--diff-against", variant, "--out", out)
	if code != exitDiffer || !strings.Contains(stdout, "60 records, 54 matching, 6 differing, 0 failed, 0 failed against, 0 failed by both: they differ") {
		t.Fatalf("diff against the variant file: exit %d, %q, %q", code, stdout, errs)
	}
	var res host.ReplayDiffResult
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if res.Total.Differing != 6 || len(res.Samples) != 6 || len(res.Tasks) != 2 {
		t.Fatalf("the diff document: %s", data)
	}
	for _, s := range res.Samples {
		v, a := string(s.Version.Emits[0].Value), string(s.Against.Emits[0].Value)
		if k, _, _ := strings.Cut(v, ":"); !strings.HasSuffix(k, "7") || a != v+"!" || s.In.Topic != in {
			t.Errorf("sample %+v: %q vs %q", s.In, v, a)
		}
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--diff-against", variant, "--diff-samples", "2", "--out", out); code != exitDiffer {
		t.Fatalf("--diff-samples 2: exit %d, %q", code, errs)
	}
	if data, _ = os.ReadFile(out); json.Unmarshal(data, &res) != nil || len(res.Samples) != 2 || res.Total.Differing != 6 {
		t.Fatalf("--diff-samples 2: %s", data)
	}

	// By label: deploy records the config's plugin as "config".
	if code, _, errs := runCLI(t, "deploy", "-c", conf, "proc", variant, "--label", "v2"); code != exitOK {
		t.Fatalf("deploy: exit %d, %q", code, errs)
	}
	if code, stdout, errs := runCLI(t, "replay", "-c", conf, "proc", "--diff-against", "v2", "--out", out); code != exitDiffer || !strings.Contains(stdout, "against v2@") {
		t.Fatalf("diff against label v2: exit %d, %q, %q", code, stdout, errs)
	}
	if code, stdout, errs := runCLI(t, "replay", "-c", conf, "proc", "--plugin", variant, "--diff-against", "v2", "--out", "-"); code != exitOK || !strings.Contains(errs, "60 matching, 0 differing") || !strings.Contains(stdout, `"samples": []`) {
		t.Fatalf("the variant against itself by label: exit %d, %q, %q", code, stdout, errs)
	}
	// --version runs a deployed version by its label: the same bytes out
	// as --plugin with its file, and identical to it in a diff.
	byFile, byLabel := filepath.Join(dir, "file.jsonl"), filepath.Join(dir, "label.jsonl")
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--plugin", variant, "--out", byFile); code != exitOK {
		t.Fatalf("replay --plugin: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--version", "v2", "--out", byLabel); code != exitOK {
		t.Fatalf("replay --version v2: exit %d, %q", code, errs)
	}
	if a, b := readFileT(t, byFile), readFileT(t, byLabel); len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("replay --version v2 wrote %d bytes, --plugin with its file %d: want the same", len(b), len(a))
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--version", "v2", "--diff-against", variant, "--out", "-"); code != exitOK || !strings.Contains(errs, "60 matching, 0 differing") {
		t.Fatalf("--version v2 against its file: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--version", "v3", "--out", out); code != exitError || !strings.Contains(errs, `no version "v3"`) {
		t.Fatalf("--version of an unknown label: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--version", "v2", "--plugin", variant, "--out", out); code != exitUsage || !strings.Contains(errs, "give one") {
		t.Fatalf("--version with --plugin: exit %d, %q; want a usage error", code, errs)
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--diff-against", "config", "--out", out); code != exitOK {
		t.Fatalf("the config's plugin against label config: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--diff-against", "v3", "--out", out); code != exitDiffFailed || !strings.Contains(errs, `no version "v3"`) || !strings.Contains(errs, "v2@") {
		t.Fatalf("an unknown label: exit %d, %q; want exit 3 listing the versions", code, errs)
	}

	if code, _, errs := runCLI(t, "replay", "-c", conf, "proc", "--state", "current", "--out", out); code != exitError || !strings.Contains(errs, "no state database in") {
		t.Fatalf("--state current without a state directory: exit %d, %q", code, errs)
	}
	for _, args := range [][]string{
		{"replay", "-c", conf, "proc", "--state", "old", "--out", "-"},
		{"replay", "-c", conf, "proc", "--diff-samples", "3", "--out", "-"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
