package host

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
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
	pc.Outputs = map[string]OutputConfig{"joined": {Topic: p.out}}
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

// The co-partitioning assignor is the whole group's: with one member per
// processor (the default), the members of a co-partitioned processor share
// the group with members of other processors, and all of them must ask
// for the same assignor, or the group agrees on one that does not
// co-partition (classic) or picks the one most members ask for (KIP-848),
// and tasks split across processes wait forever. Two processes, each with
// the join and a passthrough processor, under both protocols: every
// impression is joined with its click.
func TestCopartitionedProcessorNextToAnother(t *testing.T) {
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			p := newPipeline(t, wasmbuild.Build(t, "./plugins/clickjoin"), OnErrorFail)
			clicks, other, otherOut := p.b.Name(t, "clicks"), p.b.Name(t, "other"), p.b.Name(t, "other-out")
			for _, tp := range []string{clicks, other, otherOut} {
				p.b.CreateTopic(t, tp, 3, nil)
			}
			p.cfg.Kafka.GroupProtocol = GroupProtocol(protocol)
			pc := &p.cfg.Processors[0]
			pc.Name = "join"
			pc.Inputs = []string{p.in, clicks}
			pc.Outputs = map[string]OutputConfig{"joined": {Topic: p.out}}
			pc.Stores = []string{"clickjoin"}
			pc.Config = map[string]any{"window": "1m", "join": "inner"}
			p.cfg.Processors = append(p.cfg.Processors, ProcessorConfig{Name: "pass",
				Plugin: wasmbuild.Build(t, "./plugins/passthrough"), Inputs: []string{other},
				Outputs: map[string]OutputConfig{"out": {Topic: otherOut}}, OnError: OnErrorFail})
			p.cfg.ApplyDefaults()
			if err := p.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var stops []func() error
			for range 2 {
				p.cfg.State.Dir = t.TempDir()
				_, stop := p.run(t)
				stops = append(stops, stop)
			}
			const n = 60
			base := time.Now().Add(-time.Minute)
			var recs []*kgo.Record
			for i := range n {
				k := []byte("i" + strconv.Itoa(i))
				at := base.Add(time.Duration(i) * time.Millisecond)
				recs = append(recs, &kgo.Record{Topic: p.in, Key: k, Value: []byte("imp"), Timestamp: at},
					&kgo.Record{Topic: clicks, Key: k, Value: []byte("click"), Timestamp: at.Add(time.Second)},
					&kgo.Record{Topic: other, Key: k, Value: []byte("x"), Timestamp: at})
			}
			p.b.Produce(t, recs...)
			// Minutes, not seconds: under -race on a loaded machine two
			// processes' classic rebalances took most of a minute (one
			// clean-clone run had 56 of 60 joined at 60 s).
			testutil.Eventually(t, 3*time.Minute, func() error {
				if joined := latest(p.b.ReadCommitted(t, p.out, 30*time.Second)); len(joined) != n {
					return fmt.Errorf("%d of %d impressions joined", len(joined), n)
				}
				return nil
			})
			for _, stop := range stops {
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
