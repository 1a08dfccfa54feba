package host

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// A processor with stores and several inputs is co-partitioned: the host
// refuses inputs of different partition counts, naming them and the
// counts, before anything is consumed; with equal counts it starts.
func TestCopartitionedInputsNeedOnePartitionCount(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/clickjoin"), OnErrorFail)
	clicks := p.b.Name(t, "clicks")
	p.b.CreateTopic(t, clicks, 2, nil) // p.in has 3
	pc := &p.cfg.Processors[0]
	pc.Inputs = []string{p.in, clicks}
	pc.Outputs = map[string]string{"joined": p.out}
	pc.Stores = []string{"clickjoin"}
	pc.Config = map[string]any{"window": "1m"}
	p.cfg.State.Dir = t.TempDir()
	if err := p.cfg.Validate(); err != nil {
		t.Fatalf("config with two inputs and a store refused: %v", err)
	}
	_, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err == nil {
		t.Fatal("New accepted co-partitioned inputs of 3 and 2 partitions")
	}
	for _, want := range []string{`processor "proc"`, p.in + " has 3 partitions", clicks + " has 2", "same partition count"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}

	same := p.b.Name(t, "clicks3")
	p.b.CreateTopic(t, same, 3, nil)
	pc.Inputs = []string{p.in, same}
	h, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("New with equal partition counts: %v", err)
	}
	_ = h.Close()
}
