// Package demo is `wasmstream demo`: an embedded Kafka, bundled plugins,
// sample records in, processed records out, printed side by side. Part one
// masks PII with a stateless plugin; part two counts words with a stateful
// one and shows its state surviving a restart (local store and checkpoint)
// and a move to an empty state directory (restore from the changelog). It
// uses only the public host API, as a user's program would.
package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
)

// MaskWasm is plugins/mask built for wasip1 (make demo-plugins).
//
//go:embed plugins/mask.wasm
var MaskWasm []byte

// WordcountWasm is plugins/wordcount built for wasip1 (make demo-plugins).
//
//go:embed plugins/wordcount.wasm
var WordcountWasm []byte

// Options configure Run.
type Options struct {
	Out     io.Writer    // where the demo prints; required
	Logger  *slog.Logger // host logs; nil = discard
	Records int          // sample records to produce; default 12
	// Brokers, when set, runs the demo against an existing cluster
	// instead of the embedded one; its topic and app names then get a
	// suffix unique to the run, since such a cluster keeps earlier runs'
	// data.
	Brokers []string
	// Timeout bounds the whole demo. Default 60s.
	Timeout time.Duration
	// Port is the embedded broker's port on 127.0.0.1; 0 means any free
	// port.
	Port int
	// Keep, when set, is a directory where the word count's config
	// (pipeline.yaml), plugin and state are kept after the demo, for
	// wasmstream state dump; "" removes everything.
	Keep string
}

var names = []string{"ada", "grace", "alan", "edsger", "barbara", "donald", "frances", "ken", "dennis", "margaret", "john", "leslie"}

// Run runs the demo and returns when every sample record came out of the
// pipeline and the stateful part has shown its restarts, or with an error
// naming what did not happen.
func Run(ctx context.Context, o Options) error {
	if o.Records <= 0 {
		o.Records = 12
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "wasmstream-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wcDir := dir
	if o.Keep != "" {
		// Part two starts from empty state directories, whatever an
		// earlier --keep left there.
		if wcDir, err = filepath.Abs(o.Keep); err != nil {
			return fmt.Errorf("--keep: %w", err)
		}
		for _, d := range []string{"state-a", "state-b"} {
			if err := os.RemoveAll(filepath.Join(wcDir, d)); err != nil {
				return fmt.Errorf("--keep: %w", err)
			}
		}
		if err := os.MkdirAll(wcDir, 0o755); err != nil {
			return fmt.Errorf("--keep: %w", err)
		}
	}

	// One broker for the whole demo, so that the hosts of part two, started
	// one after the other, share the topics and the changelog. A host
	// starts its own embedded broker only when kafka.brokers is empty, and
	// that broker would end with the host.
	brokers, suffix := o.Brokers, ""
	if len(brokers) == 0 {
		copts := []kfake.Opt{kfake.NumBrokers(1)}
		if o.Port != 0 {
			copts = append(copts, kfake.Ports(o.Port))
		}
		c, err := kfake.NewCluster(copts...)
		if err != nil {
			return fmt.Errorf("embedded kafka: %w", err)
		}
		defer c.Close()
		brokers = c.ListenAddrs()
		addrs := strings.Join(brokers, ",")
		fmt.Fprintf(o.Out, "embedded Kafka (development only) listening on %s until the demo ends\n", addrs)
	} else {
		suffix = "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if err := runMask(ctx, o, dir, brokers, suffix); err != nil {
		return err
	}
	return runWordcount(ctx, o, wcDir, brokers, suffix)
}

// runMask is part one: the mask plugin hashes PII fields of sign-ups.
func runMask(ctx context.Context, o Options, dir string, brokers []string, suffix string) error {
	plugin := filepath.Join(dir, "mask.wasm")
	if err := os.WriteFile(plugin, MaskWasm, 0o644); err != nil {
		return err
	}
	in, outTopic := "signups"+suffix, "signups-masked"+suffix
	cfg := &host.Config{
		AppID: "wasmstream-demo" + suffix,
		Kafka: host.KafkaConfig{Brokers: brokers, CreateTopics: true, TopicPartitions: 3, CommitInterval: 50 * time.Millisecond},
		Processors: []host.ProcessorConfig{{
			Name:    "mask-pii",
			Plugin:  plugin,
			Inputs:  []string{in},
			Outputs: map[string]host.OutputConfig{"out": {Topic: outTopic}},
			Config:  map[string]any{"fields": []any{"email", "card.number"}, "mode": "hash", "salt": "demo-salt"},
			OnError: host.OnErrorDeadLetter,
		}},
		State:   host.StateConfig{Dir: filepath.Join(dir, "state")},
		Runtime: host.RuntimeConfig{CacheDir: "off"},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	h, err := host.New(ctx, cfg, host.WithLogger(o.Logger))
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Fprintf(o.Out, "\n== part 1: a stateless processor ==\n")
	fmt.Fprintf(o.Out, "processor mask-pii: plugin mask.wasm (%d KiB), %s -> %s, hashes email and card.number\n\n", len(MaskWasm)>>10, in, outTopic)

	runErr := make(chan error, 1)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go func() { runErr <- h.Run(runCtx) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(outTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	inputs := map[string]string{}
	for i := 0; i < o.Records; i++ {
		name := names[i%len(names)]
		if i >= len(names) {
			name += fmt.Sprint(i / len(names))
		}
		v := fmt.Sprintf(`{"user":%q,"email":"%s@example.com","card":{"number":"4111-1111-1111-%04d","exp":"12/29"},"plan":"pro"}`, name, name, 1000+i)
		inputs[name] = v
		res := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte(name), Value: []byte(v)})
		if err := res.FirstErr(); err != nil {
			return fmt.Errorf("producing sample input: %w", err)
		}
	}
	fmt.Fprintf(o.Out, "produced %d records to %s; waiting for %s...\n\n", o.Records, in, outTopic)

	start := time.Now()
	got := 0
	for got < o.Records {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d records came out of the pipeline before the timeout", got, o.Records)
		}
		select {
		case err := <-runErr:
			return fmt.Errorf("pipeline stopped: %v", err)
		default:
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			fmt.Fprintf(o.Out, "in  %-8s %s\nout %-8s %s\n", r.Key, inputs[string(r.Key)], r.Key, r.Value)
		})
	}
	stopRun()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("pipeline: %w", err)
	}
	st, _ := h.Stats("mask-pii")
	fmt.Fprintf(o.Out, "\n%d records in, %d out, %d failed, in %s. Offsets committed; pipeline stopped cleanly.\n",
		st.RecordsIn, st.RecordsOut, st.Skipped+st.DeadLettered, time.Since(start).Round(time.Millisecond))
	return nil
}
