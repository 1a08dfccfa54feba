package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// ShadowReportRecord is what a process writes to a processor's diff topic
// (control.ShadowTopicName) for a shadow run: key "status/<run>/<member>"
// with its latest status, "sample/<run>/<member>/<seq>" with a sample.
// Run is the offset of the shadow record that started the run.
type ShadowReportRecord struct {
	Run    int64          `json:"run"`
	Member string         `json:"member"`
	Status *shadow.Status `json:"status,omitempty"`
	Sample *shadow.Sample `json:"sample,omitempty"`
}

// ShadowStatusKey and ShadowSampleKey are the diff topic's record keys.
func ShadowStatusKey(run int64, member string) string {
	return fmt.Sprintf("status/%d/%s", run, member)
}

func ShadowSampleKey(run int64, member string, seq int64) string {
	return fmt.Sprintf("sample/%d/%s/%d", run, member, seq)
}

// EnsureShadowTopic creates a processor's diff topic if it is missing: one
// partition (its records are few: a status per process and second, and
// the samples), deleted after a week.
func EnsureShadowTopic(ctx context.Context, kafka kclient.Config, topic string) error {
	cl, err := kafka.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	week := "604800000"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{"retention.ms": &week}, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the shadow diff topic %s: %w", topic, err)
	}
	return nil
}

// ShadowResult is a shadow run as the processes reported it.
type ShadowResult struct {
	Processor string
	Run       int64 // the shadow record's offset (-1: none)
	Version   string
	Topic     string // the diff topic
	// Status sums the processes' latest statuses: Running only if every
	// process still runs it; Stopped is one process's reason.
	Status  shadow.Status
	Members int // processes that reported
	Samples []shadow.Sample
}

// StartShadow checks wasm as Deploy does (it compiles and instantiates as
// a running process would) and publishes it as processor's shadow.
func StartShadow(ctx context.Context, app App, processor string, wasm []byte, label, reason string) (control.Shadow, error) {
	spec, err := findProcessor(app, processor)
	if err != nil {
		return control.Shadow{}, err
	}
	if err := checkLabel(label); err != nil {
		return control.Shadow{}, fmt.Errorf("processor %q: %w", processor, err)
	}
	if err := NeedBrokers(app, "shadow"); err != nil {
		return control.Shadow{}, err
	}
	if len(wasm) == 0 {
		return control.Shadow{}, fmt.Errorf("processor %q: the module is empty", processor)
	}
	if err := app.Limits.CheckSize(wasm); err != nil {
		return control.Shadow{}, fmt.Errorf("processor %q: %w: running processes would refuse it", processor, err)
	}
	lp, err := plugin.New(ctx, spec, app.Limits, app.Logger)
	if err != nil {
		return control.Shadow{}, fmt.Errorf("processor %q: %w", processor, err)
	}
	defer lp.RT.Close(context.WithoutCancel(ctx))
	mod, err := lp.Compile(ctx, wasm)
	if err != nil {
		return control.Shadow{}, fmt.Errorf("processor %q cannot run this module (nothing published): %w", processor, err)
	}
	_ = mod.Close(ctx)
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := EnsureShadowTopic(ctx, app.Kafka, control.ShadowTopicName(app.AppID, processor)); err != nil {
		return control.Shadow{}, err
	}
	pub, _, err := openControl(ctx, app, true)
	if err != nil {
		return control.Shadow{}, err
	}
	defer pub.Close()
	sh, err := pub.StartShadow(ctx, processor, wasm, label, reason, control.Deployer())
	if err != nil {
		return sh, fmt.Errorf("processor %q: %w", processor, err)
	}
	return sh, nil
}

// StopShadow publishes that processor's shadow is stopped (run >= 0: only
// the run that record started).
func StopShadow(ctx context.Context, app App, processor, reason string, run int64) (control.Shadow, error) {
	if _, err := findProcessor(app, processor); err != nil {
		return control.Shadow{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, _, err := openControl(ctx, app, false)
	if err != nil {
		return control.Shadow{}, err
	}
	defer pub.Close()
	sh, err := pub.StopShadow(ctx, processor, reason, control.Deployer(), run)
	if err != nil {
		return sh, fmt.Errorf("processor %q: %w", processor, err)
	}
	return sh, nil
}

// Shadow reads processor's latest shadow run (run < 0) or the run named,
// as the processes reported it in the diff topic; maxSamples bounds the
// samples returned.
func Shadow(ctx context.Context, app App, processor string, run int64, maxSamples int) (ShadowResult, error) {
	res := ShadowResult{Processor: processor, Run: run, Topic: control.ShadowTopicName(app.AppID, processor)}
	if _, err := findProcessor(app, processor); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, app, false)
	if err != nil {
		return res, err
	}
	pub.Close()
	sh, _ := st.Shadow(processor)
	recs, err := readAll(ctx, app.Kafka, res.Topic)
	if err != nil {
		return res, err
	}
	reported := map[int64]bool{}
	for _, r := range recs {
		var rr ShadowReportRecord
		if json.Unmarshal(r.Value, &rr) == nil && rr.Status != nil {
			reported[rr.Run] = true
		}
	}
	if run < 0 {
		// The control topic's running shadow, else the config's
		// (processors[].shadow, reported as run -1) if a process reports
		// one, else the control topic's last.
		res.Run = sh.Offset
		if !sh.Running && reported[-1] {
			res.Run = -1
		}
	}
	if sh.Offset >= 0 && sh.Offset == res.Run {
		res.Version = plugin.VersionID(sh.Version)
	}
	statuses := map[string]shadow.Status{}
	for _, r := range recs {
		var rr ShadowReportRecord
		if json.Unmarshal(r.Value, &rr) != nil || rr.Run != res.Run {
			continue
		}
		switch {
		case rr.Status != nil && strings.HasPrefix(string(r.Key), "status/"):
			statuses[rr.Member] = *rr.Status
		case rr.Sample != nil && len(res.Samples) < maxSamples:
			res.Samples = append(res.Samples, *rr.Sample)
		}
	}
	res.Members = len(statuses)
	if res.Run < 0 && res.Members == 0 {
		return res, fmt.Errorf("processor %q: no shadow run in control topic %s, and no process reports one from its config (processors[].shadow)", processor, control.TopicName(app.AppID))
	}
	res.Status = shadow.Status{Processor: processor, Version: res.Version, Running: len(statuses) > 0,
		Tasks: map[string]shadow.Counts{}}
	if sh.Offset == res.Run && !sh.Running && sh.Reason != "" {
		res.Status.Running, res.Status.Stopped = false, sh.Reason
	}
	for _, s := range statuses {
		if res.Version == "" {
			res.Version, res.Status.Version = s.Version, s.Version
		}
		res.Status.Total = res.Status.Total.Add(s.Total)
		res.Status.Samples += s.Samples
		for id, c := range s.Tasks {
			res.Status.Tasks[id] = res.Status.Tasks[id].Add(c)
		}
		if !s.Running {
			res.Status.Running = false
			if s.Stopped != "" {
				res.Status.Stopped = s.Stopped
			}
		}
		if res.Status.Started.IsZero() || s.Started.Before(res.Status.Started) {
			res.Status.Started = s.Started
		}
	}
	return res, nil
}

// readAll reads topic's partition 0 from its start to its end as of now.
func readAll(ctx context.Context, kafka kclient.Config, topic string) ([]*kgo.Record, error) {
	cl, err := kafka.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("shadow diff topic %s: %w", topic, err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		if ok && errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
			return nil, nil // no process reported yet
		}
		return nil, fmt.Errorf("shadow diff topic %s: no end offset: %v", topic, end.Err)
	}
	if end.Offset == 0 {
		return nil, nil
	}
	rd, err := kafka.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("shadow diff topic %s: reading to offset %d: %w", topic, end.Offset, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("shadow diff topic %s: %w", topic, ferr)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			done = done || r.Offset+1 >= end.Offset
		})
		if done {
			return out, nil
		}
	}
}

// ShadowFirst is `deploy --shadow-first`: it runs wasm as processor's
// shadow for d, then deploys it only if the shadow ran and its verdict
// (shadow.Verdict with maxFailureRatio, and maxDiffRatio when >= 0)
// passes; else it refuses it with the reason. The shadow is stopped
// either way. progress, if set, is told of the run as it goes.
func ShadowFirst(ctx context.Context, app App, processor string, wasm []byte, label string, d time.Duration,
	maxFailureRatio, maxDiffRatio float64, progress func(ShadowResult)) (Result, ShadowResult, error) {
	res := Result{Processor: processor, Topic: control.TopicName(app.AppID), Offset: -1}
	sh, err := StartShadow(ctx, app, processor, wasm, label, "shadow-first "+d.String())
	if err != nil {
		return res, ShadowResult{}, err
	}
	run := sh.Offset
	stop := func(reason string) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		defer cancel()
		if _, err := StopShadow(sctx, app, processor, reason, run); err != nil && !errors.Is(err, control.ErrNoShadow) {
			app.Logger.Warn("stopping the shadow run", "processor", processor, "err", err)
		}
	}
	deadline := time.Now().Add(d)
	var sr ShadowResult
	for {
		wait := min(time.Until(deadline), 5*time.Second)
		if wait > 0 {
			select {
			case <-ctx.Done():
				stop("shadow-first canceled")
				return res, sr, ctx.Err()
			case <-time.After(wait):
			}
		}
		sr, err = Shadow(ctx, app, processor, run, 20)
		if err != nil {
			stop("shadow-first could not read its results")
			return res, sr, err
		}
		if progress != nil {
			progress(sr)
		}
		if time.Now().After(deadline) || !sr.Status.Running && sr.Status.Stopped != "" {
			break
		}
	}
	why := shadow.Verdict(sr.Status, maxFailureRatio, maxDiffRatio)
	if why != "" {
		stop("refused: " + why)
		return res, sr, &markedError{fmt.Sprintf("processor %q: %s refused after its shadow run: %s; nothing of it was committed",
			processor, plugin.VersionID(sh.Version), why), ErrShadowRefused}
	}
	stop("shadow-first passed: deployed")
	res, err = Deploy(ctx, app, processor, wasm, label)
	return res, sr, err
}

// ErrShadowRefused: shadow-first refused the candidate (its verdict).
var ErrShadowRefused = errors.New("the candidate failed its shadow run")
