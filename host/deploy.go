package host

import (
	"context"
	"log/slog"

	"github.com/wasmstream/wasmstream/host/internal/control"
	ideploy "github.com/wasmstream/wasmstream/host/internal/deploy"
)

// A processor's plugin has versions: the config file's plugin is the first;
// Deploy publishes others to the app's control topic (<app_id>-plugins),
// which every process of the app follows. A process starts with the
// version the control topic names, and swaps each of its tasks to a newly
// published one at the task's next commit point. Rollback publishes the
// previous version again. Neither talks to the processes.

// ErrAlreadyActive is returned (wrapped) by Deploy when the processor
// already runs the module's content: nothing was published.
var ErrAlreadyActive = control.ErrAlreadyActive

// DeployResult is what Deploy published.
type DeployResult struct {
	Processor string
	// Active is the version now active in the control topic: the deployed
	// one (or, with ErrAlreadyActive, the one that was already active).
	Active VersionInfo
	// Previous is the version it replaced; zero (ID "") if there was none.
	Previous VersionInfo
	// Initial is the config file's plugin when Deploy recorded it first as
	// the processor's initial version (the one to roll back to); zero if
	// the topic already had a version or the config's plugin was skipped.
	Initial VersionInfo
	// Topic is the control topic; Offset the manifest record's offset
	// (-1 when nothing was published).
	Topic  string
	Offset int64
}

// RollbackResult is what Rollback published.
type RollbackResult struct {
	Processor string
	// Active is the version rolled back to; Previous the one rolled back
	// from.
	Active   VersionInfo
	Previous VersionInfo
	// Topic is the control topic; Offset the manifest record's offset
	// (-1 when nothing was published).
	Topic  string
	Offset int64
	// Skipped are the previous versions passed over because no process
	// could run them (written by another tool with bytes missing or
	// corrupt); they are dropped from the history.
	Skipped []SkippedVersion
}

// SkippedVersion is a version Rollback passed over, and why.
type SkippedVersion struct {
	Version VersionInfo
	Why     string
}

// Deploy publishes wasm as processor's active plugin version to the control
// topic of cfg's app, labeled label ("" for none: the version is then
// known by its hash prefix alone). log nil means slog.Default().
//
// Before it writes anything it checks that the processor exists in cfg,
// that kafka.brokers is set (an embedded broker is private to one process:
// a deploy must reach the brokers the running processes use), that wasm is
// within runtime.max_module_size, and that it compiles and instantiates
// with the processor's config, limits, outputs and stores as a running
// process would do it. Then it creates the control topic if needed and, if
// the processor has no version there yet, records the config file's plugin
// as its initial version (label "config") so the deploy can be rolled back
// to it; a config plugin that could not run is skipped with a warning.
//
// Deploying the content that is already active writes nothing and returns
// an error wrapping ErrAlreadyActive, with the result describing the
// active version.
func Deploy(ctx context.Context, cfg *Config, processor string, wasm []byte, label string, log *slog.Logger) (DeployResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return DeployResult{Processor: processor, Offset: -1}, err
	}
	r, err := ideploy.Deploy(ctx, app, processor, wasm, label)
	return DeployResult{Processor: r.Processor, Active: versionInfo(r.Active), Previous: versionInfo(r.Previous),
		Initial: versionInfo(r.Initial), Topic: r.Topic, Offset: r.Offset}, err
}

// Rollback makes processor's previous version active again in the control
// topic of cfg's app (the one the current version replaced). It refuses an
// unknown processor, a processor with nothing deployed or no previous
// version, and a change that lands between its read and its write (run it
// again then). log nil means slog.Default().
func Rollback(ctx context.Context, cfg *Config, processor string, log *slog.Logger) (RollbackResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return RollbackResult{Processor: processor, Offset: -1}, err
	}
	r, err := ideploy.Rollback(ctx, app, processor)
	res := RollbackResult{Processor: r.Processor, Active: versionInfo(r.Active), Previous: versionInfo(r.Previous),
		Topic: r.Topic, Offset: r.Offset}
	for _, sk := range r.Skipped {
		res.Skipped = append(res.Skipped, SkippedVersion{Version: versionInfo(sk.Version), Why: sk.Why})
	}
	return res, err
}

// deployApp is cfg as a deploy sees it: a copy with defaults applied,
// validated.
func (c *Config) deployApp(log *slog.Logger) (ideploy.App, error) {
	if log == nil {
		log = slog.Default()
	}
	c = c.Clone()
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return ideploy.App{}, err
	}
	// With kafka.brokers empty, the embedded broker of the running
	// process of this config: a development pipeline's deploys go to the
	// control topic on it. No such process: the brokers stay empty, and
	// an operation that needs them says what to do.
	brokers, fromFile, wait, _ := c.toolBrokers(c.Kafka.ConnectTimeout)
	kafka, err := c.kafkaClient(brokers, log)
	if err != nil {
		return ideploy.App{}, err
	}
	lim, err := c.pluginLimits()
	if err != nil {
		return ideploy.App{}, err
	}
	app := ideploy.App{
		AppID:   c.AppID,
		Kafka:   kafka,
		Limits:  lim,
		Logger:  log,
		Timeout: brokerTimeout,
		// As run does: wait for the brokers up to kafka.connect_timeout,
		// and explain a TLS or SASL refusal (reachKafka).
		Reach: func(ctx context.Context) error {
			return embeddedGone(brokers, fromFile, c.reachKafka(ctx, kafka, wait, log))
		},
	}
	for i := range c.Processors {
		app.Processors = append(app.Processors, c.pluginSpec(&c.Processors[i]))
	}
	return app, nil
}

// VersionModule returns the bytes of processor's version named ref in the
// control topic of cfg's app (`wasmstream replay --diff-against LABEL`):
// the active version or one in its history, by label, version ID
// (label@hash-prefix) or hash prefix of at least 6 hex digits; a label
// several versions share names the most recent. log nil means
// slog.Default().
func VersionModule(ctx context.Context, cfg *Config, processor, ref string, log *slog.Logger) ([]byte, VersionInfo, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return nil, VersionInfo{}, err
	}
	wasm, v, err := ideploy.Module(ctx, app, processor, ref)
	return wasm, versionInfo(v), err
}

// ErrSamePause is returned (wrapped) by Pause and Resume when the
// processor is already so in the control topic: nothing was published.
var ErrSamePause = ideploy.ErrSamePause

// PauseResult is what Pause or Resume published.
type PauseResult struct {
	Processor string
	Paused    bool
	// Topic is the control topic; Offset the pause record's offset (-1
	// when nothing was published).
	Topic  string
	Offset int64
}

// Pause publishes to the control topic of cfg's app that processor is
// paused: every running process stops fetching its inputs at its tasks'
// next commit point and keeps their assignment, state and offsets; its
// timers do not fire; a process that starts later starts it paused.
// Resume undoes it, and processing continues where it stopped. log nil
// means slog.Default().
func Pause(ctx context.Context, cfg *Config, processor string, log *slog.Logger) (PauseResult, error) {
	return setPause(ctx, cfg, processor, true, log)
}

// Resume publishes that processor is no longer paused (see Pause).
func Resume(ctx context.Context, cfg *Config, processor string, log *slog.Logger) (PauseResult, error) {
	return setPause(ctx, cfg, processor, false, log)
}

func setPause(ctx context.Context, cfg *Config, processor string, paused bool, log *slog.Logger) (PauseResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return PauseResult{Processor: processor, Paused: paused, Offset: -1}, err
	}
	r, err := ideploy.SetPause(ctx, app, processor, paused)
	return PauseResult{Processor: r.Processor, Paused: r.Paused, Topic: r.Topic, Offset: r.Offset}, err
}
