// Command counterslow is the counter test plugin made slow: before each
// record it spins about a millisecond, so a shadow run of it beside the
// counter (host/shadow_bench_test.go) takes far more than its share of
// time and must stop without delaying the active path's commit points.
package main

import (
	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
)

func init() { sdk.Handle(process) }

// sink keeps the spin from being optimized away.
var sink uint64

func process(r *sdk.Record) error {
	x := sink | 1
	for range 1_000_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink = x
	return countlib.Count(r)
}

func main() {}
