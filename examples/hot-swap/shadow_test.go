package hotswap_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// The README's shadow section, in one test process: two processes of the
// app run v1; v3 (v1 but "hello, Grace" for grace, and a failure for 1 % of
// the records) runs as a shadow, which reports grace's share of the
// records as its differences, with samples of grace only, and its
// failures; then v3 deployed shadow-first is refused for its failures, and
// no committed greeting carries its version; v2 deployed shadow-first with
// no limit on differences goes live.
func TestShadowAndShadowFirstOnTwoProcesses(t *testing.T) {
	b := testbroker.New(t)
	log := testbroker.Logger(t, slog.LevelWarn)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	v2, v3 := readWasm(t, "./examples/hot-swap/v2"), readWasm(t, "./examples/hot-swap/v3")
	load, in, out := exampleApp(t, b, dir)
	cfg := load()
	hosts, f := twoProcesses(t, b, load, in, log)
	defer f.stop()
	v1ID := hosts[0].Versions()[0].Active.ID
	f.greeted(t, b, out, v1ID)

	// wasmstream deploy -c pipeline.yaml greeter v3.wasm --shadow
	if _, err := host.DeployShadow(ctx, cfg, "greeter", v3, "v3", log); err != nil {
		t.Fatal(err)
	}
	// wasmstream shadow status -c pipeline.yaml greeter
	var sr host.ShadowResult
	waitFor(t, "both processes to report 1,200 records of the shadow", func() bool {
		var err error
		sr, err = host.Shadow(ctx, cfg, "greeter", 1000, log)
		if err != nil {
			t.Fatal(err)
		}
		return sr.Processes == 2 && sr.Status.Total.Records >= 1200
	})
	c := sr.Status.Total
	if !sr.Status.Running || c.Failures == 0 || c.Matches+c.Differences+c.Failures != c.Records {
		t.Fatalf("shadow of v3: %+v running=%v %q", c, sr.Status.Running, sr.Status.Stopped)
	}
	// grace is 1 name in 12 of the feeder's (and never one it fails).
	if r := c.DiffRatio(); math.Abs(r-1.0/12) > 0.02 {
		t.Fatalf("difference ratio %.4f, want about 1/12", r)
	}
	if math.Abs(c.FailureRatio()-0.01) > 0.005 {
		t.Fatalf("failure ratio %.4f, want about 0.01", c.FailureRatio())
	}
	for _, s := range sr.Samples {
		if s.Candidate.Error != "" {
			continue // a failure
		}
		if len(s.Active.Emits) != 1 || string(s.Active.Emits[0].Value) != "hello, grace" ||
			len(s.Candidate.Emits) != 1 || string(s.Candidate.Emits[0].Value) != "hello, Grace" {
			t.Fatalf("sample %+v: want grace greeted both ways", s)
		}
	}
	// wasmstream shadow stop -c pipeline.yaml greeter
	if err := host.StopShadow(ctx, cfg, "greeter", "test", log); err != nil {
		t.Fatal(err)
	}

	// wasmstream deploy -c pipeline.yaml greeter v3.wasm --shadow-first 5s
	// (max_failure_ratio 0.005 here: v3 fails 1 %)
	strict := load()
	strict.Swap.MaxFailureRatio = host.Set(0.005)
	_, sr, err := host.DeployShadowFirst(ctx, strict, "greeter", v3, "v3", 5*time.Second, -1, nil, log)
	if !errors.Is(err, host.ErrShadowRefused) || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "nothing of it was committed") {
		t.Fatalf("shadow-first of v3: %v; want it refused for its failures", err)
	}
	t.Logf("refused: %v", err)
	if sr.Status.Total.Failures == 0 {
		t.Fatalf("shadow-first of v3 counted no failure: %+v", sr.Status.Total)
	}
	if id := hosts[0].Versions()[0].Active.ID; id != v1ID {
		t.Fatalf("after the refusal the processes run %s", id)
	}
	f.greeted(t, b, out, v1ID)

	// wasmstream deploy -c pipeline.yaml greeter v2.wasm --shadow-first 3s
	dep, sr, err := host.DeployShadowFirst(ctx, cfg, "greeter", v2, "v2", 3*time.Second, -1, nil, log)
	if err != nil {
		t.Fatalf("shadow-first of v2: %v", err)
	}
	if c := sr.Status.Total; c.Records == 0 || c.Differences != c.Records {
		t.Fatalf("shadow of v2: %+v; want every greeting different", c)
	}
	converge(t, hosts, dep.Active.ID)
	f.greeted(t, b, out, dep.Active.ID)
	f.stop()
	for _, r := range b.ReadCommitted(t, out, 30*time.Second) {
		if v := version(r); strings.HasPrefix(v, "v3@") {
			t.Fatalf("a committed greeting carries the refused version %s: %q", v, r.Value)
		}
	}
}
