package engine

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/wasmstream/wasmstream/abi"
)

// lineWriter turns a plugin's stdout or stderr into log lines: one record per
// line, cut at abi.MaxLogSize. It also keeps the first line written since
// the last reset, which error messages quote (a Go plugin prints its panic
// there before it exits). It runs on the goroutine calling the plugin.
type lineWriter struct {
	limit  *logLimiter
	log    *slog.Logger
	level  slog.Level
	stream string
	buf    []byte
	first  string
	// batch, while a batch runs, attributes a write to the batch's call
	// in progress before it is taken (Instance.sync, as a host call does).
	batch interface{ sync() }
}

func newLineWriter(limit *logLimiter, log *slog.Logger, level slog.Level, stream string) *lineWriter {
	return &lineWriter{limit: limit, log: log, level: level, stream: stream}
}

// Write implements io.Writer; it never fails.
func (w *lineWriter) Write(p []byte) (int, error) {
	if w.batch != nil {
		w.batch.sync()
	}
	n := len(p)
	for len(p) > 0 {
		j := bytes.IndexByte(p, '\n')
		if j < 0 {
			room := abi.MaxLogSize - len(w.buf)
			if len(p) < room {
				w.buf = append(w.buf, p...)
				break
			}
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			w.emit()
			continue
		}
		line := p[:j]
		p = p[j+1:]
		if room := abi.MaxLogSize - len(w.buf); len(line) > room {
			line = line[:room]
		}
		w.buf = append(w.buf, line...)
		w.emit()
	}
	return n, nil
}

func (w *lineWriter) emit() {
	line := string(bytes.TrimRight(w.buf, "\r"))
	w.buf = w.buf[:0]
	if w.first == "" && line != "" {
		w.first = line
	}
	if !w.limit.allow(len(line)) {
		return
	}
	w.log.LogAttrs(context.Background(), w.level, line, slog.String("stream", w.stream))
}

// flush logs a partial last line.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit()
	}
}

// takeFirst returns the first line since the last call (flushing a pending
// partial line first) and resets it.
func (w *lineWriter) takeFirst() string {
	w.flush()
	s := w.first
	w.first = ""
	return s
}
