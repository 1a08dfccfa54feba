// Package procs runs `wasmstream run` processes for the drivers that run
// them outside tests (internal/soak, internal/failover): start one and
// wait until it is ready, stop it cleanly, kill it, read its admin
// endpoint.
package procs

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is one `wasmstream run` process.
type Proc struct {
	Name     string // for messages
	Config   string // its config file
	StateDir string // its state.dir
	Admin    string // its admin address (host:port)
	Cmd      *exec.Cmd
	exited   chan struct{}
	err      error // Wait's, once exited
}

// Env is the driver's environment without WASMSTREAM_ variables: the
// processes take their whole config from their file.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WASMSTREAM_") {
			env = append(env, kv)
		}
	}
	return env
}

// Start runs bin run -c p.Config, its output appended to log, and waits
// (up to timeout) until its admin endpoint answers /readyz with 200.
func (p *Proc) Start(bin, log string, timeout time.Duration) error {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.Cmd = exec.Command(bin, "run", "-c", p.Config)
	p.Cmd.Stdout, p.Cmd.Stderr = f, f
	p.Cmd.Env = Env()
	p.Cmd.SysProcAttr = sysProcAttr()
	if err := p.Cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.err = p.Cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while starting: %v (log: %s)", p.Name, p.err, log)
		default:
		}
		if code, _ := HTTPGet("http://"+p.Admin+"/readyz", time.Second); code == 200 {
			return nil
		}
		if time.Now().After(deadline) {
			_ = p.Stop(30 * time.Second)
			return fmt.Errorf("%s not ready within %s (log: %s)", p.Name, timeout, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	if p.Cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed when the process has exited; Err is then Wait's error.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error, once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Stop sends SIGTERM (a clean stop: commit, leave the group) and waits,
// then SIGKILL after grace. It returns the process's exit error, if any.
func (p *Proc) Stop(grace time.Duration) error {
	if p.Cmd == nil {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.Name, grace)
	}
	return p.err
}

// Kill sends SIGKILL (a crash: no commit, no leaving the group) and waits
// for the process to be gone.
func (p *Proc) Kill() {
	if p.Cmd == nil || !p.Running() {
		return
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
}

// HTTPGet GETs url within timeout: its status (0 if there was no answer)
// and at most 1 MiB of its body (or the error's text).
func HTTPGet(url string, timeout time.Duration) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body
}

// DirSize is the bytes of the files under dir (0 if it is not there).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// FreePort returns a TCP port on 127.0.0.1 that is free now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
