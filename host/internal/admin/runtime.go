package admin

import (
	"bytes"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// runtimeMetrics gathers the Go runtime's (go_*: goroutines, heap, GC
// pauses) and the process's (process_*: CPU seconds, resident memory, open
// file descriptors, start time) metrics with client_golang's standard
// collectors, so dashboards built for any Go service work unchanged (see
// RATIONALE.md, "Metrics"). They are process-wide: one registry for every
// Server.
var runtimeMetrics = func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}()

// writeRuntime appends the runtime and process families in the text format.
func writeRuntime(buf *bytes.Buffer) error {
	mfs, err := runtimeMetrics.Gather()
	if err != nil {
		return fmt.Errorf("admin: gathering runtime metrics: %w", err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(buf, mf); err != nil {
			return fmt.Errorf("admin: writing %s: %w", mf.GetName(), err)
		}
	}
	return nil
}
