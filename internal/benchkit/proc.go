package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcStats is what the harness reads about a measured process from
// /proc, just before stopping it.
type ProcStats struct {
	CPU     time.Duration // user + system time of all its threads (utime + stime)
	PeakRSS int64         // bytes; VmHWM, the resident set's high-water mark
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// Linux fixes it at 100 on every architecture Go runs on (sysconf
// _SC_CLK_TCK); readClockTicks asks getconf in case a kernel differs.
var clockTicks = readClockTicks()

func readClockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
}

// ReadProcStats reads the CPU time and peak RSS of process pid.
func ReadProcStats(pid int) (ProcStats, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	ticks, err := parseStatCPU(stat)
	if err != nil {
		return ProcStats{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("reading peak RSS of pid %d: %w", pid, err)
	}
	hwm, err := parseStatusHWM(status)
	if err != nil {
		return ProcStats{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return ProcStats{
		CPU:     time.Duration(ticks) * time.Second / time.Duration(clockTicks),
		PeakRSS: hwm,
	}, nil
}

// parseStatCPU returns utime + stime, in clock ticks, from the contents of
// /proc/<pid>/stat. The second field, the command name in parentheses, may
// itself hold spaces and parentheses, so fields are counted from the last
// ')'. utime and stime are fields 14 and 15 (proc(5)).
func parseStatCPU(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[14-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[15-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// parseStatusHWM returns VmHWM in bytes from the contents of
// /proc/<pid>/status ("VmHWM:\t  123456 kB").
func parseStatusHWM(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmHWM line %q: want \"<n> kB\"", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmHWM line (a kernel thread, or the process has exited)")
}

// Proc is a measured process: started in a process group of its own (so
// stopping it reaches anything it forks) and killed by the kernel should
// the harness die first (Pdeathsig), so no run outlives the harness.
type Proc struct {
	cmd    *exec.Cmd
	log    *os.File
	Start  time.Time     // just before the fork: the run's time zero
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status; valid once exited is closed
}

// StartProc starts argv[0] with the rest as arguments, stdout and stderr to
// logPath.
func StartProc(argv []string, dir, logPath string, env []string) (*Proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the process log: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Proc{cmd: cmd, log: log, exited: make(chan struct{})}
	p.Start = time.Now()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id: the JVM's or wasmstream's own, never a shell's.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace for the
// process to exit, then sends SIGKILL and waits up to 10 s more. It
// returns how the process ended; an error if it could not be made to.
func (p *Proc) Stop(grace time.Duration) error {
	defer p.log.Close()
	if done, _ := p.Exited(); done {
		return nil
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return fmt.Errorf("pid %d did not exit within %s of SIGTERM; killed", p.Pid(), grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d survived SIGKILL for 10s", p.Pid())
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
