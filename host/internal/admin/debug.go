package admin

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// The debug endpoints (admin.debug, off by default): Go's profiler and a
// snapshot of what the process holds, for finding where memory or
// goroutines go. They are read-only but not free: a CPU profile or an
// execution trace runs for the seconds asked, a heap profile with gc=1
// and a snapshot with gc=1 run a garbage collection, and a goroutine dump
// stops the world while it is taken. They reveal the process's code
// paths and stacks (not record contents). There is no admin token yet:
// enable them only where the admin listener is reachable by operators
// alone (the default listen host is loopback); docs/operations.md says
// how to take each.
//
//	GET /debug/pprof/            the index of net/http/pprof
//	GET /debug/pprof/heap        heap profile (?gc=1 collects first; ?debug=1 as text)
//	GET /debug/pprof/goroutine   goroutines (?debug=2: every stack, as text)
//	GET /debug/pprof/profile     CPU profile (?seconds=N, default 30)
//	GET /debug/pprof/trace       execution trace (?seconds=N, default 1)
//	GET /debug/pprof/{allocs,block,mutex,threadcreate}
//	GET /debug/snapshot          JSON: DebugSnapshot (?gc=1 collects first)

// registerDebug adds the debug routes to mux.
func (s *Server) registerDebug(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol) // pprof's symbolizer posts
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/snapshot", s.snapshot)
}

// DebugSnapshot is what GET /debug/snapshot answers: the process's memory,
// goroutines, threads and file descriptors, and what it holds open for
// its processors. Its shape is an API: fields are added, never renamed.
type DebugSnapshot struct {
	Time time.Time `json:"time"`
	// GC says a garbage collection ran just before (gc=1): HeapLiveBytes
	// is then the live heap of now.
	GC bool `json:"gc"`
	// HeapLiveBytes is the heap the last garbage collection found live
	// (runtime/metrics /gc/heap/live:bytes); HeapAllocBytes the heap in
	// use now, garbage not yet collected included; HeapObjects its
	// objects; GCCycles the collections so far.
	HeapLiveBytes  uint64 `json:"heap_live_bytes"`
	HeapAllocBytes uint64 `json:"heap_alloc_bytes"`
	HeapObjects    uint64 `json:"heap_objects"`
	GCCycles       uint64 `json:"gc_cycles"`
	Goroutines     int    `json:"goroutines"`
	// RSSBytes, Threads and OpenFDs are the process's, from /proc/self;
	// -1 where /proc is not available.
	RSSBytes int64 `json:"rss_bytes"`
	Threads  int   `json:"threads"`
	OpenFDs  int   `json:"open_fds"`
	// Processors are what each processor holds (Lifecycle): versions held
	// compiled, modules and instances open.
	Processors []DebugProcessor `json:"processors"`
	// State is the state database's open task handles and scans; nil
	// without one.
	State *StateCounts `json:"state,omitempty"`
}

// DebugProcessor is one processor's part of a DebugSnapshot.
type DebugProcessor struct {
	Name      string `json:"name"`
	Versions  int    `json:"versions_held"`
	Modules   int    `json:"modules"`
	Instances int    `json:"instances"`
	// MemoryBytes is the instances' linear memory (part of the heap): the
	// plugins' own memory, which grows with each instance's work and
	// starts small in a new one.
	MemoryBytes int64 `json:"memory_bytes"`
	Tasks       int   `json:"tasks"`
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	gc := r.URL.Query().Get("gc") == "1"
	if gc {
		runtime.GC()
	}
	snap := TakeDebugSnapshot(s.src.Metrics())
	snap.GC = gc
	writeJSON(w, snap)
}

// TakeDebugSnapshot reads the runtime and /proc/self now, and what each
// processor holds from m.
func TakeDebugSnapshot(m Snapshot) DebugSnapshot {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/objects:objects"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(samples)
	value := func(i int) uint64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return samples[i].Value.Uint64()
		}
		return 0
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	d := DebugSnapshot{
		Time:           time.Now().UTC(),
		HeapLiveBytes:  value(0),
		HeapObjects:    value(1),
		GCCycles:       value(2),
		HeapAllocBytes: ms.HeapAlloc,
		Goroutines:     runtime.NumGoroutine(),
		RSSBytes:       -1,
		Threads:        -1,
		OpenFDs:        -1,
		Processors:     []DebugProcessor{},
		State:          m.StateOpen,
	}
	d.RSSBytes, d.Threads = procStatus()
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		d.OpenFDs = len(fds) - 1 // the directory's own descriptor, open while it is read
	}
	for _, p := range m.Processors {
		dp := DebugProcessor{Name: p.Name}
		if lc := p.Lifecycle; lc != nil {
			dp.Versions, dp.Modules, dp.Instances, dp.Tasks = lc.Held, lc.Modules, lc.Instances, len(lc.Tasks)
			dp.MemoryBytes = lc.MemoryBytes
		}
		d.Processors = append(d.Processors, dp)
	}
	return d
}

// procStatus reads the resident set and the thread count from
// /proc/self/status; -1 each where it cannot.
func procStatus() (rss int64, threads int) {
	rss, threads = -1, -1
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return rss, threads
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS": // in kB
			rss = n << 10
		case "Threads":
			threads = int(n)
		}
	}
	return rss, threads
}
