package host

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// adminSource serves the admin endpoint from the host. The endpoint starts
// at the beginning of New; until New finished (h.started) it reports a
// live, unready process with no processors. After that everything it
// reads is fixed or safe for concurrent use: the runner's Stats are
// atomics; Restoring, RestoreProgress, CommitLatencies and Versions lock.
type adminSource struct{ h *Host }

const startingReason = "starting: loading plugins and connecting to Kafka"

// Health is not ok while this process holds a task stopped by on_error:
// fail (or a failed restore), or once Run ended with an error (the runner
// broken). A stopped task whose partition moves to another process (or is
// taken back by a rollback) no longer counts.
func (s adminSource) Health() (bool, string) {
	if !s.h.started.Load() {
		return true, ""
	}
	if perr := s.h.runErr.Load(); perr != nil {
		return false, "runner stopped: " + (*perr).Error()
	}
	var stopped []string
	for _, p := range s.h.procs {
		if st := s.h.runner.Stats(p.cfg.Name); st != nil {
			if n := st.StoppedTasks.Load(); n > 0 {
				stopped = append(stopped, fmt.Sprintf("processor %s: %d tasks stopped (on_error: fail or a failed restore)", p.cfg.Name, n))
			}
		}
	}
	if len(stopped) > 0 {
		return false, strings.Join(stopped, "; ")
	}
	return true, ""
}

func (s adminSource) Ready() (bool, string) {
	if !s.h.started.Load() {
		return false, startingReason
	}
	if n := s.h.runner.Restoring(); n > 0 {
		return false, admin.RestoringReason(n)
	}
	return true, ""
}

func (s adminSource) Processors() []admin.ProcessorInfo {
	if !s.h.started.Load() {
		return nil
	}
	versions := s.versions()
	out := make([]admin.ProcessorInfo, len(s.h.procs))
	for i, p := range s.h.procs {
		out[i] = admin.ProcessorInfo{
			Name:    p.cfg.Name,
			Inputs:  p.cfg.Inputs,
			Outputs: p.cfg.Outputs,
			Stores:  p.cfg.Stores,
			OnError: p.cfg.OnError,
			Plugin:  s.plugin(p, versions[p.cfg.Name]),
		}
	}
	return out
}

// versions returns Host.Versions by processor.
func (s adminSource) versions() map[string]ProcessorVersions {
	out := map[string]ProcessorVersions{}
	for _, v := range s.h.Versions() {
		out[v.Processor] = v
	}
	return out
}

// plugin describes the processor's active version. The host keeps the
// module it started with (whose Info it has) and, for every version, what
// the control topic says of it (hash, size, label); a version swapped in
// later is known by the latter only.
func (s adminSource) plugin(p *loadedProcessor, v ProcessorVersions) admin.PluginInfo {
	info := p.module.Info()
	out := admin.PluginInfo{
		Path:       p.cfg.Plugin,
		SHA256:     info.SHA256,
		Size:       int64(info.Size),
		ABIVersion: info.ABIVersion,
	}
	if v.Active.Hash == "" { // the host has no record of versions
		return out
	}
	out.SHA256, out.Version, out.Label = v.Active.Hash, v.Active.ID, v.Active.Label
	if v.Active.Hash != p.configVersion.Hash {
		out.Path = ""
	}
	if v.Active.Hash != info.SHA256 {
		out.Size, out.ABIVersion = 0, 0
		if pv := s.h.versions[p.cfg.Name]; pv != nil {
			if cv, ok := pv.lookup(v.Active.ID); ok {
				out.Size = cv.Size
			}
		}
		// It compiled, so it speaks one of the host's versions: known
		// when the host speaks only one.
		if len(engine.SupportedABIVersions) == 1 {
			out.ABIVersion = engine.SupportedABIVersions[0]
		}
	}
	return out
}

func (s adminSource) Metrics() admin.Snapshot {
	var snap admin.Snapshot
	if !s.h.started.Load() {
		return snap
	}
	bounds := make([]float64, len(runner.LatencyBounds))
	for i, b := range runner.LatencyBounds {
		bounds[i] = b.Seconds()
	}
	versions := s.versions()
	for _, p := range s.h.procs {
		st := s.h.runner.Stats(p.cfg.Name)
		if st == nil {
			continue
		}
		m := admin.ProcessorMetrics{
			Name:         p.cfg.Name,
			RecordsIn:    st.RecordsIn.Load(),
			RecordsOut:   st.RecordsOut.Load(),
			Skipped:      st.Skipped.Load(),
			DeadLettered: st.DeadLettered.Load(),
			FailedTasks:  st.FailedTasks.Load(),
			Commits:      st.Commits.Load(),
			Aborts:       st.Aborts.Load(),
			Failures:     st.Failures(),
			Latency: admin.Histogram{
				Bounds: bounds,
				Counts: make([]uint64, len(st.LatencyBuckets)),
				Sum:    float64(st.LatencySumNs.Load()) / 1e9,
			},
		}
		for i := range st.LatencyBuckets {
			m.Latency.Counts[i] = uint64(st.LatencyBuckets[i].Load())
		}
		if v, ok := versions[p.cfg.Name]; ok {
			m.Lifecycle = s.lifecycle(st, v)
		}
		snap.Processors = append(snap.Processors, m)
	}
	counts, total := s.h.runner.CommitHistogram()
	commits := admin.Histogram{Counts: counts, Sum: total.Seconds()}
	for _, b := range runner.CommitBounds {
		commits.Bounds = append(commits.Bounds, b.Seconds())
	}
	snap.CommitLatency = &commits
	snap.RestoringTasks = s.h.runner.Restoring()
	for _, pc := range s.h.cfg.Processors {
		for id, lag := range s.h.runner.Lag(pc.Name) {
			snap.Lag = append(snap.Lag, admin.PartitionLag{Processor: id.Processor, Topic: id.Topic, Partition: id.Partition, Lag: lag})
		}
	}
	sort.Slice(snap.Lag, func(i, j int) bool {
		a, b := snap.Lag[i], snap.Lag[j]
		if a.Processor != b.Processor {
			return a.Processor < b.Processor
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	for _, pr := range s.h.runner.RestoreProgress() {
		snap.Restores = append(snap.Restores, admin.RestoreProgress{
			Task: pr.Task, Store: pr.Store, Topic: pr.Topic, Partition: pr.Partition,
			Start: pr.Start, Target: pr.Target, Position: pr.Position, Restored: pr.Restored,
			Rate: pr.Rate, Wipes: pr.Wipes, Restarts: pr.Restarts, Done: pr.Done,
		})
	}
	return snap
}

func (s adminSource) lifecycle(st *runner.Stats, v ProcessorVersions) *admin.Lifecycle {
	lc := &admin.Lifecycle{
		Swaps:        st.Swaps.Load(),
		SwapFailures: st.SwapFailures.Load(),
		Rollbacks:    st.Rollbacks.Load(),
		Refusals:     v.Refusals,
		Tasks:        make([]admin.TaskVersion, 0, len(v.Tasks)),
	}
	for task, id := range v.Tasks {
		lc.Tasks = append(lc.Tasks, admin.TaskVersion{Task: task, Version: id})
	}
	sort.Slice(lc.Tasks, func(i, j int) bool { return lc.Tasks[i].Task < lc.Tasks[j].Task })
	for _, r := range v.Refused {
		lc.Refused = append(lc.Refused, admin.Refusal{
			Version: r.ID, SHA256: r.Hash, Label: r.Label, Reason: r.Reason, At: r.At,
		})
	}
	return lc
}

// CommitLatencies returns the durations of the latest commit points that
// had work to commit (at most 4096), how many there were in all, and their
// total duration. Safe for concurrent use; zero before New returned.
func (h *Host) CommitLatencies() (latest []time.Duration, count int, total time.Duration) {
	if !h.started.Load() {
		return nil, 0, 0
	}
	return h.runner.CommitLatencies()
}
