package main

import (
	"context"
	"encoding/json"
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

// proc is one `wasmstream run` process of the soak.
type proc struct {
	name     string // "main" or "second"
	config   string // its config file
	stateDir string // its state.dir
	admin    string // its admin address
	cmd      *exec.Cmd
	exited   chan struct{}
	err      error // Wait's, once exited
}

// procEnv is the driver's environment without WASMSTREAM_ variables: the
// processes take their whole config from their file.
func procEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WASMSTREAM_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs bin run -c p.config, its output appended to log, and waits
// (up to timeout) until its admin endpoint answers /readyz with 200.
func (p *proc) start(bin, log string, timeout time.Duration) error {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bin, "run", "-c", p.config)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = procEnv()
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while starting: %v (log: %s)", p.name, p.err, log)
		default:
		}
		if code, _ := httpGet("http://"+p.admin+"/readyz", time.Second); code == 200 {
			return nil
		}
		if time.Now().After(deadline) {
			_ = p.stop(30 * time.Second)
			return fmt.Errorf("%s not ready within %s (log: %s)", p.name, timeout, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM (a clean stop: commit, leave the group) and waits,
// then SIGKILL after grace. It returns the process's exit error, if any.
func (p *proc) stop(grace time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, grace)
	}
	return p.err
}

// snapshot is the part of the admin endpoint's /debug/snapshot the soak
// reads.
type snapshot struct {
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	RSSBytes      int64  `json:"rss_bytes"`
	Goroutines    int    `json:"goroutines"`
	Threads       int    `json:"threads"`
	OpenFDs       int    `json:"open_fds"`
	Processors    []struct {
		Name      string `json:"name"`
		Versions  int    `json:"versions_held"`
		Modules   int    `json:"modules"`
		Instances int    `json:"instances"`
		Memory    int64  `json:"memory_bytes"`
		Tasks     int    `json:"tasks"`
	} `json:"processors"`
}

// sample measures the process: its snapshot after a garbage collection,
// its readiness and its state directory. allTasks is the app's task count:
// the sample is settled when the process holds them all, each with one
// instance, and is ready.
func (p *proc) sample(at time.Duration, allTasks int) (Sample, error) {
	code, body := httpGet("http://"+p.admin+"/debug/snapshot?gc=1", 10*time.Second)
	if code != 200 {
		return Sample{}, fmt.Errorf("%s: /debug/snapshot: status %d: %.200s", p.name, code, body)
	}
	var snap snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return Sample{}, fmt.Errorf("%s: /debug/snapshot: %w", p.name, err)
	}
	s := Sample{At: at, Proc: p.name, HeapLive: snap.HeapLiveBytes, RSS: snap.RSSBytes, Goroutines: snap.Goroutines,
		FDs: snap.OpenFDs, Threads: snap.Threads, StateBytes: dirSize(p.stateDir)}
	for _, pr := range snap.Processors {
		s.Tasks += pr.Tasks
		s.Instances += pr.Instances
		s.Modules += pr.Modules
		s.Versions += pr.Versions
		s.PluginMemory += pr.Memory
	}
	ready, _ := httpGet("http://"+p.admin+"/readyz", 5*time.Second)
	s.Settled = ready == 200 && s.Tasks == allTasks && s.Instances == s.Tasks
	return s, nil
}

func httpGet(url string, timeout time.Duration) (int, []byte) {
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

// dirSize is the bytes of the files under dir (0 if it is not there).
func dirSize(dir string) int64 {
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

// freePort returns a TCP port on 127.0.0.1 that is free now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
