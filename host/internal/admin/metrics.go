package admin

import (
	"bytes"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Prometheus text exposition format, version 0.0.4, written by hand:
// every metric here is read from a snapshot at scrape time, which is what
// the format is made for, and it keeps the module free of client_golang
// (see RATIONALE.md).
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric family to write. A family with no samples is not
// written.
type family struct {
	name, help, typ string
	samples         []sample
}

type sample struct {
	suffix string // "", "_bucket", "_sum", "_count"
	labels []Label
	value  float64
}

// Names of the built-in families; an extra family may not reuse one.
const (
	mRecordsIn     = "wasmstream_records_in_total"
	mRecordsOut    = "wasmstream_records_out_total"
	mSkipped       = "wasmstream_records_skipped_total"
	mDeadLettered  = "wasmstream_records_dead_lettered_total"
	mFailures      = "wasmstream_record_failures_total"
	mFailedTasks   = "wasmstream_tasks_failed_total"
	mCommits       = "wasmstream_commits_total"
	mAborts        = "wasmstream_transaction_aborts_total"
	mLatency       = "wasmstream_record_processing_seconds"
	mCommitSeconds = "wasmstream_commit_seconds"
	mPluginInfo    = "wasmstream_plugin_info"
	mTasks         = "wasmstream_tasks"
	mSwaps         = "wasmstream_plugin_swaps_total"
	mSwapFailures  = "wasmstream_plugin_swap_failures_total"
	mSlowStarts    = "wasmstream_plugin_slow_starts_total"
	mRollbacks     = "wasmstream_plugin_rollbacks_total"
	mMigrations    = "wasmstream_state_migrations_total"
	mMigrationFail = "wasmstream_state_migration_failures_total"
	mRefusals      = "wasmstream_plugin_refusals_total"
	mShadowRecords = "wasmstream_shadow_records_total"
	mShadowStops   = "wasmstream_shadow_stops_total"
	mHeld          = "wasmstream_plugin_versions_held"
	mPaused        = "wasmstream_processor_paused"
	mModules       = "wasmstream_plugin_modules"
	mInstances     = "wasmstream_plugin_instances"
	mMemory        = "wasmstream_plugin_memory_bytes"
	mSnapshots     = "wasmstream_plugin_snapshot_bytes"
	mStateTasks    = "wasmstream_state_task_handles"
	mStateIters    = "wasmstream_state_iterators"
	mRestoring     = "wasmstream_restoring_tasks"
	mRestored      = "wasmstream_restore_records"
	mRestoreTarget = "wasmstream_restore_target_offset"
	mRestorePos    = "wasmstream_restore_position_offset"
	mRestoreRate   = "wasmstream_restore_records_per_second"
	mRestoreWipes  = "wasmstream_restore_wipes"
	mRestoreDone   = "wasmstream_restore_done"
	mLag           = "wasmstream_consumer_lag_records"
	mStandbyLag    = "wasmstream_standby_lag_records"
	mTimerFirings  = "wasmstream_timer_firings_total"
	mCommitCalls   = "wasmstream_commit_calls_total"
	mTimersDropped = "wasmstream_timers_dropped_total"
	mMarksDropped  = "wasmstream_commit_marks_dropped_total"
	mHeldBytes     = "wasmstream_plugin_held_bytes"
	mInstanceBytes = "wasmstream_plugin_instance_bytes"
	mBudgetCommits = "wasmstream_budget_commits_total"
	mTimersPending = "wasmstream_timers_pending"
	mStreamLag     = "wasmstream_stream_time_lag_seconds"
	mStateFailures = "wasmstream_state_write_failures_total"
	mStateFailed   = "wasmstream_state_failed"
)

// buildFamilies turns a snapshot and the processor descriptions into
// metric families, in a fixed order. bad is called for every extra
// family that is not written, with the reason.
func buildFamilies(snap Snapshot, procs []ProcessorInfo, bad func(name, reason string)) []family {
	counter := func(name, help string) *family { return &family{name: name, help: help, typ: "counter"} }
	gauge := func(name, help string) *family { return &family{name: name, help: help, typ: "gauge"} }

	in := counter(mRecordsIn, "Records handed to the processor's plugin.")
	out := counter(mRecordsOut, "Records emitted by the processor's successful records.")
	skipped := counter(mSkipped, "Failed records skipped (on_error: skip).")
	dead := counter(mDeadLettered, "Failed records written to the dead-letter topic (on_error: dead_letter).")
	failures := counter(mFailures, "Failed records by failure kind.")
	failedTasks := counter(mFailedTasks, "Tasks stopped by a failed record under on_error: fail, or by a failed restore.")
	commits := counter(mCommits, "Commit points that committed the processor's input offsets.")
	aborts := counter(mAborts, "Transactions aborted (exactly_once); their work is done again.")
	heldBytes := gauge(mHeldBytes, "Bytes the host holds for the processor's plugins in this process (staged emits and state writes, timers, commit marks, input records not processed yet), by its tasks' accounts.")
	instanceBytes := gauge(mInstanceBytes, "Bytes of linear memory the processor's plugin instances in this process hold, charged to its tasks' accounts within runtime.memory_budget.")
	budgetCommits := counter(mBudgetCommits, "Commit points brought forward because a task held its window's budget of bytes (limits.window_bytes) or more than its share of runtime.memory_budget.")
	latency := &family{name: mLatency, typ: "histogram",
		help: "Time in the plugin per record, in seconds (a bucket's bound is exclusive, at nanosecond precision)."}
	swaps := counter(mSwaps, "Tasks switched to a new plugin version.")
	swapFailures := counter(mSwapFailures, "Tasks whose new plugin version did not start; they kept the running one.")
	slowStarts := counter(mSlowStarts, "Plugin instances whose start (init) took over half its budget; under a canary, the version is rolled back.")
	rollbacks := counter(mRollbacks, "Automatic rollbacks of a plugin version that failed its canary or its state migration.")
	migrations := counter(mMigrations, "Tasks whose state a new plugin version migrated (wasmstream_migrate).")
	migrationFailures := counter(mMigrationFail, "State migrations that failed; each rolled its plugin version back.")
	refusals := counter(mRefusals, "Plugin versions from the control topic this process refused to run; it kept the running one.")
	shadowRecords := counter(mShadowRecords, "Records a shadow run compared, by result: match (the candidate emitted what the active version did), difference, failure (of the candidate).")
	shadowStops := counter(mShadowStops, "Shadow runs that stopped themselves (fell behind, over their share of time or state, failing, or not starting).")
	// Tasks per version rather than one series per task: as many series
	// as versions running (one, two during a swap), not as partitions,
	// and none that come and go with every rebalance. /v1/processors
	// lists each task's version.
	tasks := gauge(mTasks, "Tasks assigned to this process, by the plugin version they run.")
	held := gauge(mHeld, "Plugin versions the processor holds compiled: the active one, the one a rollback returns to, a proposal not yet taken in, and any a task still runs.")
	modules := gauge(mModules, "Compiled plugin modules open for the processor (a released version's closes with its last instance).")
	instances := gauge(mInstances, "Plugin instances open for the processor: one per task, plus a swap's in the making and the previous version's during a canary window.")
	memory := gauge(mMemory, "Bytes of the linear memory of the processor's plugin instances (in the process's heap).")
	snapshots := gauge(mSnapshots, "Bytes of the snapshots of the processor's plugin instances after their init (shared between instances whose inits left the same memory), from which a replacement after a trap is restored.")

	firings := counter(mTimerFirings, "Timers fired (wasmstream_on_timer calls).")
	commitCalls := counter(mCommitCalls, "Commit-point calls for marked keys (wasmstream_on_commit).")
	timersDropped := counter(mTimersDropped, "Due timers dropped because the running version has no wasmstream_on_timer.")
	marksDropped := counter(mMarksDropped, "Marked keys dropped because the running version has no wasmstream_on_commit.")
	for _, p := range snap.Processors {
		l := []Label{{"processor", p.Name}}
		firings.add(l, float64(p.TimerFirings))
		commitCalls.add(l, float64(p.CommitCalls))
		timersDropped.add(l, float64(p.TimersDropped))
		marksDropped.add(l, float64(p.MarksDropped))
		in.add(l, float64(p.RecordsIn))
		out.add(l, float64(p.RecordsOut))
		skipped.add(l, float64(p.Skipped))
		dead.add(l, float64(p.DeadLettered))
		failedTasks.add(l, float64(p.FailedTasks))
		commits.add(l, float64(p.Commits))
		aborts.add(l, float64(p.Aborts))
		heldBytes.add(l, float64(p.HeldBytes))
		instanceBytes.add(l, float64(p.InstanceBytes))
		budgetCommits.add(l, float64(p.BudgetCommits))
		kinds := make([]string, 0, len(p.Failures))
		for k := range p.Failures {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			failures.add([]Label{{"processor", p.Name}, {"kind", k}}, float64(p.Failures[k]))
		}
		addHistogram(latency, l, p.Latency)
		if lc := p.Lifecycle; lc != nil {
			swaps.add(l, float64(lc.Swaps))
			swapFailures.add(l, float64(lc.SwapFailures))
			slowStarts.add(l, float64(lc.SlowStarts))
			rollbacks.add(l, float64(lc.Rollbacks))
			migrations.add(l, float64(lc.Migrations))
			migrationFailures.add(l, float64(lc.MigrationFailures))
			refusals.add(l, float64(lc.Refusals))
			for _, r := range []struct {
				result string
				n      int64
			}{{"match", lc.ShadowMatches}, {"difference", lc.ShadowDifferences}, {"failure", lc.ShadowFailures}} {
				shadowRecords.add([]Label{{"processor", p.Name}, {"result", r.result}}, float64(r.n))
			}
			shadowStops.add(l, float64(lc.ShadowStops))
			addTaskCounts(tasks, p.Name, activeVersion(procs, p.Name), lc.Tasks)
			held.add(l, float64(lc.Held))
			modules.add(l, float64(lc.Modules))
			instances.add(l, float64(lc.Instances))
			memory.add(l, float64(lc.MemoryBytes))
			snapshots.add(l, float64(lc.SnapshotBytes))
		}
	}

	commitSecs := &family{name: mCommitSeconds, typ: "histogram",
		help: "Duration of the process's commit points (flush, offset commit or transaction end) in seconds."}
	if snap.CommitLatency != nil {
		addHistogram(commitSecs, nil, *snap.CommitLatency)
	}

	info := gauge(mPluginInfo, "The plugin version each processor's new tasks start with (always 1).")
	for _, p := range procs {
		abi := ""
		if p.Plugin.ABIVersion > 0 {
			abi = strconv.Itoa(p.Plugin.ABIVersion)
		}
		info.add([]Label{
			{"processor", p.Name},
			{"sha256", p.Plugin.SHA256},
			{"abi_version", abi},
			{"version", p.Plugin.Version},
		}, 1)
	}

	paused := gauge(mPaused, "1 while the processor is paused (wasmstream pause) and this process applies it: its tasks fetch and process nothing; 0 otherwise.")
	for _, p := range procs {
		paused.add([]Label{{"processor", p.Name}}, b2f(p.Paused))
	}

	stateTasks := gauge(mStateTasks, "Task handles the state database has open.")
	stateIters := gauge(mStateIters, "Scans of state stores and tables not yet closed.")
	if snap.StateOpen != nil {
		stateTasks.add(nil, float64(snap.StateOpen.Tasks))
		stateIters.add(nil, float64(snap.StateOpen.Iterators))
	}

	restoring := gauge(mRestoring, "Tasks restoring their state now; the process is ready when 0.")
	restoring.add(nil, float64(snap.RestoringTasks))
	restored := gauge(mRestored, "Changelog records applied by the latest restore of the task's store.")
	target := gauge(mRestoreTarget, "Changelog offset the latest restore of the task's store reads up to.")
	pos := gauge(mRestorePos, "Next changelog offset the latest restore of the task's store reads.")
	rate := gauge(mRestoreRate, "Records applied per second by the latest restore of the task's store.")
	wipes := gauge(mRestoreWipes, "Task wipes made by the latest restore of the task's store.")
	done := gauge(mRestoreDone, "1 when the latest restore of the task's store reached its target.")
	for _, r := range snap.Restores {
		l := []Label{{"task", r.Task}, {"store", r.Store}}
		restored.add(l, float64(r.Restored))
		target.add(l, float64(r.Target))
		pos.add(l, float64(r.Position))
		rate.add(l, r.Rate)
		wipes.add(l, float64(r.Wipes))
		done.add(l, b2f(r.Done))
	}

	lag := gauge(mLag, "Records between the task's position and the end of its input partition.")
	for _, g := range snap.Lag {
		lag.add([]Label{{"processor", g.Processor}, {"topic", g.Topic}, {"partition", strconv.Itoa(int(g.Partition))}}, float64(g.Lag))
	}

	standbyLag := gauge(mStandbyLag, "Changelog records a standby replica kept here was behind when its latest catch-up round began.")
	for _, g := range snap.Standbys {
		standbyLag.add([]Label{{"processor", g.Processor}, {"partition", strconv.Itoa(int(g.Partition))}}, float64(g.Lag))
	}

	pending := gauge(mTimersPending, "Timers pending in the task, as of its latest commit point.")
	streamLag := gauge(mStreamLag, "How far the task's stream time (its largest record timestamp) is behind the wall clock, in seconds.")
	now := snap.Now
	if now == 0 {
		now = time.Now().UnixMilli()
	}
	for _, tt := range snap.Times {
		l := []Label{{"processor", tt.Processor}, {"topic", tt.Topic}, {"partition", strconv.Itoa(int(tt.Partition))}}
		pending.add(l, float64(tt.PendingTimers))
		if tt.StreamTime != math.MinInt64 {
			streamLag.add(l, float64(now-tt.StreamTime)/1000)
		}
	}

	stateFailures := counter(mStateFailures, "Failures of a state database: a write the disk refused (no_space, io) or did not answer in time (timeout); one per failure, however many writes it refused.")
	stateFailed := gauge(mStateFailed, "1 while the state database has failed (its processor stopped until it is reopened), else 0.")
	for _, d := range snap.State {
		l := []Label{{"database", d.Database}}
		stateFailed.add(l, b2f(d.Failed != ""))
		causes := make([]string, 0, len(d.Failures))
		for c := range d.Failures {
			causes = append(causes, c)
		}
		slices.Sort(causes)
		for _, c := range causes {
			stateFailures.add([]Label{{"database", d.Database}, {"cause", c}}, float64(d.Failures[c]))
		}
	}

	fams := []family{*in, *out, *skipped, *dead, *failures, *failedTasks, *commits, *aborts, *heldBytes, *instanceBytes, *budgetCommits, *latency, *commitSecs,
		*info, *tasks, *swaps, *swapFailures, *slowStarts, *rollbacks, *migrations, *migrationFailures, *refusals, *shadowRecords, *shadowStops, *held, *modules, *instances, *memory, *snapshots, *stateTasks, *stateIters,
		*restoring, *restored, *target, *pos, *rate, *wipes, *done,
		*lag, *standbyLag, *firings, *commitCalls, *timersDropped, *marksDropped, *pending, *streamLag, *stateFailures, *stateFailed, *paused}
	seen := map[string]bool{}
	for _, f := range fams {
		seen[f.name] = true
	}
	for _, x := range snap.Extra {
		if reason := checkExtra(x, seen); reason != "" {
			bad(x.Name, reason)
			continue
		}
		seen[x.Name] = true
		f := family{name: x.Name, help: x.Help, typ: string(x.Type)}
		for _, s := range x.Samples {
			f.add(s.Labels, s.Value)
		}
		fams = append(fams, f)
	}
	return fams
}

func (f *family) add(labels []Label, v float64) {
	f.samples = append(f.samples, sample{labels: labels, value: v})
}

// addHistogram adds a histogram's samples: cumulative buckets with the le
// label, then _sum and _count.
func addHistogram(f *family, labels []Label, h Histogram) {
	if len(h.Counts) != len(h.Bounds)+1 {
		return
	}
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		le := "+Inf"
		if i < len(h.Bounds) {
			le = formatFloat(h.Bounds[i])
		}
		f.samples = append(f.samples, sample{suffix: "_bucket", labels: withLabel(labels, "le", le), value: float64(cum)})
	}
	f.samples = append(f.samples,
		sample{suffix: "_sum", labels: labels, value: h.Sum},
		sample{suffix: "_count", labels: labels, value: float64(cum)})
}

// addTaskCounts adds the number of tasks running each version of a
// processor, in version order; the active version is written with 0 when
// no task runs it, so the processor's series never vanish.
func addTaskCounts(f *family, processor, active string, tasks []TaskVersion) {
	n := map[string]int{}
	if active != "" {
		n[active] = 0
	}
	for _, t := range tasks {
		n[t.Version]++
	}
	versions := make([]string, 0, len(n))
	for v := range n {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range versions {
		f.add([]Label{{"processor", processor}, {"version", v}}, float64(n[v]))
	}
}

func activeVersion(procs []ProcessorInfo, name string) string {
	for _, p := range procs {
		if p.Name == name {
			return p.Plugin.Version
		}
	}
	return ""
}

func withLabel(labels []Label, name, value string) []Label {
	out := make([]Label, len(labels), len(labels)+1)
	copy(out, labels)
	return append(out, Label{name, value})
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// checkExtra returns why an extra family cannot be written, or "".
func checkExtra(f Family, seen map[string]bool) string {
	switch {
	case !metricNameRE.MatchString(f.Name):
		return "invalid metric name"
	case seen[f.Name]:
		return "the name is already taken"
	case f.Type != Counter && f.Type != Gauge:
		return "type must be counter or gauge"
	}
	for _, s := range f.Samples {
		for _, l := range s.Labels {
			if !labelNameRE.MatchString(l.Name) || strings.HasPrefix(l.Name, "__") {
				return "invalid label name " + strconv.Quote(l.Name)
			}
		}
	}
	return ""
}

// writeText writes families in the text exposition format.
func writeText(buf *bytes.Buffer, fams []family) {
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		buf.WriteString("# HELP ")
		buf.WriteString(f.name)
		buf.WriteByte(' ')
		buf.WriteString(escapeHelp(f.help))
		buf.WriteString("\n# TYPE ")
		buf.WriteString(f.name)
		buf.WriteByte(' ')
		buf.WriteString(f.typ)
		buf.WriteByte('\n')
		for _, s := range f.samples {
			buf.WriteString(f.name)
			buf.WriteString(s.suffix)
			first := true
			for _, l := range s.labels {
				if l.Value == "" { // the same as no label, in Prometheus
					continue
				}
				if first {
					buf.WriteByte('{')
					first = false
				} else {
					buf.WriteByte(',')
				}
				buf.WriteString(l.Name)
				buf.WriteString(`="`)
				buf.WriteString(escapeLabel(l.Value))
				buf.WriteByte('"')
			}
			if !first {
				buf.WriteByte('}')
			}
			buf.WriteByte(' ')
			buf.WriteString(formatFloat(s.value))
			buf.WriteByte('\n')
		}
	}
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// formatFloat writes integers as integers (counters stay readable) and
// anything else in Go's shortest form, which the format accepts.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) <= 1<<53: // exact integers
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
