package admin

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{
		0:              "0",
		42:             "42",
		-3:             "-3",
		1 << 53:        "9007199254740992",
		1e15:           "1000000000000000",
		1e16:           "1e+16",
		0.25:           "0.25",
		1e-06:          "1e-06",
		2.5e-05:        "2.5e-05",
		math.Inf(1):    "+Inf",
		math.Inf(-1):   "-Inf",
		1200.5:         "1200.5",
		123456789.0625: "1.234567890625e+08",
	} {
		if got := formatFloat(v); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatFloat(math.NaN()); got != "NaN" {
		t.Errorf("formatFloat(NaN) = %q", got)
	}
}

// The whole exposition of a small snapshot, byte for byte.
func TestWriteTextExact(t *testing.T) {
	snap := Snapshot{
		Processors: []ProcessorMetrics{{
			Name: "p", RecordsIn: 3, RecordsOut: 2, Failures: map[string]int64{"trap": 1},
			Latency: Histogram{Bounds: []float64{0.001, 1}, Counts: []uint64{2, 0, 1}, Sum: 1.5},
		}},
	}
	procs := []ProcessorInfo{{Name: "p", Plugin: PluginInfo{SHA256: "ff", ABIVersion: 1}}}
	var buf bytes.Buffer
	writeText(&buf, buildFamilies(snap, procs, func(string, string) {}))
	want := `# HELP wasmstream_records_in_total Records handed to the processor's plugin.
# TYPE wasmstream_records_in_total counter
wasmstream_records_in_total{processor="p"} 3
# HELP wasmstream_records_out_total Records emitted by the processor's successful records.
# TYPE wasmstream_records_out_total counter
wasmstream_records_out_total{processor="p"} 2
# HELP wasmstream_records_skipped_total Failed records skipped (on_error: skip).
# TYPE wasmstream_records_skipped_total counter
wasmstream_records_skipped_total{processor="p"} 0
# HELP wasmstream_records_dead_lettered_total Failed records written to the dead-letter topic (on_error: dead_letter).
# TYPE wasmstream_records_dead_lettered_total counter
wasmstream_records_dead_lettered_total{processor="p"} 0
# HELP wasmstream_record_failures_total Failed records by failure kind.
# TYPE wasmstream_record_failures_total counter
wasmstream_record_failures_total{processor="p",kind="trap"} 1
# HELP wasmstream_tasks_failed_total Tasks stopped by a failed record under on_error: fail, or by a failed restore.
# TYPE wasmstream_tasks_failed_total counter
wasmstream_tasks_failed_total{processor="p"} 0
# HELP wasmstream_commits_total Commit points that committed the processor's input offsets.
# TYPE wasmstream_commits_total counter
wasmstream_commits_total{processor="p"} 0
# HELP wasmstream_transaction_aborts_total Transactions aborted (exactly_once); their work is done again.
# TYPE wasmstream_transaction_aborts_total counter
wasmstream_transaction_aborts_total{processor="p"} 0
# HELP wasmstream_plugin_held_bytes Bytes the host holds for the processor's plugins in this process (staged emits and state writes, timers, commit marks, input records not processed yet), by its tasks' accounts.
# TYPE wasmstream_plugin_held_bytes gauge
wasmstream_plugin_held_bytes{processor="p"} 0
# HELP wasmstream_plugin_instance_bytes Bytes of linear memory the processor's plugin instances in this process hold, charged to its tasks' accounts within runtime.memory_budget.
# TYPE wasmstream_plugin_instance_bytes gauge
wasmstream_plugin_instance_bytes{processor="p"} 0
# HELP wasmstream_budget_commits_total Commit points brought forward because a task held its window's budget of bytes (limits.window_bytes) or more than its share of runtime.memory_budget.
# TYPE wasmstream_budget_commits_total counter
wasmstream_budget_commits_total{processor="p"} 0
# HELP wasmstream_record_processing_seconds Time in the plugin per record, in seconds (a bucket's bound is exclusive, at nanosecond precision).
# TYPE wasmstream_record_processing_seconds histogram
wasmstream_record_processing_seconds_bucket{processor="p",le="0.001"} 2
wasmstream_record_processing_seconds_bucket{processor="p",le="1"} 2
wasmstream_record_processing_seconds_bucket{processor="p",le="+Inf"} 3
wasmstream_record_processing_seconds_sum{processor="p"} 1.5
wasmstream_record_processing_seconds_count{processor="p"} 3
# HELP wasmstream_plugin_info The plugin version each processor's new tasks start with (always 1).
# TYPE wasmstream_plugin_info gauge
wasmstream_plugin_info{processor="p",sha256="ff",abi_version="1"} 1
# HELP wasmstream_restoring_tasks Tasks restoring their state now; the process is ready when 0.
# TYPE wasmstream_restoring_tasks gauge
wasmstream_restoring_tasks 0
# HELP wasmstream_timer_firings_total Timers fired (wasmstream_on_timer calls).
# TYPE wasmstream_timer_firings_total counter
wasmstream_timer_firings_total{processor="p"} 0
# HELP wasmstream_commit_calls_total Commit-point calls for marked keys (wasmstream_on_commit).
# TYPE wasmstream_commit_calls_total counter
wasmstream_commit_calls_total{processor="p"} 0
# HELP wasmstream_timers_dropped_total Due timers dropped because the running version has no wasmstream_on_timer.
# TYPE wasmstream_timers_dropped_total counter
wasmstream_timers_dropped_total{processor="p"} 0
# HELP wasmstream_commit_marks_dropped_total Marked keys dropped because the running version has no wasmstream_on_commit.
# TYPE wasmstream_commit_marks_dropped_total counter
wasmstream_commit_marks_dropped_total{processor="p"} 0
# HELP wasmstream_processor_paused 1 while the processor is paused (wasmstream pause) and this process applies it: its tasks fetch and process nothing; 0 otherwise.
# TYPE wasmstream_processor_paused gauge
wasmstream_processor_paused{processor="p"} 0
`
	if got := buf.String(); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// The version families, byte for byte: plugin_info names the active
// version; tasks counts the tasks per version (p is in the middle of a
// swap; idle has no task, and its active version is written with 0); the
// swap counters; the commit summary.
func TestWriteTextExactVersions(t *testing.T) {
	snap := Snapshot{
		Processors: []ProcessorMetrics{{
			Name: "p",
			Lifecycle: &Lifecycle{
				Swaps: 5, SwapFailures: 1, Rollbacks: 2, Migrations: 3, MigrationFailures: 1, Refusals: 3, Held: 2, Modules: 2, Instances: 4, MemoryBytes: 1 << 20,
				Tasks: []TaskVersion{
					{Task: "p/in/0", Version: "v2@bbbbbbbbbbbb"},
					{Task: "p/in/1", Version: "config@aaaaaaaaaaaa"},
					{Task: "p/in/2", Version: "v2@bbbbbbbbbbbb"},
				},
			},
		}, {
			Name:      "idle",
			Lifecycle: &Lifecycle{},
		}},
		CommitLatency: &Histogram{Bounds: []float64{0.005, 0.1}, Counts: []uint64{7, 4, 1}, Sum: 0.5},
		StateOpen:     &StateCounts{Tasks: 3, Iterators: 1},
	}
	procs := []ProcessorInfo{
		{Name: "p", Plugin: PluginInfo{SHA256: "bb", ABIVersion: 1, Version: "v2@bbbbbbbbbbbb", Label: "v2"}},
		{Name: "idle", Plugin: PluginInfo{SHA256: "cc", Version: "config@cccccccccccc"}},
	}
	var buf bytes.Buffer
	writeText(&buf, buildFamilies(snap, procs, func(string, string) {}))
	got := buf.String()
	// Only the families of this test: from the commit histogram to the
	// restoring gauge (the counters before it are covered above).
	begin := strings.Index(got, "# HELP wasmstream_commit_seconds")
	end := strings.Index(got, "# HELP wasmstream_restoring_tasks")
	if begin < 0 || end < begin {
		t.Fatalf("families missing or out of order:\n%s", got)
	}
	want := `# HELP wasmstream_commit_seconds Duration of the process's commit points (flush, offset commit or transaction end) in seconds.
# TYPE wasmstream_commit_seconds histogram
wasmstream_commit_seconds_bucket{le="0.005"} 7
wasmstream_commit_seconds_bucket{le="0.1"} 11
wasmstream_commit_seconds_bucket{le="+Inf"} 12
wasmstream_commit_seconds_sum 0.5
wasmstream_commit_seconds_count 12
# HELP wasmstream_plugin_info The plugin version each processor's new tasks start with (always 1).
# TYPE wasmstream_plugin_info gauge
wasmstream_plugin_info{processor="p",sha256="bb",abi_version="1",version="v2@bbbbbbbbbbbb"} 1
wasmstream_plugin_info{processor="idle",sha256="cc",version="config@cccccccccccc"} 1
# HELP wasmstream_tasks Tasks assigned to this process, by the plugin version they run.
# TYPE wasmstream_tasks gauge
wasmstream_tasks{processor="p",version="config@aaaaaaaaaaaa"} 1
wasmstream_tasks{processor="p",version="v2@bbbbbbbbbbbb"} 2
wasmstream_tasks{processor="idle",version="config@cccccccccccc"} 0
# HELP wasmstream_plugin_swaps_total Tasks switched to a new plugin version.
# TYPE wasmstream_plugin_swaps_total counter
wasmstream_plugin_swaps_total{processor="p"} 5
wasmstream_plugin_swaps_total{processor="idle"} 0
# HELP wasmstream_plugin_swap_failures_total Tasks whose new plugin version did not start; they kept the running one.
# TYPE wasmstream_plugin_swap_failures_total counter
wasmstream_plugin_swap_failures_total{processor="p"} 1
wasmstream_plugin_swap_failures_total{processor="idle"} 0
# HELP wasmstream_plugin_slow_starts_total Plugin instances whose start (init) took over half its budget; under a canary, the version is rolled back.
# TYPE wasmstream_plugin_slow_starts_total counter
wasmstream_plugin_slow_starts_total{processor="p"} 0
wasmstream_plugin_slow_starts_total{processor="idle"} 0
# HELP wasmstream_plugin_rollbacks_total Automatic rollbacks of a plugin version that failed its canary or its state migration.
# TYPE wasmstream_plugin_rollbacks_total counter
wasmstream_plugin_rollbacks_total{processor="p"} 2
wasmstream_plugin_rollbacks_total{processor="idle"} 0
# HELP wasmstream_state_migrations_total Tasks whose state a new plugin version migrated (wasmstream_migrate).
# TYPE wasmstream_state_migrations_total counter
wasmstream_state_migrations_total{processor="p"} 3
wasmstream_state_migrations_total{processor="idle"} 0
# HELP wasmstream_state_migration_failures_total State migrations that failed; each rolled its plugin version back.
# TYPE wasmstream_state_migration_failures_total counter
wasmstream_state_migration_failures_total{processor="p"} 1
wasmstream_state_migration_failures_total{processor="idle"} 0
# HELP wasmstream_plugin_refusals_total Plugin versions from the control topic this process refused to run; it kept the running one.
# TYPE wasmstream_plugin_refusals_total counter
wasmstream_plugin_refusals_total{processor="p"} 3
wasmstream_plugin_refusals_total{processor="idle"} 0
# HELP wasmstream_shadow_records_total Records a shadow run compared, by result: match (the candidate emitted what the active version did), difference, failure (of the candidate).
# TYPE wasmstream_shadow_records_total counter
wasmstream_shadow_records_total{processor="p",result="match"} 0
wasmstream_shadow_records_total{processor="p",result="difference"} 0
wasmstream_shadow_records_total{processor="p",result="failure"} 0
wasmstream_shadow_records_total{processor="idle",result="match"} 0
wasmstream_shadow_records_total{processor="idle",result="difference"} 0
wasmstream_shadow_records_total{processor="idle",result="failure"} 0
# HELP wasmstream_shadow_stops_total Shadow runs that stopped themselves (fell behind, over their share of time or state, failing, or not starting).
# TYPE wasmstream_shadow_stops_total counter
wasmstream_shadow_stops_total{processor="p"} 0
wasmstream_shadow_stops_total{processor="idle"} 0
# HELP wasmstream_plugin_versions_held Plugin versions the processor holds compiled: the active one, the one a rollback returns to, a proposal not yet taken in, and any a task still runs.
# TYPE wasmstream_plugin_versions_held gauge
wasmstream_plugin_versions_held{processor="p"} 2
wasmstream_plugin_versions_held{processor="idle"} 0
# HELP wasmstream_plugin_modules Compiled plugin modules open for the processor (a released version's closes with its last instance).
# TYPE wasmstream_plugin_modules gauge
wasmstream_plugin_modules{processor="p"} 2
wasmstream_plugin_modules{processor="idle"} 0
# HELP wasmstream_plugin_instances Plugin instances open for the processor: one per task, plus a swap's in the making and the previous version's during a canary window.
# TYPE wasmstream_plugin_instances gauge
wasmstream_plugin_instances{processor="p"} 4
wasmstream_plugin_instances{processor="idle"} 0
# HELP wasmstream_plugin_memory_bytes Bytes of the linear memory of the processor's plugin instances (in the process's heap).
# TYPE wasmstream_plugin_memory_bytes gauge
wasmstream_plugin_memory_bytes{processor="p"} 1048576
wasmstream_plugin_memory_bytes{processor="idle"} 0
# HELP wasmstream_plugin_snapshot_bytes Bytes of the snapshots of the processor's plugin instances after their init (shared between instances whose inits left the same memory), from which a replacement after a trap is restored.
# TYPE wasmstream_plugin_snapshot_bytes gauge
wasmstream_plugin_snapshot_bytes{processor="p"} 0
wasmstream_plugin_snapshot_bytes{processor="idle"} 0
# HELP wasmstream_state_task_handles Task handles the state database has open.
# TYPE wasmstream_state_task_handles gauge
wasmstream_state_task_handles 3
# HELP wasmstream_state_iterators Scans of state stores and tables not yet closed.
# TYPE wasmstream_state_iterators gauge
wasmstream_state_iterators 1
`
	if got := got[begin:end]; got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}
