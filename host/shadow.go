package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	ideploy "github.com/wasmstream/wasmstream/host/internal/deploy"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// A shadow run (`wasmstream deploy --shadow`) runs a candidate version of a
// processor beside its active one in every process, comparing its emits
// per record and committing nothing of it (host/internal/runner/shadow.go).
// The control topic starts and stops it (a shadow record); each process
// reports its counts and samples to the processor's diff topic,
// <app_id>-<processor>-shadow, which `wasmstream shadow status` and
// `deploy --shadow-first` read.

// ShadowCounts are a shadow run's compared records: each record both
// versions ran counts once, as a match (the candidate emitted what the
// active version did: output, key, value, headers but the version
// header), a difference, or a failure of the candidate.
type ShadowCounts struct {
	Records     int64 `json:"records"`
	Matches     int64 `json:"matches"`
	Differences int64 `json:"differences"`
	Failures    int64 `json:"failures"`
}

// MatchRate is Matches over Records (1 with no record).
func (c ShadowCounts) MatchRate() float64 { return c.in().MatchRate() }

// DiffRatio is Differences over Records.
func (c ShadowCounts) DiffRatio() float64 { return c.in().DiffRatio() }

// FailureRatio is Failures over Records.
func (c ShadowCounts) FailureRatio() float64 { return c.in().FailureRatio() }

func (c ShadowCounts) in() shadow.Counts { return shadow.Counts(c) }

// ShadowEmit is one emit of a sample. Key and Value are cut to 1 KiB;
// KeyLen and ValueLen are their full lengths; Headers are the record's
// but the version header.
type ShadowEmit struct {
	Output   string            `json:"output"`
	Key      []byte            `json:"key"`
	Value    []byte            `json:"value"`
	KeyLen   int               `json:"key_len"`
	ValueLen int               `json:"value_len"`
	Headers  map[string][]byte `json:"headers,omitempty"`
}

// ShadowSide is one version's result for a sample's record: its first
// emits (Count is how many it made), or its failure.
type ShadowSide struct {
	Emits []ShadowEmit `json:"emits,omitempty"`
	Count int          `json:"count"`
	Error string       `json:"error,omitempty"`
}

// ShadowSample is a record the candidate and the active version did not
// agree on: its task and input (topic, partition, offset, key) and each
// side's result.
type ShadowSample struct {
	Task      string     `json:"task"`
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Offset    int64      `json:"offset"`
	Key       []byte     `json:"key"`
	Active    ShadowSide `json:"active"`
	Candidate ShadowSide `json:"candidate"`
}

// ShadowStatus is a shadow run summed over the processes that report it:
// its candidate (Version), when it started, whether every process still
// runs it or why one stopped it, its counts in total and by task, and how
// many samples were taken.
type ShadowStatus struct {
	Processor string                  `json:"processor"`
	Version   string                  `json:"version"`
	Started   time.Time               `json:"started"`
	Running   bool                    `json:"running"`
	Stopped   string                  `json:"stopped,omitempty"`
	Total     ShadowCounts            `json:"total"`
	Tasks     map[string]ShadowCounts `json:"tasks"`
	Samples   int                     `json:"samples"`
}

// ShadowResult is a processor's shadow run as the processes reported it
// to its diff topic: Run is the control topic offset that started it,
// Processes how many reported, Samples the first differing records.
type ShadowResult struct {
	Processor string         `json:"processor"`
	Run       int64          `json:"run"`
	Version   string         `json:"version"`
	Topic     string         `json:"topic"`
	Status    ShadowStatus   `json:"status"`
	Processes int            `json:"processes"`
	Samples   []ShadowSample `json:"samples"`
}

func shadowResult(r ideploy.ShadowResult) ShadowResult {
	out := ShadowResult{Processor: r.Processor, Run: r.Run, Version: r.Version, Topic: r.Topic, Processes: r.Members,
		Samples: make([]ShadowSample, 0, len(r.Samples))}
	st := r.Status
	out.Status = ShadowStatus{Processor: st.Processor, Version: st.Version, Started: st.Started, Running: st.Running,
		Stopped: st.Stopped, Total: ShadowCounts(st.Total), Tasks: make(map[string]ShadowCounts, len(st.Tasks)), Samples: st.Samples}
	for id, c := range st.Tasks {
		out.Status.Tasks[id] = ShadowCounts(c)
	}
	side := func(s shadow.Side) ShadowSide {
		o := ShadowSide{Count: s.Count, Error: s.Error}
		for _, e := range s.Emits {
			o.Emits = append(o.Emits, ShadowEmit{Output: e.Output, Key: e.Key, Value: e.Value, KeyLen: e.KeyLen, ValueLen: e.ValueLen, Headers: e.Headers})
		}
		return o
	}
	for _, s := range r.Samples {
		out.Samples = append(out.Samples, ShadowSample{Task: s.Task, Topic: s.Topic, Partition: s.Partition, Offset: s.Offset,
			Key: s.Key, Active: side(s.Active), Candidate: side(s.Candidate)})
	}
	return out
}

// ErrShadowRefused is returned (wrapped) by DeployShadowFirst when the
// candidate failed its shadow run.
var ErrShadowRefused = ideploy.ErrShadowRefused

// ErrNoShadow is returned (wrapped) by StopShadow when none runs.
var ErrNoShadow = control.ErrNoShadow

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
	r, err := ideploy.Shadow(ctx, app, processor, -1, maxSamples)
	return shadowResult(r), err
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
	var prog func(ideploy.ShadowResult)
	if progress != nil {
		prog = func(r ideploy.ShadowResult) { progress(shadowResult(r)) }
	}
	r, isr, err := ideploy.ShadowFirst(ctx, app, processor, wasm, label, d, ratio, maxDiffRatio, prog)
	sr := shadowResult(isr)
	return DeployResult{Processor: r.Processor, Active: versionInfo(r.Active), Previous: versionInfo(r.Previous),
		Initial: versionInfo(r.Initial), Topic: r.Topic, Offset: r.Offset}, sr, err
}

// configShadow starts pc's processors[].shadow once the runners run. A
// module that cannot be read or does not run is logged and skipped: a
// shadow never keeps the active path from starting.
func (h *Host) configShadow(ctx context.Context, pc *ProcessorConfig) {
	wasm, err := os.ReadFile(pc.Shadow)
	if err == nil {
		err = h.limits.CheckSize(wasm)
	}
	if err == nil {
		err = h.follower.ConfigShadow(ctx, pc.Name, wasm)
	}
	if err != nil {
		h.log.Error("processors[].shadow does not run; the processor runs without it", "processor", pc.Name, "shadow", pc.Shadow, "err", err)
	}
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
