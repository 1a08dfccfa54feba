package conformance

import (
	"testing"
)

// An AssemblyScript plugin keeps its own heap (the incremental garbage
// collector the SDK builds with, sdk/ts/build.mjs): an instance lives for
// millions of records under the processor's memory limit, so its memory
// must stop growing once the collector has reached its steady state. This
// runs the TypeScript plugins over many records through raw wazero and
// requires the memory after the last record to be what it was after the
// first tenth.
func TestTSMemorySteady(t *testing.T) {
	const n = 200_000
	lines := wordLines()
	rec := benchRecord()
	for _, name := range []string{"passthrough", "wordcount"} {
		t.Run(name, func(t *testing.T) {
			h := newRawHost(t, []string{"counts", "out"}, []string{"counts"})
			mod, in := h.instantiate(t, pluginWasm(t, "ts", name))
			c := h.caller(mod, in)
			var warm uint32
			for i := range n {
				if name == "wordcount" {
					c.call(t, lines[i%len(lines)])
				} else {
					c.call(t, rec)
				}
				if i == n/10 {
					warm = mod.Memory().Size()
				}
			}
			end := mod.Memory().Size()
			t.Logf("%s: memory %d KiB after %d records, %d KiB after %d", name, warm>>10, n/10, end>>10, n)
			if end != warm {
				t.Errorf("%s: memory grew from %d KiB after %d records to %d KiB after %d", name, warm>>10, n/10, end>>10, n)
			}
		})
	}
}
