package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// `wasmstream query` finds the running process through the control topic
// and prints the key's committed value; a key the store lacks exits 1.
func TestQueryCommand(t *testing.T) {
	b := testbroker.New(t)
	in, out, app := b.Name(t, "in"), b.Name(t, "out"), b.Name(t, "app")
	b.CreateTopic(t, in, 2, nil)
	b.CreateTopic(t, out, 2, nil)
	plugin, _ := filepath.Abs(testdata("statecounter"))
	cfg := writeFile(t, t.TempDir(), "p.yaml", "app_id: "+app+"\nkafka:\n  commit_interval: 20ms\n  create_topics: true\n"+
		"state: {dir: "+t.TempDir()+"}\nquery: {listen: 127.0.0.1:0, token: tok}\n"+
		"processors:\n  - name: p\n    plugin: "+plugin+"\n    inputs: ["+in+"]\n    outputs: {out: "+out+"}\n    stores: [counts]\n")
	environ := []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- doMain(ctx, []string{"run", "-c", cfg}, &stdout, &stderr, environ) }()
	for _, k := range []string{"x", "y", "x"} {
		b.Produce(t, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(k)})
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		code, o, e := runCLIEnv(t, environ, "query", "-c", cfg, "p", "counts", "x", "--value-format", "hex")
		if code != exitOK || !strings.Contains(o, `"value":"0200000000000000"`) || !strings.Contains(o, `"checkpoint":`) {
			return fmt.Errorf("exit %d, stdout %q, stderr %q; run's stderr:\n%s", code, o, e, stderr.String())
		}
		return nil
	})
	code, o, e := runCLIEnv(t, environ, "query", "-c", cfg, "p", "counts", "nope")
	if code != exitError || !strings.Contains(o, `"found":false`) || !strings.Contains(e, `has no key "nope"`) {
		t.Errorf("a missing key: exit %d, stdout %q, stderr %q", code, o, e)
	}
	code, _, e = runCLIEnv(t, environ, "query", "-c", cfg, "p", "nostore", "x")
	if code != exitError || !strings.Contains(e, `has no store "nostore"`) {
		t.Errorf("an unknown store: exit %d, stderr %q", code, e)
	}
	if code, _, e := runCLIEnv(t, environ, "query", "-c", cfg, "p", "counts"); code != exitUsage || e == "" {
		t.Errorf("a missing key argument: exit %d, stderr %q", code, e)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr.String())
	}
}
