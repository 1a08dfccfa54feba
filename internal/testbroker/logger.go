package testbroker

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger that writes to t.Log until the test ends (lines
// logged later, by goroutines that outlive the test, are dropped instead of
// panicking). It logs at level, or at debug when WASMSTREAM_TEST_VERBOSE is
// set. Safe for concurrent use.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	if os.Getenv("WASMSTREAM_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
