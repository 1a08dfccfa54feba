package admin

import (
	"bytes"
	"math"
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
# HELP wasmstream_record_processing_seconds Time in the plugin per record, in seconds (a bucket's bound is exclusive, at nanosecond precision).
# TYPE wasmstream_record_processing_seconds histogram
wasmstream_record_processing_seconds_bucket{processor="p",le="0.001"} 2
wasmstream_record_processing_seconds_bucket{processor="p",le="1"} 2
wasmstream_record_processing_seconds_bucket{processor="p",le="+Inf"} 3
wasmstream_record_processing_seconds_sum{processor="p"} 1.5
wasmstream_record_processing_seconds_count{processor="p"} 3
# HELP wasmstream_plugin_info The plugin module each processor runs now (always 1).
# TYPE wasmstream_plugin_info gauge
wasmstream_plugin_info{processor="p",sha256="ff",abi_version="1"} 1
# HELP wasmstream_restoring_tasks Tasks restoring their state now; the process is ready when 0.
# TYPE wasmstream_restoring_tasks gauge
wasmstream_restoring_tasks 0
`
	if got := buf.String(); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}
