package host

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// withCustomSection returns wasm with a custom section appended: a module
// with the same code and another content hash, so every deploy of the
// benchmark is a new version the host must compile and swap to.
func withCustomSection(wasm []byte, name string) []byte {
	// wazero refuses a custom section with no bytes after its name (EOF),
	// though the spec allows it: give it some.
	payload := append(append([]byte{byte(len(name))}, name...), "wasmstream"...)
	out := append([]byte(nil), wasm...)
	out = append(out, 0) // custom section id
	out = appendULEB(out, uint32(len(payload)))
	return append(out, payload...)
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

// steadyFeed produces batch records (distinct keys, 100-byte values) to
// p's input every period until the returned function is called.
func steadyFeed(b testing.TB, p *pipeline, batch int, period time.Duration) (stop func()) {
	stopFeed := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for n := 0; ; n++ {
			recs := make([]*kgo.Record, batch)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(n*batch+i)), Value: make([]byte, 100)}
			}
			p.b.Produce(b, recs...)
			select {
			case <-stopFeed:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(stopFeed); <-fed }
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkSwapStall measures the per-task processing stall a swap causes
// under load: the time between the last record the old version processed
// and the first the new version processed, in the same task. The baseline,
// measured in the same run, is the same gap across commit points without
// a swap (every commit point pauses a task while its transaction ends).
// One op deploys swapsPerOp new versions one after the other (each a new
// content hash, so each is fetched from the control topic, compiled and
// instantiated in the background) to a host processing a steady 20,000
// records/s under exactly_once. Modules: the WAT passthrough (a few hundred bytes) and the
// Go-SDK passthrough plugin (~1.9 MB).
func BenchmarkSwapStall(b *testing.B) {
	const swapsPerOp = 10
	for _, c := range []struct {
		name, plugin string
	}{
		{"module=wat", engineTestdata("passthrough")},
		{"module=go-sdk", wasmbuild.Build(b, "./plugins/passthrough")},
	} {
		b.Run(c.name, func(b *testing.B) {
			base, err := os.ReadFile(c.plugin)
			if err != nil {
				b.Fatal(err)
			}
			p := newPipeline(b, c.plugin, OnErrorFail)
			h, stop := p.run(b)
			defer stop()
			// Steady input the host keeps up with (20,000 records/s), so
			// that every task always has a next record and a pause shows
			// as a gap between two records, not as idle time.
			defer steadyFeed(b, p, 40, 2*time.Millisecond)()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for s := 0; s < swapsPerOp; s++ {
					wasm := withCustomSection(base, "bench-"+strconv.Itoa(i)+"-"+strconv.Itoa(s))
					waitVersion(b, h, deployBytes(b, p, wasm, "v"+strconv.Itoa(s)))
					// Let records flow between swaps (and the new version's
					// first records be measured).
					time.Sleep(300 * time.Millisecond)
				}
			}
			b.StopTimer()
			stalls, gaps := h.runnerOf("proc").SwapStalls("proc")
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(percentile(stalls, 0.5)), "stall-p50-ms")
			b.ReportMetric(ms(percentile(stalls, 0.99)), "stall-p99-ms")
			b.ReportMetric(ms(percentile(gaps, 0.5)), "commitgap-p50-ms")
			b.ReportMetric(ms(percentile(gaps, 0.99)), "commitgap-p99-ms")
			b.ReportMetric(float64(len(stalls)), "stalls")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRollback measures how long a rollback through the control topic
// (wasmstream rollback) takes, from the publish until every task runs the
// previous version, in its two cases (RATIONALE.md, "Hot swap: versions held"): to
// the version before the active one, which the process holds compiled
// (held), and to one before that, released long ago, which it reads again
// from the control topic and compiles (compiled), without and with the
// file compilation cache (runtime.cache_dir). One op deploys three new
// versions (each a new content hash) and rolls back twice, alternating the
// two cases in the same run, under a steady 2,000 records/s.
func BenchmarkRollback(b *testing.B) {
	for _, c := range []struct {
		name, plugin string
		cache        bool
	}{
		{"module=wat/cache=off", engineTestdata("passthrough"), false},
		{"module=go-sdk/cache=off", wasmbuild.Build(b, "./plugins/passthrough"), false},
		{"module=go-sdk/cache=file", wasmbuild.Build(b, "./plugins/passthrough"), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			base, err := os.ReadFile(c.plugin)
			if err != nil {
				b.Fatal(err)
			}
			p := newPipeline(b, c.plugin, OnErrorFail)
			if c.cache {
				p.cfg.Runtime.CacheDir = b.TempDir()
			}
			p.cfg.Swap.CanaryWindow = Set(100 * time.Millisecond)
			h, stop := p.run(b)
			defer stop()
			defer steadyFeed(b, p, 20, 10*time.Millisecond)()
			pub := releasePublisherB(b, p)
			var held, compiled []time.Duration
			rollback := func() time.Duration {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				m, err := pub.Rollback(ctx, "proc", "", "", "bench")
				if err != nil {
					b.Fatal(err)
				}
				waitVersion(b, h, plugin.VersionID(m.Version))
				return time.Since(start)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for s := 0; s < 3; s++ {
					wasm := withCustomSection(base, "rollback-"+strconv.Itoa(i)+"-"+strconv.Itoa(s))
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					m, err := pub.Deploy(ctx, "proc", wasm, "v"+strconv.Itoa(s), "bench")
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					waitVersion(b, h, plugin.VersionID(m.Version))
				}
				held = append(held, rollback())         // to v1: held compiled
				compiled = append(compiled, rollback()) // to v0: released two deploys ago
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(percentile(held, 0.5)), "held-p50-ms")
			b.ReportMetric(ms(percentile(compiled, 0.5)), "compiled-p50-ms")
			b.ReportMetric(float64(percentile(compiled, 0.5))/float64(percentile(held, 0.5)), "compiled/held")
			b.ReportMetric(0, "ns/op")
		})
	}
}
