// Package status is what the admin endpoint reports of a running host: it
// implements admin.Source from the runner's counters and the version
// registry. The endpoint starts before the host has loaded its plugins and
// reached Kafka; until Start it reports a live, unready process with no
// processors.
package status

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/shadow"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Running is a host that finished starting. Everything Source reads of it
// is fixed or safe for concurrent use: the runner's Stats are atomics;
// Restoring, RestoreProgress, CommitLatencies, Lag and the registry lock.
type Running struct {
	Processors []*plugin.Processor
	// Runners are the runners of the process's group members (one per
	// processor, or one for all); each processor is in exactly one.
	Runners  []*runner.Runner
	Versions *runner.Versions
	// TablesLoading, if set, is how many global tables are still loading
	// (the process is not ready until none is).
	TablesLoading func() int
	// State, if set, is the health of the process's state databases: a
	// failed one makes the process unready.
	State func() []admin.StateDB
	// StateOpen, if set, counts what the state databases have open (task
	// handles and scans); nil without a database.
	StateOpen func() *admin.StateCounts
}

// stats is processor's counters, from the runner that runs it.
func (h *Running) stats(processor string) *runner.Stats {
	for _, r := range h.Runners {
		if st := r.Stats(processor); st != nil {
			return st
		}
	}
	return nil
}

// paused reports whether the runner of processor holds it paused.
func (h *Running) paused(processor string) bool {
	for _, r := range h.Runners {
		if r.Paused(processor) {
			return true
		}
	}
	return false
}

// restoring is how many tasks of the process are restoring.
func (h *Running) restoring() int {
	n := 0
	for _, r := range h.Runners {
		n += r.Restoring()
	}
	return n
}

// commitHistogram adds up the members' commit-latency histograms (they
// share runner.CommitBounds).
func (h *Running) commitHistogram() (counts []uint64, total time.Duration) {
	for _, r := range h.Runners {
		c, t := r.CommitHistogram()
		if counts == nil {
			counts = make([]uint64, len(c))
		}
		for i := range c {
			counts[i] += c[i]
		}
		total += t
	}
	return counts, total
}

// Source serves the admin endpoint (admin.Source). The zero value is a
// host still starting.
type Source struct {
	running atomic.Pointer[Running]
	runErr  atomic.Pointer[error]
}

// Start reports that the host finished starting.
func (s *Source) Start(r *Running) { s.running.Store(r) }

// Stopped reports that the runner stopped on err (nil: cleanly).
func (s *Source) Stopped(err error) {
	if err != nil {
		s.runErr.Store(&err)
	}
}

const startingReason = "starting: loading plugins and connecting to Kafka"

// Health is not ok while this process holds a task stopped by on_error:
// fail (or a failed restore), or once Run ended with an error (the runner
// broken). A stopped task whose partition moves to another process (or is
// taken back by a rollback) no longer counts.
func (s *Source) Health() (bool, string) {
	h := s.running.Load()
	if h == nil {
		return true, ""
	}
	if perr := s.runErr.Load(); perr != nil {
		return false, "runner stopped: " + (*perr).Error()
	}
	var stopped []string
	for _, p := range h.Processors {
		if st := h.stats(p.Spec.Name); st != nil {
			if n := st.StoppedTasks.Load(); n > 0 {
				stopped = append(stopped, fmt.Sprintf("processor %s: %d tasks stopped (on_error: fail or a failed restore)", p.Spec.Name, n))
			}
		}
	}
	if len(stopped) > 0 {
		return false, strings.Join(stopped, "; ")
	}
	return true, ""
}

func (s *Source) Ready() (bool, string) {
	h := s.running.Load()
	if h == nil {
		return false, startingReason
	}
	if h.TablesLoading != nil {
		if n := h.TablesLoading(); n > 0 {
			return false, fmt.Sprintf("loading %d global tables", n)
		}
	}
	if h.State != nil {
		var failed []string
		for _, d := range h.State() {
			if d.Failed != "" {
				failed = append(failed, fmt.Sprintf("state database of %s failed: %s", d.Database, d.Failed))
			}
		}
		if len(failed) > 0 {
			return false, strings.Join(failed, "; ")
		}
	}
	if n := h.restoring(); n > 0 {
		return false, admin.RestoringReason(n)
	}
	return true, ""
}

func (s *Source) Processors() []admin.ProcessorInfo {
	h := s.running.Load()
	if h == nil {
		return nil
	}
	out := make([]admin.ProcessorInfo, len(h.Processors))
	for i, p := range h.Processors {
		snap, _ := h.Versions.Snapshot(p.Spec.Name)
		out[i] = admin.ProcessorInfo{
			Name:    p.Spec.Name,
			Inputs:  p.Spec.Inputs,
			Outputs: p.Spec.Outputs,
			Stores:  p.Spec.Stores,
			OnError: p.Spec.OnError,
			Plugin:  h.plugin(p, snap.Active),
			Paused:  h.paused(p.Spec.Name),
		}
	}
	return out
}

// plugin describes the processor's active version. The host keeps the
// module it started with (whose Info it has) and, for every version, what
// the control topic says of it (hash, size, label); a version swapped in
// later is known by the latter only.
func (h *Running) plugin(p *plugin.Processor, active versions.Info) admin.PluginInfo {
	info := p.StartInfo
	out := admin.PluginInfo{
		Path:       p.Spec.Path,
		SHA256:     info.SHA256,
		Size:       int64(info.Size),
		ABIVersion: info.ABIVersion,
	}
	if active.Hash == "" { // the host has no record of versions
		return out
	}
	out.SHA256, out.Version, out.Label = active.Hash, active.ID, active.Label
	if active.Hash != p.ConfigVersion.Hash {
		out.Path = ""
	}
	if active.Hash != info.SHA256 {
		out.Size, out.ABIVersion = active.Size, active.ABIVersion
	}
	return out
}

func (s *Source) Metrics() admin.Snapshot {
	var snap admin.Snapshot
	h := s.running.Load()
	if h == nil {
		return snap
	}
	bounds := make([]float64, len(runner.LatencyBounds))
	for i, b := range runner.LatencyBounds {
		bounds[i] = b.Seconds()
	}
	for _, p := range h.Processors {
		st := h.stats(p.Spec.Name)
		if st == nil {
			continue
		}
		m := admin.ProcessorMetrics{
			Name:          p.Spec.Name,
			RecordsIn:     st.RecordsIn.Load(),
			RecordsOut:    st.RecordsOut.Load(),
			Skipped:       st.Skipped.Load(),
			DeadLettered:  st.DeadLettered.Load(),
			FailedTasks:   st.FailedTasks.Load(),
			Commits:       st.Commits.Load(),
			Aborts:        st.Aborts.Load(),
			HeldBytes:     st.HeldBytes.Load(),
			InstanceBytes: st.InstanceBytes.Load(),
			BudgetCommits: st.BudgetCommits.Load(),
			TimerFirings:  st.TimerFirings.Load(),
			CommitCalls:   st.CommitCalls.Load(),
			TimersDropped: st.TimersDropped.Load(),
			MarksDropped:  st.MarksDropped.Load(),
			Failures:      st.Failures(),
			Latency: admin.Histogram{
				Bounds: bounds,
				Counts: make([]uint64, len(st.LatencyBuckets)),
				Sum:    float64(st.LatencySumNs.Load()) / 1e9,
			},
		}
		for i := range st.LatencyBuckets {
			m.Latency.Counts[i] = uint64(st.LatencyBuckets[i].Load())
		}
		if v, ok := h.Versions.Snapshot(p.Spec.Name); ok {
			m.Lifecycle = lifecycle(st, v)
			c := p.RT.Counts()
			m.Lifecycle.Modules, m.Lifecycle.Instances, m.Lifecycle.MemoryBytes = c.Modules, c.Instances, c.MemoryBytes
			m.Lifecycle.SnapshotBytes = c.SnapshotBytes
		}
		snap.Processors = append(snap.Processors, m)
	}
	counts, total := h.commitHistogram()
	commits := admin.Histogram{Counts: counts, Sum: total.Seconds()}
	for _, b := range runner.CommitBounds {
		commits.Bounds = append(commits.Bounds, b.Seconds())
	}
	snap.CommitLatency = &commits
	snap.RestoringTasks = h.restoring()
	if h.State != nil {
		snap.State = h.State()
	}
	if h.StateOpen != nil {
		snap.StateOpen = h.StateOpen()
	}
	for _, p := range h.Processors {
		for id, lag := range h.lag(p.Spec.Name) {
			snap.Lag = append(snap.Lag, admin.PartitionLag{Processor: id.Processor, Topic: id.Topic, Partition: id.Partition, Lag: lag})
		}
	}
	for _, r := range h.Runners {
		for id, lag := range r.StandbyLags() {
			snap.Standbys = append(snap.Standbys, admin.PartitionLag{Processor: id.Processor, Topic: id.Topic, Partition: id.Partition, Lag: lag.Behind})
		}
	}
	sort.Slice(snap.Standbys, func(i, j int) bool {
		a, b := snap.Standbys[i], snap.Standbys[j]
		return a.Processor < b.Processor || a.Processor == b.Processor && a.Partition < b.Partition
	})
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
	for _, p := range h.Processors {
		for _, r := range h.Runners {
			for id, tt := range r.TaskTimes(p.Spec.Name) {
				snap.Times = append(snap.Times, admin.TaskTime{Processor: id.Processor, Topic: id.Topic, Partition: id.Partition,
					PendingTimers: tt.PendingTimers, StreamTime: tt.StreamTime})
			}
		}
	}
	sort.Slice(snap.Times, func(i, j int) bool {
		a, b := snap.Times[i], snap.Times[j]
		if a.Processor != b.Processor {
			return a.Processor < b.Processor
		}
		return a.Partition < b.Partition
	})
	for _, pr := range h.restoreProgress() {
		snap.Restores = append(snap.Restores, admin.RestoreProgress{
			Task: pr.Task, Store: pr.Store, Topic: pr.Topic, Partition: pr.Partition,
			Start: pr.Start, Target: pr.Target, Position: pr.Position, Restored: pr.Restored,
			Rate: pr.Rate, Wipes: pr.Wipes, Restarts: pr.Restarts, Done: pr.Done,
		})
	}
	return snap
}

// lag is processor's lag by task, from the runner that runs it.
func (h *Running) lag(processor string) map[runner.TaskID]int64 {
	for _, r := range h.Runners {
		if r.Stats(processor) != nil {
			return r.Lag(processor)
		}
	}
	return nil
}

// restoreProgress is every member's restores.
func (h *Running) restoreProgress() []restore.Progress {
	var out []restore.Progress
	for _, r := range h.Runners {
		out = append(out, r.RestoreProgress()...)
	}
	return out
}

func lifecycle(st *runner.Stats, v versions.Snapshot) *admin.Lifecycle {
	lc := &admin.Lifecycle{
		Swaps:             st.Swaps.Load(),
		SwapFailures:      st.SwapFailures.Load(),
		SlowStarts:        st.SlowStarts.Load(),
		Rollbacks:         st.Rollbacks.Load(),
		Migrations:        st.Migrations.Load(),
		MigrationFailures: st.MigrationFailures.Load(),

		ShadowMatches:     st.ShadowMatches.Load(),
		ShadowDifferences: st.ShadowDifferences.Load(),
		ShadowFailures:    st.ShadowFailures.Load(),
		ShadowStops:       st.ShadowStops.Load(),
		Refusals:          v.Refusals,
		Held:              v.Held,
		Tasks:             make([]admin.TaskVersion, 0, len(v.Tasks)),
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

// Shadow returns processor's latest shadow run from the runner that runs
// the processor, and the samples it kept.
func (s *Source) Shadow(processor string) (shadow.Status, []shadow.Sample, bool) {
	h := s.running.Load()
	if h == nil {
		return shadow.Status{}, nil, false
	}
	for _, r := range h.Runners {
		if r.Stats(processor) == nil {
			continue
		}
		st, ok := r.ShadowStatus(processor)
		if !ok {
			return shadow.Status{}, nil, false
		}
		return st, r.ShadowSamples(processor, 0), true
	}
	return shadow.Status{}, nil, false
}
