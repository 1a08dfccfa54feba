package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// screen is a minimal terminal: it understands what restoreBars writes
// (whole lines, "cursor up n" and "erase to the end of the screen") and
// keeps the resulting lines.
type screen struct {
	lines  []string
	cursor int // row of the cursor, always at column 0
	raw    bytes.Buffer
}

var escape = regexp.MustCompile(`^\x1b\[(\d*)([AJ])`)

func (s *screen) Write(p []byte) (int, error) {
	s.raw.Write(p)
	for rest := string(p); rest != ""; {
		if m := escape.FindStringSubmatch(rest); m != nil {
			switch m[2] {
			case "A":
				n, _ := strconv.Atoi(m[1])
				s.cursor = max(s.cursor-n, 0)
			case "J":
				s.lines = s.lines[:s.cursor]
			}
			rest = rest[len(m[0]):]
			continue
		}
		line, after, ok := strings.Cut(rest, "\n")
		if !ok {
			panic("restoreBars wrote a partial line: " + strconv.Quote(rest))
		}
		if strings.Contains(line, "\x1b") {
			panic("unexpected escape in " + strconv.Quote(line))
		}
		if s.cursor < len(s.lines) {
			s.lines[s.cursor] = line
		} else {
			s.lines = append(s.lines, line)
		}
		s.cursor++
		rest = after
	}
	return len(p), nil
}

func (s *screen) String() string { return strings.Join(s.lines, "\n") }

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func progress(task string, start, pos, target, restored int64, elapsed time.Duration) host.RestoreProgress {
	return host.RestoreProgress{Task: task, Store: "counts", Topic: "app-counts-changelog",
		Start: start, Position: pos, Target: target, Restored: restored, Elapsed: elapsed,
		Rate: float64(restored) / elapsed.Seconds()}
}

func TestRestoreBars(t *testing.T) {
	scr := &screen{}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	const width = 100
	b := newRestoreBars(scr, func() int { return width })
	b.now = clock.now

	// Nothing to restore, or a restore too short to notice: no bar, and
	// logs go straight through.
	b.Update(host.RestoreProgress{Task: "wc/0", Store: "counts", Start: 7, Position: 7, Target: 7, Done: true})
	b.Update(progress("wc/1", 0, 10, 100, 10, 100*time.Millisecond))
	b.Update(host.RestoreProgress{Task: "wc/1", Store: "counts", Start: 0, Position: 100, Target: 100, Restored: 100, Done: true})
	if _, err := b.Write([]byte("log one\n")); err != nil {
		t.Fatal(err)
	}
	if got := scr.raw.String(); got != "log one\n" {
		t.Fatalf("with nothing worth a bar, the terminal got %q, want only the log line", got)
	}

	// A restore that takes a while gets a bar below the logs.
	b.Update(progress("wc/2", 1000, 1500, 3000, 480, 600*time.Millisecond))
	want := "log one\nrestoring wc/2 counts [====="
	if !strings.HasPrefix(scr.String(), want) || !strings.Contains(scr.String(), "=>     ") {
		t.Fatalf("screen:\n%s\nwant it to start with\n%s", scr, want)
	}
	for _, s := range []string{" 25% offset 1,500/3,000, 480 records, 800/s, ETA 2s"} {
		if !strings.Contains(scr.String(), s) {
			t.Fatalf("bar lacks %q:\n%s", s, scr)
		}
	}

	// Log lines go above the bar; a second restore gets a second bar.
	clock.t = clock.t.Add(time.Second)
	b.Write([]byte("log two\n"))
	b.Update(progress("wc/3", 0, 50_000, 200_000, 50_000, time.Second))
	b.Write([]byte("log three\n"))
	lines := scr.lines
	if len(lines) != 5 || lines[0] != "log one" || lines[1] != "log two" || lines[2] != "log three" ||
		!strings.HasPrefix(lines[3], "restoring wc/2 counts") || !strings.HasPrefix(lines[4], "restoring wc/3 counts") {
		t.Fatalf("screen:\n%s", scr)
	}
	if !strings.Contains(lines[4], "50.0k/s") {
		t.Errorf("rate of 50000/s shown as %q", lines[4])
	}

	// Progress alone redraws at most every b.every.
	n := scr.raw.Len()
	b.Update(progress("wc/3", 0, 60_000, 200_000, 60_000, 1100*time.Millisecond))
	if scr.raw.Len() != n {
		t.Error("redrew for progress within the throttle interval")
	}
	clock.t = clock.t.Add(b.every)
	b.Update(progress("wc/3", 0, 70_000, 200_000, 70_000, 1200*time.Millisecond))
	if !strings.Contains(scr.lines[4], "offset 70,000/200,000") {
		t.Errorf("after the throttle interval the bar shows %q", scr.lines[4])
	}

	// A finished restore's bar goes away.
	b.Update(host.RestoreProgress{Task: "wc/2", Store: "counts", Start: 1000, Position: 3000, Target: 3000, Done: true})
	if len(scr.lines) != 4 || !strings.HasPrefix(scr.lines[3], "restoring wc/3 counts") {
		t.Fatalf("after wc/2 finished:\n%s", scr)
	}
	for _, l := range scr.lines {
		if len(l) >= width {
			t.Errorf("line of %d columns on a %d-column terminal (it would wrap): %q", len(l), width, l)
		}
	}

	// A restore that fails or is canceled sends no Done: Idle, called
	// when the host has no restore running, drops its bar.
	b.Idle()
	if got := scr.String(); got != "log one\nlog two\nlog three" {
		t.Fatalf("after Idle the screen is\n%s", got)
	}
	b.Update(progress("wc/3", 0, 80_000, 200_000, 80_000, 1300*time.Millisecond))
	if len(scr.lines) != 4 {
		t.Fatalf("a restore reporting after Idle gets its bar back:\n%s", scr)
	}

	// watch calls Idle when ready says so.
	stop := make(chan struct{})
	go b.watch(func() bool { return true }, time.Millisecond, stop)
	testutil.Eventually(t, 10*time.Second, func() error {
		b.mu.Lock()
		n := len(b.bars)
		b.mu.Unlock()
		if n != 0 {
			return errors.New("watch did not call Idle")
		}
		return nil
	})
	close(stop)

	// Close erases the bars; later output is plain.
	b.Close()
	b.Update(progress("wc/4", 0, 1, 100, 1, time.Second))
	b.Write([]byte("log four\n"))
	if got := scr.String(); got != "log one\nlog two\nlog three\nlog four" {
		t.Fatalf("after Close the screen is\n%s", got)
	}
}

func TestBarLineFitsTheTerminal(t *testing.T) {
	p := progress("a-rather-long-processor-name/117", 0, 1234, 1_000_000, 1234, 3*time.Second)
	for _, width := range []int{200, 100, 80, 60, 30, 1, 0} {
		l := barLine(p, width)
		if width > 1 && len(l) >= width {
			t.Errorf("width %d: %d columns: %q", width, len(l), l)
		}
		if width >= 150 && !strings.Contains(l, "[") {
			t.Errorf("width %d: no bar in %q", width, l)
		}
		if width <= 100 && strings.Contains(l, "[") {
			t.Errorf("width %d: a bar squeezed in: %q", width, l)
		}
	}
	if l := barLine(progress("t/0", 5, 5, 10, 0, 0), 80); !strings.Contains(l, "  0%") || strings.Contains(l, "ETA") {
		t.Errorf("a restore that has not moved: %q", l)
	}
}

func TestNumberFormats(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
	for r, want := range map[float64]string{0: "0", 950.4: "950", 12_345: "12.3k", 4_100_000: "4.1M"} {
		if got := shortRate(r); got != want {
			t.Errorf("shortRate(%v) = %q, want %q", r, got, want)
		}
	}
}

// Only a terminal gets bars: a pipe, a file or a buffer gets plain log
// lines, and so does TERM=dumb.
func TestTerminalDetection(t *testing.T) {
	if _, ok := terminal(&bytes.Buffer{}, nil); ok {
		t.Error("a buffer was taken for a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := terminal(f, nil); ok {
		t.Error("a regular file was taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := terminal(w, nil); ok {
		t.Error("a pipe was taken for a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if _, ok := terminal(tty, []string{"TERM=dumb"}); ok {
			t.Error("TERM=dumb got bars")
		}
	}
}
