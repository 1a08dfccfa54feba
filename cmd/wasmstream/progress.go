package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/wasmstream/wasmstream/host"
)

// restoreBars draws one progress line per restoring store at the bottom of
// a terminal. Log lines are written through it (it is the log handler's
// writer): each write erases the bars, writes the line and draws the bars
// again below it, in one write to the terminal, so bars and logs never
// overwrite each other.
//
// It stays out of the way: a restore shows a bar only once it has run for
// showAfter (a store that is up to date, or restores in a blink, never
// shows one), and a bar is removed when its restore is done; the restore
// package's log line "restore: complete" is the lasting record.
//
// Everything is drawn synchronously under one mutex, so what is on the
// terminal after a call is exactly what the call drew (no refresh
// goroutine that could drop a log line written just before exit).
type restoreBars struct {
	mu        sync.Mutex
	out       io.Writer
	width     func() int       // terminal columns
	now       func() time.Time // for redraw throttling
	showAfter time.Duration    // a restore shows a bar once it has run this long
	every     time.Duration    // least time between two redraws for progress alone

	bars     []*restoreBar // in the order their restores began
	drawn    int           // bar lines on the terminal below the last log line
	lastDraw time.Time
	closed   bool
	buf      bytes.Buffer
}

type restoreBar struct {
	key   string // task/store
	p     host.RestoreProgress
	shown bool
}

func newRestoreBars(out io.Writer, width func() int) *restoreBars {
	return &restoreBars{
		out:       out,
		width:     width,
		now:       time.Now,
		showAfter: 500 * time.Millisecond,
		every:     100 * time.Millisecond,
	}
}

// Update takes a restore's progress (host.WithRestoreProgress). It returns
// quickly: at most one write to the terminal.
func (b *restoreBars) Update(p host.RestoreProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	key := p.Task + "/" + p.Store
	i := -1
	for j, bar := range b.bars {
		if bar.key == key {
			i = j
		}
	}
	if p.Done {
		if i >= 0 {
			shown := b.bars[i].shown
			b.bars = append(b.bars[:i], b.bars[i+1:]...)
			if shown {
				b.redraw(nil)
			}
		}
		return
	}
	if p.Target <= p.Start {
		return // nothing to read
	}
	if i < 0 {
		b.bars = append(b.bars, &restoreBar{key: key})
		i = len(b.bars) - 1
	}
	bar := b.bars[i]
	bar.p = p
	switch {
	case !bar.shown && p.Elapsed >= b.showAfter:
		bar.shown = true
		b.redraw(nil)
	case bar.shown && b.now().Sub(b.lastDraw) >= b.every:
		b.redraw(nil)
	}
}

// Write writes log output above the bars.
func (b *restoreBars) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || (b.drawn == 0 && !b.anyShown()) {
		return b.out.Write(p)
	}
	if err := b.redraw(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Idle removes every bar: no restore is running. A restore that fails or
// is canceled (its partition revoked, the process stopping) reports no
// Done, so the caller calls Idle when the host says no restore runs.
func (b *restoreBars) Idle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.bars) == 0 {
		return
	}
	shown := b.anyShown()
	b.bars = nil
	if shown {
		b.redraw(nil)
	}
}

// watch calls Idle every interval while ready reports true, until stop is
// closed.
func (b *restoreBars) watch(ready func() bool, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if ready() {
				b.Idle()
			}
		}
	}
}

// Close erases the bars; later writes go straight through.
func (b *restoreBars) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.bars = nil
	b.redraw(nil)
	b.closed = true
}

func (b *restoreBars) anyShown() bool {
	for _, bar := range b.bars {
		if bar.shown {
			return true
		}
	}
	return false
}

// redraw erases the bars on the terminal, writes log (if any), and draws
// the shown bars, in one write.
func (b *restoreBars) redraw(log []byte) error {
	b.buf.Reset()
	if b.drawn > 0 {
		// Cursor up to the first bar line, then erase to the end of the
		// screen.
		fmt.Fprintf(&b.buf, "\x1b[%dA\x1b[J", b.drawn)
	}
	b.buf.Write(log)
	if len(log) > 0 && log[len(log)-1] != '\n' {
		b.buf.WriteByte('\n')
	}
	width := 80
	if b.width != nil {
		if w := b.width(); w > 0 {
			width = w
		}
	}
	b.drawn = 0
	for _, bar := range b.bars {
		if !bar.shown {
			continue
		}
		b.buf.WriteString(barLine(bar.p, width))
		b.buf.WriteByte('\n')
		b.drawn++
	}
	b.lastDraw = b.now()
	_, err := b.out.Write(b.buf.Bytes())
	return err
}

// barLine renders one restore as a line shorter than width (a line as wide
// as the terminal would wrap and break the erase):
//
//	restoring wordcount/0 counts [=====>      ]  45% offset 45,000/100,000, 44,980 records, 90.1k/s, ETA 1s
//
// The bar is dropped, then the line cut, when the terminal is narrow.
func barLine(p host.RestoreProgress, width int) string {
	span := p.Target - p.Start
	done := min(max(p.Position-p.Start, 0), span)
	frac := 0.0
	if span > 0 {
		frac = float64(done) / float64(span)
	}
	left := fmt.Sprintf("restoring %s %s", p.Task, p.Store)
	right := fmt.Sprintf(" %3d%% offset %s/%s, %s records, %s/s", int(frac*100),
		groupDigits(p.Position), groupDigits(p.Target), groupDigits(p.Restored), shortRate(p.Rate))
	if secs := p.Elapsed.Seconds(); done > 0 && secs > 0 && done < span {
		eta := time.Duration(float64(span-done) / (float64(done) / secs) * float64(time.Second))
		if eta >= time.Second {
			right += ", ETA " + eta.Round(time.Second).String()
		}
	}
	limit := max(width-1, 1)
	if barWidth := limit - len(left) - len(right) - 3; barWidth >= 10 {
		fill := int(frac * float64(barWidth))
		bar := strings.Repeat("=", fill)
		if fill < barWidth {
			bar += ">" + strings.Repeat(" ", barWidth-fill-1)
		}
		return left + " [" + bar + "]" + right
	}
	line := left + right
	if len(line) > limit {
		line = line[:limit]
	}
	return line
}

// groupDigits writes n with thousands separators: 1234567 -> 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// shortRate writes a rate with a k or M suffix: 950, 12.3k, 4.1M.
func shortRate(r float64) string {
	switch {
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'f', 1, 64) + "M"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

// terminal reports whether w is a terminal that can show progress bars and
// returns its width. A variable so that tests can pretend.
var terminal = func(w io.Writer, environ []string) (width func() int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil, false
	}
	for _, kv := range environ {
		if kv == "TERM=dumb" {
			return nil, false
		}
	}
	return func() int { return termWidth(f) }, true
}
