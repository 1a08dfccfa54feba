package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// A stateful pipeline on the embedded broker, run twice on one state
// directory: the topic tool finds each run's broker through the address
// file, the second run says once that the earlier run's state is cleared
// (its broker kept nothing) and no task warns that its state is wiped,
// and the counts start again from the records of the run.
func TestEmbeddedBrokerRestart(t *testing.T) {
	cfg := &Config{
		AppID: "restart",
		Kafka: KafkaConfig{CommitInterval: 50 * time.Millisecond},
		State: StateConfig{Dir: t.TempDir()},
		Processors: []ProcessorConfig{{Name: "count", Plugin: wasmbuild.Build(t, "./internal/testplugins/counterv2"),
			Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}, Stores: []string{"counts"}}},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	runOnce := func(ids string) (logs, out string) {
		var buf syncBuf
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		h, err := New(context.Background(), cfg, WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()

		tool, err := OpenTopicTool(context.Background(), cfg, log)
		if err != nil {
			t.Fatalf("the topic tool on the running embedded broker: %v", err)
		}
		if got, want := strings.Join(tool.Brokers(), ","), strings.Join(h.Brokers(), ","); got != want {
			t.Errorf("topic tool brokers %s, the embedded broker is at %s", got, want)
		}
		lines := ""
		for _, id := range strings.Fields(ids) {
			lines += "k:" + id + "\n" // one key: one task, counting 1, 2, ...
		}
		if _, err := tool.Produce(context.Background(), strings.NewReader(lines), ProduceOptions{Topic: "in", KeySep: ":"}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			var b bytes.Buffer
			res, err := tool.Consume(context.Background(), &b, ConsumeOptions{Topic: "out", Format: `%v\n`})
			if err != nil {
				return err
			}
			if res.Records < len(strings.Fields(ids)) {
				return fmt.Errorf("%d records out", res.Records)
			}
			out = b.String()
			return nil
		})
		tool.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(cfg.EmbeddedBrokerFile()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the embedded broker's address file outlived the host: %v", err)
		}
		return buf.String(), out
	}

	logs1, out1 := runOnce("a b")
	logs2, out2 := runOnce("c")
	t.Logf("second run's log:\n%s", logs2)
	if out1 != "k:1\nk:2\n" || out2 != "k:1\n" {
		t.Errorf("outputs %q then %q; want the count to start again on the new broker", out1, out2)
	}
	for i, logs := range []string{logs1, logs2} {
		if !strings.Contains(logs, "It keeps nothing between runs") {
			t.Errorf("run %d does not say the embedded broker keeps nothing", i+1)
		}
		if strings.Contains(logs, "wiping") || strings.Contains(logs, "level=WARN msg=restore") {
			t.Errorf("run %d warns about a task's restore", i+1)
		}
	}
	if strings.Contains(logs1, "cleared the local state") {
		t.Error("the first run cleared state it did not have")
	}
	if n := strings.Count(logs2, "cleared the local state of an earlier run"); n != 1 || !strings.Contains(logs2, "tasks=3") {
		t.Errorf("the second run says %d times that it cleared the earlier run's state (want once, for the 3 tasks)", n)
	}

	// No run: the topic tool says what it looked for and what to do.
	_, err := OpenTopicTool(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrNoBrokers) || !strings.Contains(err.Error(), cfg.EmbeddedBrokerFile()) || !strings.Contains(err.Error(), "--brokers") {
		t.Errorf("OpenTopicTool with no run: %v", err)
	}
	// An address file left by a run that was killed: the broker there
	// does not answer.
	if err := os.WriteFile(cfg.EmbeddedBrokerFile(), []byte("127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenTopicTool(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrNoBrokers) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("OpenTopicTool with a stale address: %v", err)
	}
}
