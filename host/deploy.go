package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kafkasec"
)

// Deploy and Rollback are `wasmstream deploy` and `wasmstream rollback`:
// they publish to the app's control topic, which every running process
// follows (see swap.go). Neither talks to the processes: a process
// switches each task at its next commit point after it reads the change.

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
	// Topic is the control topic; Offset the manifest record's offset.
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
	Topic    string
	Offset   int64
}

// publishTimeout bounds the Kafka part of a deploy or rollback once the
// brokers answered (writing a large module's chunks included).
const publishTimeout = 2 * time.Minute

// Deploy publishes wasm as processor's active plugin version to the control
// topic of cfg's app, labeled label ("" for none: the version is then
// known by its hash prefix alone).
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
	if log == nil {
		log = slog.Default()
	}
	res := DeployResult{Processor: processor, Topic: control.TopicName(cfg.AppID), Offset: -1}
	pc, err := findProcessor(cfg, processor)
	if err != nil {
		return res, err
	}
	if err := checkLabel(label); err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	if err := needBrokers(cfg, "deploy"); err != nil {
		return res, err
	}
	if max := cfg.Runtime.MaxModuleSize; uint64(len(wasm)) > uint64(max) {
		return res, fmt.Errorf("processor %q: the module is %d bytes, over runtime.max_module_size (%s): running processes would refuse it", processor, len(wasm), max)
	}
	if len(wasm) == 0 {
		return res, fmt.Errorf("processor %q: the module is empty", processor)
	}

	// Compile and instantiate it as a process would (swap.go's onManifest).
	lp, err := newProcessor(ctx, pc, compileCacheDir(cfg), log)
	if err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	defer lp.rt.Close(context.WithoutCancel(ctx))
	mod, err := lp.compile(ctx, wasm)
	if err != nil {
		return res, fmt.Errorf("processor %q cannot run this module (nothing published): %w", processor, err)
	}
	_ = mod.Close(ctx)

	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, cfg, true)
	if err != nil {
		return res, err
	}
	defer pub.Close()

	if _, err := st.Manifest(processor); errors.Is(err, control.ErrNoManifest) || errors.Is(err, control.ErrCorrupt) {
		// Nothing to roll back to yet: record the config's plugin first.
		if cv, ok := configVersion(ctx, lp, cfg, log); ok {
			m, published, err := pub.DeployInitial(ctx, processor, cv, "config", deployer())
			if err != nil {
				return res, fmt.Errorf("processor %q: recording the config file's plugin as the initial version: %w", processor, err)
			}
			if published {
				res.Initial = info(m.Version)
				log.Info("recorded the config file's plugin as the processor's initial version",
					"processor", processor, "version", res.Initial.ID, "topic", res.Topic, "offset", m.Offset)
			}
		}
	}

	m, err := pub.Deploy(ctx, processor, wasm, label, deployer())
	if errors.Is(err, control.ErrAlreadyActive) {
		res.Active, res.Offset = info(m.Version), m.Offset
		if len(m.History) > 0 {
			res.Previous = info(m.History[0])
		}
		return res, &markedError{fmt.Sprintf("processor %q already runs %s (%s by %s at %s): nothing published",
			processor, versionID(m.Version), m.Reason, m.DeployedBy, m.DeployedAt.Format(time.RFC3339)), ErrAlreadyActive}
	}
	if err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	res.Active, res.Offset = info(m.Version), m.Offset
	if len(m.History) > 0 {
		res.Previous = info(m.History[0])
	}
	return res, nil
}

// Rollback makes processor's previous version active again in the control
// topic of cfg's app (the manifest's history[0]). It refuses an unknown
// processor, a processor with nothing deployed or no previous version, and
// a change that lands between its read and its write (run it again then).
func Rollback(ctx context.Context, cfg *Config, processor string, log *slog.Logger) (RollbackResult, error) {
	if log == nil {
		log = slog.Default()
	}
	res := RollbackResult{Processor: processor, Topic: control.TopicName(cfg.AppID), Offset: -1}
	if _, err := findProcessor(cfg, processor); err != nil {
		return res, err
	}
	if err := needBrokers(cfg, "rollback"); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, cfg, false)
	if err != nil {
		return res, err
	}
	defer pub.Close()
	cur, err := st.Manifest(processor)
	switch {
	case errors.Is(err, control.ErrNoManifest):
		return res, fmt.Errorf("processor %q: nothing deployed (control topic %s has no version of it): nothing to roll back", processor, res.Topic)
	case err != nil:
		return res, fmt.Errorf("processor %q: %w", processor, err)
	case len(cur.History) == 0:
		return res, fmt.Errorf("processor %q runs %s and has no previous version to roll back to (%s by %s at %s)",
			processor, versionID(cur.Version), cur.Reason, cur.DeployedBy, cur.DeployedAt.Format(time.RFC3339))
	}
	res.Previous = info(cur.Version)
	m, err := pub.Rollback(ctx, processor, control.ReasonRollback, cur.Hash, deployer())
	switch {
	case errors.Is(err, control.ErrActiveChanged):
		return res, fmt.Errorf("processor %q: the active version changed while rolling back (now %s, %s by %s); nothing published: check it and run rollback again if still wanted",
			processor, versionID(m.Version), m.Reason, m.DeployedBy)
	case err != nil:
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	res.Active, res.Offset = info(m.Version), m.Offset
	return res, nil
}

// findProcessor returns cfg's processor called name, or an error listing
// the processors cfg has.
func findProcessor(cfg *Config, name string) (*ProcessorConfig, error) {
	var names []string
	for i := range cfg.Processors {
		if cfg.Processors[i].Name == name {
			return &cfg.Processors[i], nil
		}
		names = append(names, cfg.Processors[i].Name)
	}
	return nil, fmt.Errorf("unknown processor %q; the config's processors: %s", name, strings.Join(names, ", "))
}

// checkLabel refuses labels that would make a version ID ambiguous or
// unreadable in headers and logs.
func checkLabel(label string) error {
	if len(label) > 100 {
		return fmt.Errorf("label of %d characters (at most 100)", len(label))
	}
	if strings.Contains(label, "@") {
		return fmt.Errorf("label %q contains '@', which separates label and hash in a version ID", label)
	}
	for _, r := range label {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("label %q contains a space or an unprintable character", label)
		}
	}
	return nil
}

func needBrokers(cfg *Config, what string) error {
	if len(cfg.Kafka.Brokers) == 0 {
		return fmt.Errorf("kafka.brokers is empty: %s publishes to the control topic on the brokers the running processes use, "+
			"and an embedded development broker lives inside one process (set kafka.brokers, --brokers or WASMSTREAM_KAFKA__BROKERS)", what)
	}
	return nil
}

// openControl reaches the brokers, makes sure the control topic exists
// (create: else a missing topic means nothing was ever deployed) and
// returns a Publisher with the topic's state, read to its end.
func openControl(ctx context.Context, cfg *Config, create bool) (*control.Publisher, *control.State, error) {
	topic := control.TopicName(cfg.AppID)
	brokers := strings.Join(cfg.Kafka.Brokers, ",")
	kopts, err := cfg.clientOpts()
	if err != nil {
		return nil, nil, err
	}
	if err := kafkasec.Check(ctx, cfg.Kafka.Brokers, cfg.Kafka.security()); err != nil {
		return nil, nil, err
	}
	ccfg := control.Config{Brokers: cfg.Kafka.Brokers, Topic: topic, ClientOpts: kopts}
	if create {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...)}, kopts...)...)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka client: %w", err)
		}
		tctx, cancel := context.WithTimeout(ctx, brokerTimeout)
		err = control.EnsureTopic(tctx, kadm.NewClient(cl), topic)
		cancel()
		cl.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("kafka.brokers %s: %w", brokers, err)
		}
	}
	r, err := control.NewReader(ccfg)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	tctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	st, err := r.Load(tctx)
	cancel()
	switch {
	case !create && errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, nil, fmt.Errorf("nothing deployed to app %q: its control topic %s does not exist on %s", cfg.AppID, topic, brokers)
	case err != nil:
		return nil, nil, fmt.Errorf("kafka.brokers %s: %w", brokers, err)
	}
	pub, err := control.NewPublisher(ccfg)
	if err != nil {
		return nil, nil, err
	}
	return pub, st, nil
}

// configVersion returns the bytes of the config file's plugin if a process
// could run them; otherwise it logs why they are skipped.
func configVersion(ctx context.Context, lp *loadedProcessor, cfg *Config, log *slog.Logger) ([]byte, bool) {
	skip := func(err error) ([]byte, bool) {
		log.Warn("the config file's plugin cannot run, so it is not recorded as the processor's initial version: this deploy has nothing to roll back to",
			"processor", lp.cfg.Name, "plugin", lp.cfg.Plugin, "err", err)
		return nil, false
	}
	wasm, err := os.ReadFile(lp.cfg.Plugin)
	if err != nil {
		return skip(err)
	}
	if max := cfg.Runtime.MaxModuleSize; uint64(len(wasm)) > uint64(max) {
		return skip(fmt.Errorf("%d bytes is over runtime.max_module_size (%s)", len(wasm), max))
	}
	mod, err := lp.compile(ctx, wasm)
	if err != nil {
		return skip(err)
	}
	_ = mod.Close(ctx)
	return wasm, true
}

// markedError is an error of its own words that errors.Is matches to mark.
type markedError struct {
	msg  string
	mark error
}

func (e *markedError) Error() string { return e.msg }
func (e *markedError) Unwrap() error { return e.mark }
