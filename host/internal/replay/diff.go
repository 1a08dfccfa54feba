package replay

import (
	"bytes"
	"context"

	"github.com/wasmstream/wasmstream/host/internal/engine"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
)

// State is a task's starting state: per store (in the processor's store
// order), its keys and values. A replay never writes to it: each run
// copies it.
type State struct {
	Stores []map[string][]byte
}

// VersionHeader is the header the runner adds to every output record
// (runner.HeaderVersion, host/internal/runner/swap.go);
// emits are compared without it, as it differs by construction.
const VersionHeader = "wasmstream-version"

// DiffCounts are what a diff of two versions over one task found. Every
// record is in exactly one of Matching, Differing and the failures:
// Records = Matching + Differing + Failed + AgainstFailed - FailedBoth.
type DiffCounts struct {
	Partition int32 `json:"partition"`
	Records   int   `json:"records"`
	// Matching: both versions processed the record and emitted the same
	// records (output, key, value, headers but the version header, in
	// order). Differing: both processed it, the emits differ.
	Matching  int `json:"matching"`
	Differing int `json:"differing"`
	// Failed and AgainstFailed count the records each version failed;
	// FailedBoth those both failed (a failure on one side only is a
	// difference, sampled as one).
	Failed        int `json:"failed"`
	AgainstFailed int `json:"against_failed"`
	FailedBoth    int `json:"failed_both"`
}

// Side is one version's behaviour on a sampled record.
type Side struct {
	Emits []Line `json:"emits"`
	Error string `json:"error,omitempty"`
}

// Sample is a record on which the versions differ.
type Sample struct {
	In      Source `json:"in"`
	Version Side   `json:"version"`
	Against Side   `json:"against"`
}

// Diff runs mod and against (two versions of p) over records, one task's,
// each from its own copy of start (nil: empty), in step, and compares
// their emits record by record. The first maxSamples records on which they
// differ are returned with both sides.
func Diff(ctx context.Context, p *plugin.Processor, mod, against *engine.Module, records []Input, start *State, maxSamples int) (DiffCounts, []Sample, error) {
	var c DiffCounts
	var samples []Sample
	a, err := newRun(ctx, p, mod, start)
	if err != nil {
		return c, nil, err
	}
	defer a.close(ctx)
	b, err := newRun(ctx, p, against, start)
	if err != nil {
		return c, nil, err
	}
	defer b.close(ctx)
	for _, r := range order(records) {
		if err := ctx.Err(); err != nil {
			return c, samples, err
		}
		c.Records++
		la, ea := a.step(ctx, r)
		la = cloneLines(la) // a's lines are reused by its next step only, but b's step must not see them change
		lb, eb := b.step(ctx, r)
		same := false
		switch {
		case ea != nil && eb != nil:
			c.Failed++
			c.AgainstFailed++
			c.FailedBoth++
			continue
		case ea != nil:
			c.Failed++
		case eb != nil:
			c.AgainstFailed++
		case sameEmits(la, lb):
			c.Matching++
			same = true
		default:
			c.Differing++
		}
		if same || len(samples) >= maxSamples {
			continue
		}
		s := Sample{In: r.source(), Version: Side{Emits: la}, Against: Side{Emits: cloneLines(lb)}}
		if ea != nil {
			s.Version.Error = ea.Error()
		}
		if eb != nil {
			s.Against.Error = eb.Error()
		}
		samples = append(samples, s)
	}
	return c, samples, nil
}

func cloneLines(ls []Line) []Line {
	if ls == nil {
		return []Line{}
	}
	return append([]Line{}, ls...) // a Line's bytes are the sink's own copies
}

// sameEmits compares two records' emits as a shadow run does: output, key,
// value (a null and an empty one differ) and headers other than
// VersionHeader, in emit order. Timestamps and explicit partitions are not
// compared.
func sameEmits(a, b []Line) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Output != y.Output || !sameBytes(x.Key, y.Key) || !sameBytes(x.Value, y.Value) {
			return false
		}
		hx, hy := headersBut(x.Headers), headersBut(y.Headers)
		if len(hx) != len(hy) {
			return false
		}
		for j := range hx {
			if hx[j].Key != hy[j].Key || !sameBytes(hx[j].Value, hy[j].Value) {
				return false
			}
		}
	}
	return true
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func headersBut(hs []Header) []Header {
	var out []Header
	for _, h := range hs {
		if h.Key != VersionHeader {
			out = append(out, h)
		}
	}
	return out
}
