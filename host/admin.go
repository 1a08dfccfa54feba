package host

import (
	"fmt"
	"strings"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// adminSource serves the admin endpoint from the host. The endpoint starts
// at the beginning of New; until New finished (h.started) it reports a
// live, unready process with no processors. After that everything it
// reads is fixed or safe for concurrent use: the runner's Stats are
// atomics, Restoring and RestoreProgress lock.
type adminSource struct{ h *Host }

const startingReason = "starting: loading plugins and connecting to Kafka"

// Health is not ok once a task was stopped by on_error: fail (or a failed
// restore), or once Run ended with an error (the runner broken).
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
			if n := st.FailedTasks.Load(); n > 0 {
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
	out := make([]admin.ProcessorInfo, len(s.h.procs))
	for i, p := range s.h.procs {
		info := p.module.Info()
		out[i] = admin.ProcessorInfo{
			Name:    p.cfg.Name,
			Inputs:  p.cfg.Inputs,
			Outputs: p.cfg.Outputs,
			Stores:  p.cfg.Stores,
			OnError: p.cfg.OnError,
			Plugin: admin.PluginInfo{
				Path:       p.cfg.Plugin,
				SHA256:     info.SHA256,
				Size:       int64(info.Size),
				ABIVersion: info.ABIVersion,
			},
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
		snap.Processors = append(snap.Processors, m)
	}
	snap.RestoringTasks = s.h.runner.Restoring()
	for _, pr := range s.h.runner.RestoreProgress() {
		snap.Restores = append(snap.Restores, admin.RestoreProgress{
			Task: pr.Task, Store: pr.Store, Topic: pr.Topic, Partition: pr.Partition,
			Start: pr.Start, Target: pr.Target, Position: pr.Position, Restored: pr.Restored,
			Rate: pr.Rate, Wipes: pr.Wipes, Restarts: pr.Restarts, Done: pr.Done,
		})
	}
	return snap
}
