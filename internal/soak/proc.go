package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/internal/procs"
)

// proc is one `wasmstream run` process of the soak ("main" or "second").
type proc struct{ procs.Proc }

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
	code, body := procs.HTTPGet("http://"+p.Admin+"/debug/snapshot?gc=1", 10*time.Second)
	if code != 200 {
		return Sample{}, fmt.Errorf("%s: /debug/snapshot: status %d: %.200s", p.Name, code, body)
	}
	var snap snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return Sample{}, fmt.Errorf("%s: /debug/snapshot: %w", p.Name, err)
	}
	s := Sample{At: at, Proc: p.Name, HeapLive: snap.HeapLiveBytes, RSS: snap.RSSBytes, Goroutines: snap.Goroutines,
		FDs: snap.OpenFDs, Threads: snap.Threads, StateBytes: procs.DirSize(p.StateDir)}
	for _, pr := range snap.Processors {
		s.Tasks += pr.Tasks
		s.Instances += pr.Instances
		s.Modules += pr.Modules
		s.Versions += pr.Versions
		s.PluginMemory += pr.Memory
	}
	ready, _ := procs.HTTPGet("http://"+p.Admin+"/readyz", 5*time.Second)
	s.Settled = ready == 200 && s.Tasks == allTasks && s.Instances == s.Tasks
	return s, nil
}
