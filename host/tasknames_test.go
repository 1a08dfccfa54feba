package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// TestTaskNamesAgree: a task has one name, processor/topic/partition, in
// the host's log lines (runner, restore, state), in the metrics' task
// labels and in /v1/processors; a plugin's own log lines carry processor,
// task and version. The logs are read as JSON (log.format: json).
func TestTaskNamesAgree(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counterv2"), OnErrorFail)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.AppID = p.b.Name(t, "names")
	p.cfg.State.Dir = t.TempDir()
	p.cfg.Admin.Listen = "127.0.0.1:0"
	var logs syncBuf
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := New(context.Background(), p.cfg, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			<-done
			h.Close()
		})
	}
	defer stop()
	p.produce(t, "a", "b", "c", "d", "e", "f")
	p.waitProcessed(t)

	name := regexp.MustCompile(`^proc/` + regexp.QuoteMeta(p.in) + `/[0-2]$`)
	base := "http://" + h.AdminAddr()
	// /v1/processors
	var tasks []string
	testutil.Eventually(t, 30*time.Second, func() error {
		tasks = nil
		for _, tk := range getVersionsDoc(t, base).Processors[0].Tasks {
			tasks = append(tasks, tk.Task)
		}
		if len(tasks) < 3 {
			return fmt.Errorf("/v1/processors lists tasks %v, want 3", tasks)
		}
		return nil
	})
	if len(tasks) != 3 {
		t.Fatalf("/v1/processors lists tasks %v, want 3", tasks)
	}
	for _, tk := range tasks {
		if !name.MatchString(tk) {
			t.Errorf("/v1/processors task %q is not processor/topic/partition", tk)
		}
	}
	// metrics
	_, metrics := httpGet(t, base+"/metrics")
	labels := regexp.MustCompile(`task="([^"]*)"`).FindAllStringSubmatch(metrics, -1)
	if len(labels) == 0 {
		t.Fatalf("no task label in /metrics:\n%s", metrics)
	}
	for _, l := range labels {
		if !name.MatchString(l[1]) {
			t.Errorf("metric task label %q is not processor/topic/partition", l[1])
		}
	}
	// logs
	stop()
	var withTask, pluginLines int
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		if task, ok := line["task"]; ok {
			withTask++
			if s, _ := task.(string); !name.MatchString(s) {
				t.Errorf("log line's task %q is not processor/topic/partition: %s", task, sc.Text())
			}
		}
		if line["msg"] == "counter v2 starting" {
			switch {
			case line["instance"] == "load-check": // the host's instantiation check at load
			case line["processor"] != "proc" || line["version"] == "" || line["version"] == nil || line["task"] == nil:
				t.Errorf("plugin log line lacks processor, task or version: %s", sc.Text())
			default:
				pluginLines++
			}
		}
	}
	if withTask == 0 || pluginLines != 3 {
		t.Fatalf("%d log lines with a task, %d plugin init lines (want one per task, 3):\n%s", withTask, pluginLines, logs.String())
	}
}

// syncBuf is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
