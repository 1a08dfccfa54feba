package host

import (
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// The window-staging plugin through the whole host
// (host/internal/engine/testdata/stager.wasm: 15 state values of 990,000
// bytes per record, 14.85 MB, inside every per-record limit), 20 records
// available at once, a commit interval (4 s) the run never reaches. The
// task's account (abi/ABI.md section 7) brings the commit point forward
// each time its window holds limits.window_bytes (64 MiB): at least 3
// commits brought forward, no record fails, every input has exactly one
// output, the processor's held-bytes gauge never passes the window plus
// one record, and the Go heap grows by at most three times what the
// account held (the staged values, their copy in the store's batch, the
// previous window's batch until flushed) plus 96 MiB (measured: under
// 60 MiB), beyond what the embedded broker keeps of the changelog. Before the account, the same
// plugin took one window to 4.0 GB.
func TestWindowStagingPluginThroughTheHost(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			const records, perRecord = 20, 15 * (990_000 + 2*9 + 64)
			b := testbroker.New(t)
			p := newPipelineOn(t, b, engineTestdata("stager"), OnErrorFail)
			in := b.Name(t, "stager-in")
			b.CreateTopic(t, in, 1, nil)
			p.in = in
			p.cfg.Guarantee = g
			p.cfg.Kafka.CommitInterval = 4 * time.Second
			p.cfg.State.Dir = t.TempDir()
			pc := &p.cfg.Processors[0]
			pc.Inputs, pc.Stores = []string{in}, []string{"s"}
			// A record stages 15 MB: about 0.4 s under the race
			// detector alone, past the default record_timeout of 1 s
			// with the other packages' race tests on 2 cores (a clean
			// CI run). This test is about the window's account, not
			// time: records get 10 s, and the transaction room for it.
			pc.Limits.RecordTimeout = 10 * time.Second
			p.cfg.Kafka.TransactionTimeout = 60 * time.Second
			if err := p.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			recs := make([]*kgo.Record, records)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v")}
			}
			b.Produce(t, recs...)

			runtime.GC()
			sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(sample)
			before := int64(sample[0].Value.Uint64())
			h, stop := p.run(t)
			var heldPeak, heapPeak atomic.Int64
			done := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				for {
					if st, ok := h.Stats("proc"); ok {
						heldPeak.Store(max(heldPeak.Load(), st.HeldBytes))
					}
					metrics.Read(sample)
					heapPeak.Store(max(heapPeak.Load(), int64(sample[0].Value.Uint64())-before))
					select {
					case <-done:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			p.waitProcessed(t)
			close(done)
			<-watched
			st, _ := h.Stats("proc")
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st.BudgetCommits < 3 || st.Commits < 3 {
				t.Errorf("%d commits, %d brought forward by the window's budget; want at least 3 of each", st.Commits, st.BudgetCommits)
			}
			if len(st.Failures) != 0 || st.Aborts != 0 {
				t.Errorf("failures %v, %d aborts: no record may fail below the cap", st.Failures, st.Aborts)
			}
			window := int64(p.cfg.Processors[0].Limits.WindowBytes)
			if held := heldPeak.Load(); held == 0 || held > window+perRecord+256<<10 {
				t.Errorf("the processor held %d bytes at most, want (0, %d]", held, window+perRecord)
			}
			allow := 3*heldPeak.Load() + 96<<20
			if !b.Real() {
				allow += records * perRecord // the embedded broker keeps the changelog in the process
			}
			if heapPeak.Load() > allow {
				t.Errorf("the live heap grew by %d MiB, over the %d MiB allowed", heapPeak.Load()>>20, allow>>20)
			}
			t.Logf("%s: %d commits, %d brought forward; held at most %.1f MiB; live heap +%.1f MiB (allowed %.1f)",
				g, st.Commits, st.BudgetCommits, float64(heldPeak.Load())/(1<<20), float64(heapPeak.Load())/(1<<20), float64(allow)/(1<<20))
			out := b.ReadCommitted(t, p.out, 30*time.Second)
			keys := map[string]bool{}
			for _, r := range out {
				keys[string(r.Key)] = true
			}
			if len(out) != records || len(keys) != records {
				t.Errorf("%d outputs of %d keys for %d inputs", len(out), len(keys), records)
			}
		})
	}
}
