package follower

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// ShadowHost is where a follower starts and stops the shadow runs the
// control topic names (`wasmstream deploy --shadow`): the host's runner.
type ShadowHost interface {
	StartShadow(processor, version string, p runner.Plugin, lim runner.ShadowLimits, onStop func(runner.ShadowStatus)) error
	StopShadow(processor, reason string) bool
}

// ShadowRun is a shadow this process runs, as the control topic started
// it: Offset (the shadow record's) names the run in its reports.
type ShadowRun struct {
	Processor string
	Version   string
	Offset    int64
}

// shadows is the follower's part of the shadow runs. Its own mutex: the
// control topic's goroutine and the host's (SetShadowHost, Shadows) meet
// here.
type shadows struct {
	mu   sync.Mutex
	host ShadowHost
	// want is the latest shadow record of each processor, with the loader
	// of its version, applied once the host is set.
	want map[string]shadowWant
	// runs are the shadows started here (by processor).
	runs map[string]ShadowRun
	// rts are the shadow runtimes, one per processor, made on a shadow's
	// first start: the processor's, with the shadow's record timeout.
	rts map[string]*plugin.Processor
}

type shadowWant struct {
	sh   control.Shadow
	cand runner.Plugin // compiled; nil if it does not run here
}

// SetShadowHost makes h the process's shadow host and applies the shadow
// records read so far (Load's, or Run's before the host existed).
func (f *Follower) SetShadowHost(ctx context.Context, h ShadowHost) {
	f.sh.mu.Lock()
	f.sh.host = h
	want := f.sh.want
	f.sh.want = nil
	f.sh.mu.Unlock()
	for _, w := range want {
		f.apply(ctx, h, w.sh, w.cand, false)
	}
}

// ConfigShadow runs wasm as processor's shadow from the start, as the
// config's processors[].shadow asks, unless the control topic named a
// shadow of it at Load (which takes its place). Its run is -1 in the
// reports. Call it after Load and before SetShadowHost; an error (the
// module does not run) leaves the process without it.
func (f *Follower) ConfigShadow(ctx context.Context, processor string, wasm []byte) error {
	f.sh.mu.Lock()
	_, named := f.sh.want[processor]
	f.sh.mu.Unlock()
	if named {
		f.log.Warn("the control topic names a shadow of the processor: it runs instead of the config's", "processor", processor)
		return nil
	}
	sh := control.Shadow{Format: control.Format, Processor: processor, Running: true,
		Version: control.NewVersion(wasm, "config-shadow"), Reason: "processors[].shadow", Offset: -1}
	loaded := func(context.Context) ([]byte, error) { return wasm, nil }
	var p *plugin.Processor
	for _, q := range f.cfg.Processors {
		if q.Spec.Name == processor {
			p = q
		}
	}
	if p == nil {
		return fmt.Errorf("shadow: no processor %q", processor)
	}
	cand, err := f.compileShadow(ctx, p, sh, loaded)
	if err != nil {
		return err
	}
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	if f.sh.want == nil {
		f.sh.want = map[string]shadowWant{}
	}
	f.sh.want[processor] = shadowWant{sh: sh, cand: cand}
	return nil
}

// Shadows returns the shadow runs this process started that run still.
func (f *Follower) Shadows() []ShadowRun {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	var out []ShadowRun
	for _, r := range f.sh.runs {
		out = append(out, r)
	}
	return out
}

// onShadow applies one shadow record: it compiles the candidate on the
// processor's shadow runtime (off the record path) and starts it, or
// stops the shadow running. Before the host is set (Load), the compiled
// candidate waits for it, so a starting process runs its shadow from its
// first record.
func (f *Follower) onShadow(ctx context.Context, sh control.Shadow, load control.Load, err error) {
	if err != nil {
		f.log.Error("unreadable shadow record in the control topic; no shadow runs", "processor", sh.Processor, "err", err)
	}
	var p *plugin.Processor
	for _, q := range f.cfg.Processors {
		if q.Spec.Name == sh.Processor {
			p = q
		}
	}
	if p == nil {
		return
	}
	var cand runner.Plugin
	if err == nil && sh.Running && load != nil {
		if cand, err = f.compileShadow(ctx, p, sh, load); err != nil {
			f.log.Error("shadow version from the control topic does not run here; no shadow runs", "processor", sh.Processor,
				"version", plugin.VersionID(sh.Version), "err", err)
		}
	}
	f.sh.mu.Lock()
	host := f.sh.host
	if host == nil {
		if f.sh.want == nil {
			f.sh.want = map[string]shadowWant{}
		}
		if w, ok := f.sh.want[sh.Processor]; ok && w.cand != nil {
			_ = w.cand.Close(ctx)
		}
		f.sh.want[sh.Processor] = shadowWant{sh: sh, cand: cand}
		f.sh.mu.Unlock()
		return
	}
	prev, had := f.sh.runs[sh.Processor]
	delete(f.sh.runs, sh.Processor)
	f.sh.mu.Unlock()
	f.apply(ctx, host, sh, cand, had && prev.Offset != sh.Offset)
}

// apply starts cand (nil: none) as sh's shadow on host, first stopping
// the shadow running there when stopPrev.
func (f *Follower) apply(ctx context.Context, host ShadowHost, sh control.Shadow, cand runner.Plugin, stopPrev bool) {
	if stopPrev {
		reason := sh.Reason
		if reason == "" {
			reason = "stopped in the control topic"
		}
		host.StopShadow(sh.Processor, reason)
	}
	if cand == nil {
		return
	}
	id := plugin.VersionID(sh.Version)
	if err := host.StartShadow(sh.Processor, id, cand, f.cfg.ShadowLimits, f.shadowStopped); err != nil {
		_ = cand.Close(ctx)
		f.log.Error("shadow version from the control topic does not run here; no shadow runs", "processor", sh.Processor, "version", id, "err", err)
		return
	}
	f.sh.mu.Lock()
	if f.sh.runs == nil {
		f.sh.runs = map[string]ShadowRun{}
	}
	f.sh.runs[sh.Processor] = ShadowRun{Processor: sh.Processor, Version: id, Offset: sh.Offset}
	f.sh.mu.Unlock()
	f.log.Info("shadow run from the control topic started", "processor", sh.Processor, "version", id, "by", sh.By, "reason", sh.Reason)
}

// compileShadow reads and compiles sh's candidate for p on its shadow
// runtime.
func (f *Follower) compileShadow(ctx context.Context, p *plugin.Processor, sh control.Shadow, load control.Load) (runner.Plugin, error) {
	if err := f.cfg.Limits.CheckSizeOf(sh.Size); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	wasm, err := load(lctx)
	cancel()
	if err == nil {
		err = f.cfg.Limits.CheckSize(wasm)
	}
	if err != nil {
		return nil, err
	}
	sp, err := f.shadowRuntime(ctx, p)
	if err != nil {
		return nil, err
	}
	mod, err := sp.Compile(ctx, wasm)
	if err != nil {
		return nil, err
	}
	return sp.Factory(mod, plugin.VersionID(sh.Version)), nil
}

// shadowStopped is told of a shadow that stopped itself in this process
// (runner.StartShadow's onStop): logged; the run's report says why.
func (f *Follower) shadowStopped(st runner.ShadowStatus) {
	f.log.Warn("shadow run stopped itself; the active version is unaffected", "processor", st.Processor,
		"version", st.Version, "reason", st.Stopped)
}

// shadowRuntime returns the processor's shadow runtime: its spec and
// limits, but a record timeout no longer than the shadow's time cap, so
// a looping candidate's call ends within its share of time.
func (f *Follower) shadowRuntime(ctx context.Context, p *plugin.Processor) (*plugin.Processor, error) {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	if sp := f.sh.rts[p.Spec.Name]; sp != nil {
		return sp, nil
	}
	spec := p.Spec
	if c := f.cfg.ShadowLimits.TimeCap; c > 0 && (spec.RecordTimeout <= 0 || spec.RecordTimeout > c) {
		spec.RecordTimeout = max(c, 10*time.Millisecond)
	}
	sp, err := plugin.New(ctx, spec, f.cfg.Limits, f.log)
	if err != nil {
		return nil, err
	}
	if f.sh.rts == nil {
		f.sh.rts = map[string]*plugin.Processor{}
	}
	f.sh.rts[p.Spec.Name] = sp
	return sp, nil
}

// closeShadows closes the shadow runtimes (after the runner stopped).
func (f *Follower) closeShadows(ctx context.Context) {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	for _, sp := range f.sh.rts {
		_ = sp.RT.Close(ctx)
	}
	f.sh.rts = nil
}
