// Package follower applies an app's control topic (<app_id>-plugins) to
// this process: at startup it picks the version each processor starts
// with, then it follows the topic, compiles each newly published version
// (off the record path) and proposes it to the version registry, from
// which the runner swaps each task at its next commit point (I8). It also
// publishes the automatic rollbacks the runner makes, so the rest of the
// fleet follows.
//
// A version it cannot run (too large, does not compile, its init fails, an
// unreadable manifest) is refused: logged, counted and shown, and the
// running version stays.
package follower

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// Config is what a Follower needs.
type Config struct {
	AppID      string
	Kafka      kclient.Config
	Processors []*plugin.Processor
	Limits     plugin.Limits
	Versions   *runner.Versions
	// OnMember, if set, is told of every member record (the processes'
	// interactive-query endpoints and tasks; control/member.go) as it
	// comes; Members returns those Load read.
	OnMember func(control.Member, error)
	// Pauses receives the processors' pauses (`wasmstream pause`): set
	// by Load from the topic, then as pause records come. nil: pause
	// records are ignored.
	Pauses *runner.Pauses
	// Canary is the watch a newly deployed version is under (a rollback
	// goes back to a version that ran before and is not watched).
	Canary versions.Canary
	// ShadowLimits bound the shadow runs the control topic starts
	// (SetShadowHost); TimeCap also bounds a shadow's record timeout.
	ShadowLimits runner.ShadowLimits
	Logger       *slog.Logger
	// Timeout bounds each exchange with the brokers (first contact,
	// publishing a rollback).
	Timeout time.Duration
}

// Follower follows one app's control topic.
type Follower struct {
	cfg     Config
	members []control.Member // the member records Load read
	topic   string
	log     *slog.Logger
	reader  *control.Reader

	pubMu     sync.Mutex
	publisher *control.Publisher // made on the first automatic rollback

	sh shadows // shadow runs (shadow.go)
}

// Load makes sure the control topic exists, reads it to its end and
// compiles the version it names for each processor, which the processor
// then starts with instead of the config file's plugin (p.Version and
// p.StartInfo change, and the config's module is closed). It registers
// every processor in cfg.Versions with the version it starts with, which
// takes p.Module over (p.Module is nil afterwards). The caller closes the
// Follower.
func Load(ctx context.Context, cfg Config) (*Follower, error) {
	f := &Follower{cfg: cfg, topic: control.TopicName(cfg.AppID), log: cfg.Logger}
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := control.EnsureTopic(tctx, cfg.Kafka, f.topic); err != nil {
		return nil, err
	}
	var err error
	f.reader, err = control.NewReader(control.Config{Kafka: cfg.Kafka, Topic: f.topic})
	if err != nil {
		return nil, err
	}
	st, err := f.reader.Load(tctx)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.members = st.Members()
	for _, p := range cfg.Processors {
		// The registry starts each processor with the version chosen here;
		// refusals are recorded once it has.
		refused := f.fromControl(ctx, p, st)
		info := plugin.Info(p.Version)
		info.ABIVersion = p.Module.Info().ABIVersion
		start := p.Factory(p.Module, info.ID)
		if !cfg.Versions.Start(p.Spec.Name, info, start) {
			_ = start.Close(ctx) // registered already: not the registry's
		}
		p.Module = nil
		for _, r := range refused {
			f.refuse(p.Spec.Name, r.v, r.err)
		}
		if sh, load := st.Shadow(p.Spec.Name); sh.Running {
			f.onShadow(ctx, sh, load, nil) // started once the host is set (SetShadowHost)
		}
		if paused, rec := st.Paused(p.Spec.Name); paused && cfg.Pauses != nil {
			cfg.Pauses.Set(p.Spec.Name, true)
			f.log.Warn("processor paused in the control topic: it processes nothing until `wasmstream resume`",
				"processor", p.Spec.Name, "paused_by", rec.By, "paused_at", rec.At)
		}
	}
	return f, nil
}

type refusal struct {
	v   control.Version
	err error
}

// fromControl makes p run the version the control topic names for it, if
// there is one it can run, and returns the versions it refused.
func (f *Follower) fromControl(ctx context.Context, p *plugin.Processor, st *control.State) []refusal {
	m, err := st.Manifest(p.Spec.Name)
	switch {
	case errors.Is(err, control.ErrNoManifest):
		return nil // never deployed: the config's plugin
	case err != nil:
		return []refusal{{m.Version, err}}
	case m.Hash == p.Version.Hash:
		p.Version = m.Version // the same bytes, under the deployed label
		return nil
	}
	mctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	wasm, err := st.Module(mctx, m.Hash)
	if err == nil {
		err = f.cfg.Limits.CheckSize(wasm)
	}
	if err != nil {
		return []refusal{{m.Version, err}}
	}
	mod, err := p.Compile(ctx, wasm)
	if err != nil {
		return []refusal{{m.Version, err}}
	}
	_ = p.Module.Close(ctx) // the config's version: not run
	p.Module, p.StartInfo, p.Version = mod, mod.Info(), m.Version
	f.log.Info("running the deployed plugin version from the control topic", "processor", p.Spec.Name,
		"version", plugin.VersionID(m.Version), "deployed_by", m.DeployedBy, "deployed_at", m.DeployedAt)
	return nil
}

// refuse records that this process will not run v for processor, and
// logs it.
func (f *Follower) refuse(processor string, v control.Version, err error) {
	info := plugin.Info(v)
	running := f.cfg.Versions.Refuse(processor, info, err, time.Now().UTC())
	f.log.Error("plugin version from the control topic refused; the running version stays",
		"processor", processor, "version", info.ID, "running", running, "reason", err)
}

// Run applies the control topic's new versions until ctx ends. A read
// error (the topic deleted, a broker gone) is logged and reading resumes
// after a pause: processing goes on with the running versions meanwhile.
func (f *Follower) Run(ctx context.Context) {
	for {
		err := f.reader.FollowAll(ctx, control.Handlers{
			Manifest: func(m control.Manifest, load control.Load, err error) { f.onManifest(ctx, m, load, err) },
			Pause:    f.onPause,
			Member:   f.cfg.OnMember,
			Shadow:   func(sh control.Shadow, load control.Load, err error) { f.onShadow(ctx, sh, load, err) },
		})
		if ctx.Err() != nil {
			return
		}
		f.log.Error("reading the control topic; retrying in 5s", "topic", f.topic, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// onManifest takes in one manifest of the control topic: it proposes the
// version to the registry, as it is if the registry still holds it
// compiled, else compiled from its bytes (read from the topic again for a
// version only in histories; compiled on the follower's goroutine, off the
// record path).
func (f *Follower) onManifest(ctx context.Context, m control.Manifest, load control.Load, err error) {
	var p *plugin.Processor
	for _, q := range f.cfg.Processors {
		if q.Spec.Name == m.Processor {
			p = q
		}
	}
	if p == nil {
		f.log.Warn("the control topic names a processor this config does not have; ignored", "processor", m.Processor)
		return
	}
	name := p.Spec.Name
	if err != nil {
		f.refuse(name, m.Version, err)
		return
	}
	if target, _ := f.cfg.Versions.Target(name); target.Hash == m.Hash {
		return // already running or headed for it (e.g. the rollback this process made)
	}
	canary := versions.Canary{}
	if m.Reason == control.ReasonDeploy {
		canary = f.cfg.Canary
	}
	// A version this process still holds compiled (the one before the
	// active one, which a rollback returns to) is proposed again as it is.
	if info, ok := f.cfg.Versions.ProposeHeld(name, m.Hash, canary); ok {
		f.log.Info("plugin version from the control topic is held compiled; tasks switch at their next commit point",
			"processor", name, "version", info.ID, "reason", m.Reason, "deployed_by", m.DeployedBy)
		return
	}
	if err := f.cfg.Limits.CheckSizeOf(m.Size); err != nil {
		f.refuse(name, m.Version, err)
		return
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	wasm, err := load(lctx)
	cancel()
	if err == nil {
		err = f.cfg.Limits.CheckSize(wasm)
	}
	if err != nil {
		f.refuse(name, m.Version, err)
		return
	}
	loaded := time.Since(start)
	mod, err := p.Compile(ctx, wasm)
	if err != nil {
		f.refuse(name, m.Version, err)
		return
	}
	info := plugin.Info(m.Version)
	info.ABIVersion = mod.Info().ABIVersion
	f.log.Info("new plugin version from the control topic; tasks switch at their next commit point",
		"processor", name, "version", info.ID, "reason", m.Reason, "deployed_by", m.DeployedBy,
		"load_ms", loaded.Milliseconds(), "compile_ms", (time.Since(start) - loaded).Milliseconds())
	if err := f.cfg.Versions.Propose(name, info, p.Factory(mod, info.ID), canary); err != nil {
		f.log.Error("swap", "processor", name, "err", err)
	}
}

// Members returns the member records Load read (before Run).
func (f *Follower) Members() []control.Member { return f.members }

// onPause applies one pause record of the control topic.
func (f *Follower) onPause(p control.Pause, err error) {
	if err != nil {
		f.log.Error("unreadable pause record in the control topic", "processor", p.Processor, "err", err)
		return
	}
	known := false
	for _, q := range f.cfg.Processors {
		known = known || q.Spec.Name == p.Processor
	}
	if !known || f.cfg.Pauses == nil {
		return
	}
	if f.cfg.Pauses.Set(p.Processor, p.Paused) {
		f.log.Info("pause from the control topic; tasks apply it at their next commit point",
			"processor", p.Processor, "paused", p.Paused, "by", p.By, "at", p.At)
	}
}

// OnRollback publishes an automatic rollback made by this process's runner
// (runner.Options.OnRollback) to the control topic, so the rest of the
// fleet follows. Several processes may detect the same failing version:
// the publisher only rolls back if the topic still names it.
func (f *Follower) OnRollback(ev runner.RollbackEvent) {
	bad, known := f.cfg.Versions.Lookup(ev.Processor, ev.From)
	if !known || bad.Hash == "" {
		// Without the failing version's hash the rollback could undo
		// whatever the topic names now, a newer deploy included.
		f.log.Error("automatic rollback not published: the failing version is unknown to the host",
			"processor", ev.Processor, "from", ev.From)
		return
	}
	pub, err := f.controlPublisher()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
		_, err = pub.Rollback(ctx, ev.Processor, control.AutoRollback(ev.Reason), bad.Hash, control.Deployer())
		cancel()
	}
	switch {
	case err == nil:
		f.log.Warn("automatic rollback published to the control topic", "processor", ev.Processor, "from", ev.From, "to", ev.To)
	case errors.Is(err, control.ErrActiveChanged):
		f.log.Info("automatic rollback: the control topic has already moved on", "processor", ev.Processor, "from", ev.From)
	default:
		f.log.Error("automatic rollback could not be published; this process runs the previous version, others may not",
			"processor", ev.Processor, "from", ev.From, "to", ev.To, "err", err)
	}
}

func (f *Follower) controlPublisher() (*control.Publisher, error) {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	if f.publisher == nil {
		p, err := control.NewPublisher(control.Config{Kafka: f.cfg.Kafka, Topic: f.topic})
		if err != nil {
			return nil, err
		}
		f.publisher = p
	}
	return f.publisher, nil
}

// Close releases the reader and the publisher. Call it after Run returned.
func (f *Follower) Close() {
	if f.reader != nil {
		f.reader.Close()
		f.reader = nil
	}
	f.pubMu.Lock()
	if f.publisher != nil {
		f.publisher.Close()
		f.publisher = nil
	}
	f.pubMu.Unlock()
	f.closeShadows(context.Background())
}
