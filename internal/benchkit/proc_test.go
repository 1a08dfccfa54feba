package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses, as a thread can name
	// itself: fields are counted from the last ')'. utime 1500, stime 250.
	stat := "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 9000 0 12 0 1500 250 0 0 20 0 31 0 100 1000000 5000 18446744073709551615\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if got != 1750 {
		t.Fatalf("ticks = %d, want 1750", got)
	}
	for _, bad := range []string{"4242 no paren S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 abc 250 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseStatusHWM(t *testing.T) {
	status := "Name:\tjava\nVmPeak:\t 9000000 kB\nVmHWM:\t  901234 kB\nVmRSS:\t  800000 kB\n"
	got, err := parseStatusHWM([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if got != 901234<<10 {
		t.Fatalf("VmHWM = %d, want %d", got, 901234<<10)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmHWM:\t 12 MB\n", "VmHWM:\t x kB\n"} {
		if _, err := parseStatusHWM([]byte(bad)); err == nil {
			t.Errorf("parseStatusHWM(%q) succeeded", bad)
		}
	}
}

// The real /proc of this test process: it has used some CPU and memory.
func TestReadProcStatsSelf(t *testing.T) {
	// Burn a little CPU so utime is at least one tick.
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	s, err := ReadProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU <= 0 || s.PeakRSS < 1<<20 {
		t.Fatalf("stats %+v: want CPU > 0 and peak RSS >= 1 MiB (spun %d times)", s, x)
	}
	if _, err := ReadProcStats(1 << 30); err == nil {
		t.Fatal("ReadProcStats of a pid that cannot exist succeeded")
	}
}

func TestProcStopsOnSIGTERM(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := StartProc([]string{"sleep", "60"}, t.TempDir(), log, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("sleep 60 exited at once")
	}
	t0 := time.Now()
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("stopping sleep took %s", d)
	}
	if exited, _ := p.Exited(); !exited {
		t.Fatal("still running after Stop")
	}
}

// A process that ignores SIGTERM, with a child in its group that ignores it
// too, is killed after the grace period, child included; Stop says so.
func TestProcStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "p.log")
	pidFile := filepath.Join(dir, "child.pid")
	p, err := StartProc([]string{"sh", "-c", `trap "" TERM; sleep 60 & echo $! > ` + pidFile + `; echo ready; wait`}, dir, log, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	var child string
	testutil.Eventually(t, 10*time.Second, func() error {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			child = strings.TrimSpace(string(b))
			return nil
		}
		return fmt.Errorf("the child's pid never appeared; log:\n%s", tail(log, 10))
	})
	err = p.Stop(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not exit within") {
		t.Fatalf("Stop = %v, want a report that SIGKILL was needed", err)
	}
	// The child was in the group: SIGKILL reached it too.
	testutil.Eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile("/proc/" + child + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return nil // gone, or a zombie waiting for init to reap it
		}
		return fmt.Errorf("child %s still running after Stop", child)
	})
	if got := tail(log, 5); !strings.Contains(got, "ready") {
		t.Fatalf("log %q does not hold the process's output", got)
	}
}

// The broker's pid file must name a process whose CPU time is readable;
// anything else is an error that names the file.
func TestReadPIDFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if pid, err := readPIDFile(write("self.pid", strconv.Itoa(os.Getpid())+"\n")); err != nil || pid != os.Getpid() {
		t.Fatalf("own pid: %d, %v", pid, err)
	}
	for name, body := range map[string]string{"garbage.pid": "kafka\n", "zero.pid": "0", "gone.pid": "2147483646"} {
		p := write(name, body)
		if _, err := readPIDFile(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s (%q): %v, want an error naming the file", name, body, err)
		}
	}
	if _, err := readPIDFile(filepath.Join(dir, "missing.pid")); err == nil {
		t.Error("a missing pid file: no error")
	}
}
