package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
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
