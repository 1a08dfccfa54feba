//go:build unix

package plugins_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// The guest side of a windowed count next to a plain count, in real Wasm,
// through the minimal host of this package (maps, no staging, no Kafka):
// what the plugin and its ABI calls cost per record, not what a real host
// adds for state and timers (host/internal/engine's benchmarks do that).
// Both count 1,000 keys cycled, one record every 10 ms of event time;
// windowcount keeps one-minute tumbling windows, emits final, and its due
// timers are fired every 1,000 records. cpu-ns/record is the process's CPU
// time per record, which a machine shared with other work leaves
// meaningful when ns/op (wall time) is not.
func BenchmarkTimePlugins(b *testing.B) {
	t := &testing.T{}
	rt := newRuntime(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, pkg string
		r         run
	}{
		{"wordcount-plain", "./plugins/wordcount", run{outputs: []string{"counts"}, stores: []string{"counts"}}},
		{"windowcount-tumbling-final", "./plugins/windowcount", run{outputs: []string{"counts"}, stores: []string{"windows"},
			config: `{"size":"1m"}`}},
	} {
		b.Run(c.name, func(b *testing.B) {
			mod := rt.instance(t, c.pkg, c.r)
			if t.Failed() {
				b.Fatal("instance failed")
			}
			input := mod.ExportedFunction(abi.ExportInput)
			process := mod.ExportedFunction(abi.ExportProcess)
			onTimer := mod.ExportedFunction(abi.ExportOnTimer)
			stack := make([]uint64, 1)
			// deliver writes enc into the plugin's input buffer and calls fn.
			deliver := func(fn interface {
				CallWithStack(context.Context, []uint64) error
			}, enc []byte) {
				stack[0] = uint64(len(enc))
				if err := input.CallWithStack(ctx, stack); err != nil || !mod.Memory().Write(uint32(stack[0]), enc) {
					b.Fatalf("input: %v", err)
				}
				stack[0] = uint64(len(enc))
				if err := fn.CallWithStack(ctx, stack); err != nil || stack[0] != uint64(abi.StatusOK) {
					b.Fatalf("call: %v, status %d: %s", err, stack[0], rt.h.errMsg)
				}
			}
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = []byte("key" + strconv.Itoa(i))
			}
			var enc []byte
			emitted := 0
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				k := keys[i%len(keys)]
				rec := abi.Record{Timestamp: 1_700_000_000_000 + int64(i)*10, Key: k, Value: k}
				rt.h.stream, rt.h.callTS = max(rt.h.stream, rec.Timestamp), rec.Timestamp
				enc = rec.AppendEncode(enc[:0])
				deliver(process, enc)
				if i%1000 == 999 && onTimer != nil {
					var due []timerID
					for id := range maps.Keys(rt.h.timers) {
						if id.ts <= rt.h.stream {
							due = append(due, id)
						}
					}
					slices.SortFunc(due, func(a, b timerID) int { return int(a.ts - b.ts) })
					for _, id := range due {
						delete(rt.h.timers, id)
						tr := abi.Trigger{Timestamp: id.ts, StreamTime: rt.h.stream, WallTime: rt.h.wall, Kind: id.kind, Key: []byte(id.key)}
						deliver(onTimer, tr.AppendEncode(enc[:0]))
					}
				}
				emitted += len(rt.h.emitted)
				rt.h.emitted, rt.h.records = rt.h.emitted[:0], rt.h.records[:0]
			}
			b.ReportMetric(float64(emitted)/float64(b.N), "emits/record")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/record")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
