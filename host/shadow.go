package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	ideploy "github.com/wasmstream/wasmstream/host/internal/deploy"
	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// A shadow run (`wasmstream deploy --shadow`) runs a candidate version of a
// processor beside its active one in every process, comparing its emits
// per record and committing nothing of it (host/internal/runner/shadow.go).
// The control topic starts and stops it (a shadow record); each process
// reports its counts and samples to the processor's diff topic,
// <app_id>-<processor>-shadow, which `wasmstream shadow status` and
// `deploy --shadow-first` read.

// ShadowStatus is a shadow run: its counts (per task and in total), and
// why it stopped ("" while it runs).
type ShadowStatus = runner.ShadowStatus

// ShadowCounts are a shadow run's compared records.
type ShadowCounts = runner.ShadowCounts

// ShadowSample is a record the candidate and the active version did not
// agree on.
type ShadowSample = runner.ShadowSample

// ShadowSide is one version's result for a sample's record.
type ShadowSide = runner.ShadowSide

// ShadowResult is a shadow run as the processes reported it.
type ShadowResult = ideploy.ShadowResult

// ErrShadowRefused is returned (wrapped) by DeployShadowFirst when the
// candidate failed its shadow run.
var ErrShadowRefused = ideploy.ErrShadowRefused

// ErrNoShadow is returned (wrapped) by StopShadow when none runs.
var ErrNoShadow = control.ErrNoShadow

// ShadowVerdict is "" if a shadow run lets its candidate go live under
// these limits, else why not (runner.ShadowVerdict).
func ShadowVerdict(st ShadowStatus, maxFailureRatio, maxDiffRatio float64) string {
	return runner.ShadowVerdict(st, maxFailureRatio, maxDiffRatio)
}

// DeployShadow publishes wasm as processor's shadow: every process runs it
// beside the active version until StopShadow. It checks wasm as Deploy
// does. It returns the control topic offset that names the run.
func DeployShadow(ctx context.Context, cfg *Config, processor string, wasm []byte, label string, log *slog.Logger) (int64, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return -1, err
	}
	sh, err := ideploy.StartShadow(ctx, app, processor, wasm, label, "deploy --shadow")
	return sh.Offset, err
}

// StopShadow publishes that processor's shadow is stopped.
func StopShadow(ctx context.Context, cfg *Config, processor, reason string, log *slog.Logger) error {
	app, err := cfg.deployApp(log)
	if err != nil {
		return err
	}
	_, err = ideploy.StopShadow(ctx, app, processor, reason, -1)
	return err
}

// Shadow returns processor's latest shadow run as the processes reported
// it, with up to maxSamples samples.
func Shadow(ctx context.Context, cfg *Config, processor string, maxSamples int, log *slog.Logger) (ShadowResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return ShadowResult{}, err
	}
	return ideploy.Shadow(ctx, app, processor, -1, maxSamples)
}

// DeployShadowFirst is Deploy behind a shadow run of d (`deploy
// --shadow-first`, swap.shadow_first): wasm goes live only if, in its
// shadow run, its failure ratio stayed under swap.max_failure_ratio and,
// when maxDiffRatio >= 0, its difference ratio under maxDiffRatio.
// Otherwise nothing is published but the shadow's start and stop, and
// the error wraps ErrShadowRefused with the reason. progress, if set, is
// told of the run as it goes.
func DeployShadowFirst(ctx context.Context, cfg *Config, processor string, wasm []byte, label string, d time.Duration,
	maxDiffRatio float64, progress func(ShadowResult), log *slog.Logger) (DeployResult, ShadowResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return DeployResult{Processor: processor, Offset: -1}, ShadowResult{}, err
	}
	c := cfg.Clone()
	c.ApplyDefaults()
	ratio, _ := c.Swap.MaxFailureRatio.Get()
	r, sr, err := ideploy.ShadowFirst(ctx, app, processor, wasm, label, d, ratio, maxDiffRatio, progress)
	return DeployResult{Processor: r.Processor, Active: versionInfo(r.Active), Previous: versionInfo(r.Previous),
		Initial: versionInfo(r.Initial), Topic: r.Topic, Offset: r.Offset}, sr, err
}

// shadowHost starts and stops the control topic's shadows on the runner
// of their processor's member (follower.ShadowHost). A runner that
// replaces one after an error starts without the shadow: the run's
// status says it stopped (a new run can be started).
type shadowHost struct{ h *Host }

func (s shadowHost) StartShadow(processor, version string, p runner.Plugin, lim runner.ShadowLimits, onStop func(runner.ShadowStatus)) error {
	r := s.h.runnerOf(processor)
	if r == nil {
		return fmt.Errorf("processor %q: no runner", processor)
	}
	return r.StartShadow(processor, version, p, lim, onStop)
}

func (s shadowHost) StopShadow(processor, reason string) bool {
	r := s.h.runnerOf(processor)
	return r != nil && r.StopShadow(processor, reason)
}

// shadowReportInterval is how often a process writes its shadows' status
// to their diff topics.
const shadowReportInterval = time.Second

// reportShadows writes, every shadowReportInterval, the status and new
// samples of each shadow this process runs to its diff topic, until ctx
// ends (and once more then).
func (h *Host) reportShadows(ctx context.Context) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	sent := map[int64]int64{} // run -> the next sample's Seq
	member := instanceID()
	tick := time.NewTicker(shadowReportInterval)
	defer tick.Stop()
	for {
		final := false
		select {
		case <-ctx.Done():
			final = true
		case <-tick.C:
		}
		var recs []*kgo.Record
		for _, run := range h.follower.Shadows() {
			r := h.runnerOf(run.Processor)
			if r == nil {
				continue
			}
			st, ok := r.ShadowStatus(run.Processor)
			if !ok || st.Version != run.Version {
				continue
			}
			topic := control.ShadowTopicName(h.cfg.AppID, run.Processor)
			val, _ := json.Marshal(ideploy.ShadowReportRecord{Run: run.Offset, Member: member, Status: &st})
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(ideploy.ShadowStatusKey(run.Offset, member)), Value: val})
			for _, smp := range r.ShadowSamples(run.Processor, sent[run.Offset]) {
				val, _ := json.Marshal(ideploy.ShadowReportRecord{Run: run.Offset, Member: member, Sample: &smp})
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(ideploy.ShadowSampleKey(run.Offset, member, smp.Seq)), Value: val})
				sent[run.Offset] = smp.Seq + 1
			}
		}
		if len(recs) > 0 {
			if cl == nil {
				var err error
				if cl, err = h.kafka.NewClient(kgo.ProducerLinger(0)); err != nil {
					h.log.Error("shadow: no client for the diff topic; results are not reported", "err", err)
					return
				}
			}
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), brokerTimeout)
			if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
				h.log.Warn("shadow: writing results to the diff topic", "err", err)
			}
			cancel()
		}
		if final {
			return
		}
	}
}
