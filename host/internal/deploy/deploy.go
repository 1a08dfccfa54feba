// Package deploy is `wasmstream deploy` and `wasmstream rollback`: they
// publish to an app's control topic, which every running process follows
// (package follower). Neither talks to the processes: a process switches
// each task at its next commit point after it reads the change.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// App is the app a deploy or rollback publishes to.
type App struct {
	AppID string
	// Kafka is what the clients start from; Kafka.Brokers must be the
	// brokers the running processes use.
	Kafka      kclient.Config
	Processors []plugin.Spec
	Limits     plugin.Limits
	Logger     *slog.Logger
	// Timeout bounds each first contact with the brokers.
	Timeout time.Duration
	// Reach, if set, waits for the brokers before the first request, and
	// returns an error that says what is wrong and which setting to
	// change (a refused TLS handshake, failed SASL authentication,
	// brokers that stay unreachable), as a running process reports it.
	Reach func(context.Context) error
}

// Result is what Deploy or Rollback published.
type Result struct {
	Processor string
	// Active is the version now active in the control topic; Previous
	// the one it replaced (zero: none).
	Active, Previous versions.Info
	// Initial is the config file's plugin when Deploy recorded it first as
	// the processor's initial version; zero otherwise.
	Initial versions.Info
	// Topic is the control topic; Offset the manifest record's offset
	// (-1: nothing published).
	Topic  string
	Offset int64
	// Skipped are the previous versions a rollback passed over because no
	// process could run them (bytes missing or corrupt in the topic).
	Skipped []Skipped
}

// Skipped is a version a rollback passed over, and why.
type Skipped struct {
	Version versions.Info
	Why     string
}

// publishTimeout bounds the Kafka part of a deploy or rollback once the
// brokers answered (writing a large module's chunks included).
const publishTimeout = 2 * time.Minute

// Deploy publishes wasm as processor's active plugin version to the control
// topic of app, labeled label ("" for none: the version is then
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
// an error wrapping control.ErrAlreadyActive, with the result describing the
// active version.
func Deploy(ctx context.Context, app App, processor string, wasm []byte, label string) (Result, error) {
	log := app.Logger
	res := Result{Processor: processor, Topic: control.TopicName(app.AppID), Offset: -1}
	spec, err := findProcessor(app, processor)
	if err != nil {
		return res, err
	}
	if err := checkLabel(label); err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	if err := NeedBrokers(app, "deploy"); err != nil {
		return res, err
	}
	if err := app.Limits.CheckSize(wasm); err != nil {
		return res, fmt.Errorf("processor %q: %w: running processes would refuse it", processor, err)
	}
	if len(wasm) == 0 {
		return res, fmt.Errorf("processor %q: the module is empty", processor)
	}

	// Compile and instantiate it as a process would (the follower).
	lp, err := plugin.New(ctx, spec, app.Limits, log)
	if err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	defer lp.RT.Close(context.WithoutCancel(ctx))
	mod, err := lp.Compile(ctx, wasm)
	if err != nil {
		return res, fmt.Errorf("processor %q cannot run this module (nothing published): %w", processor, err)
	}
	_ = mod.Close(ctx)

	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, app, true)
	if err != nil {
		return res, err
	}
	defer pub.Close()

	if _, err := st.Manifest(processor); errors.Is(err, control.ErrNoManifest) || errors.Is(err, control.ErrCorrupt) {
		// Nothing to roll back to yet: record the config's plugin first.
		if cv, ok := configVersion(ctx, lp, app); ok {
			m, published, err := pub.DeployInitial(ctx, processor, cv, "config", control.Deployer())
			if err != nil {
				return res, fmt.Errorf("processor %q: recording the config file's plugin as the initial version: %w", processor, err)
			}
			if published {
				res.Initial = plugin.Info(m.Version)
				log.Info("recorded the config file's plugin as the processor's initial version",
					"processor", processor, "version", res.Initial.ID, "topic", res.Topic, "offset", m.Offset)
			}
		}
	}

	m, err := pub.Deploy(ctx, processor, wasm, label, control.Deployer())
	if errors.Is(err, control.ErrAlreadyActive) {
		res.Active, res.Offset = plugin.Info(m.Version), m.Offset
		if len(m.History) > 0 {
			res.Previous = plugin.Info(m.History[0])
		}
		return res, &markedError{fmt.Sprintf("processor %q already runs %s (%s by %s at %s): nothing published",
			processor, plugin.VersionID(m.Version), m.Reason, m.DeployedBy, m.DeployedAt.Format(time.RFC3339)), control.ErrAlreadyActive}
	}
	if err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	res.Active, res.Offset = plugin.Info(m.Version), m.Offset
	if len(m.History) > 0 {
		res.Previous = plugin.Info(m.History[0])
	}
	return res, nil
}

// Rollback makes processor's previous version active again in the control
// topic of app (the manifest's history[0]). It refuses an unknown
// processor, a processor with nothing deployed or no previous version, and
// a change that lands between its read and its write (run it again then).
func Rollback(ctx context.Context, app App, processor string) (Result, error) {
	res := Result{Processor: processor, Topic: control.TopicName(app.AppID), Offset: -1}
	if _, err := findProcessor(app, processor); err != nil {
		return res, err
	}
	if err := NeedBrokers(app, "rollback"); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, app, false)
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
			processor, plugin.VersionID(cur.Version), cur.Reason, cur.DeployedBy, cur.DeployedAt.Format(time.RFC3339))
	}
	res.Previous = plugin.Info(cur.Version)
	if err := checkTrusted(ctx, app, st, cur.History); err != nil {
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	m, err := pub.Rollback(ctx, processor, control.ReasonRollback, cur.Hash, control.Deployer())
	switch {
	case errors.Is(err, control.ErrActiveChanged):
		return res, fmt.Errorf("processor %q: the active version changed while rolling back (now %s, %s by %s); nothing published: check it and run rollback again if still wanted",
			processor, plugin.VersionID(m.Version), m.Reason, m.DeployedBy)
	case err != nil:
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	res.Active, res.Offset = plugin.Info(m.Version), m.Offset
	for _, sk := range m.Skipped {
		res.Skipped = append(res.Skipped, Skipped{Version: plugin.Info(sk.Version), Why: sk.Why})
		app.Logger.Warn("rollback skipped a version no process could run", "processor", processor,
			"version", plugin.VersionID(sk.Version), "why", sk.Why)
	}
	return res, nil
}

// checkTrusted refuses a rollback, with runtime.trusted_keys set, to a
// version those keys did not sign: every process would refuse it and keep
// running what it runs. The version checked is the one the publisher
// picks, the first of history whose bytes the topic holds whole.
func checkTrusted(ctx context.Context, app App, st *control.State, history []control.Version) error {
	if app.Limits.Trust == nil {
		return nil
	}
	for _, v := range history {
		wasm, err := st.Module(ctx, v.Hash)
		if errors.Is(err, control.ErrCorrupt) {
			continue // the publisher skips it too
		}
		if err != nil {
			return err
		}
		if err := app.Limits.Trust.Verify(wasm); err != nil {
			return fmt.Errorf("the version to roll back to, %s, would be refused by every process (nothing published): %w; deploy a signed version instead",
				plugin.VersionID(v), err)
		}
		return nil
	}
	return nil
}

// findProcessor returns app's processor called name, or an error listing
// the processors app has.
func findProcessor(app App, name string) (plugin.Spec, error) {
	var names []string
	for _, p := range app.Processors {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return plugin.Spec{}, fmt.Errorf("unknown processor %q; the config's processors: %s", name, strings.Join(names, ", "))
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

// NeedBrokers is the error of what (a command such as "deploy"), which
// goes through the app's control topic, when app has no brokers: no
// kafka.brokers, and no running process of the config whose embedded
// broker could stand in.
func NeedBrokers(app App, what string) error {
	if len(app.Kafka.Brokers) == 0 {
		return fmt.Errorf("kafka.brokers is empty and no wasmstream run of this config is running: %s goes through the control topic on the brokers the running processes use, "+
			"which for an embedded development broker is the one inside that process; start wasmstream run with this config first, "+
			"or set kafka.brokers, --brokers or WASMSTREAM_KAFKA__BROKERS", what)
	}
	return nil
}

// openControl reaches the brokers, makes sure the control topic exists
// (create: else a missing topic means nothing was ever deployed) and
// returns a Publisher with the topic's state, read to its end.
func openControl(ctx context.Context, app App, create bool) (*control.Publisher, *control.State, error) {
	topic := control.TopicName(app.AppID)
	brokers := strings.Join(app.Kafka.Brokers, ",")
	ccfg := control.Config{Kafka: app.Kafka, Topic: topic}
	if app.Reach != nil {
		if err := app.Reach(ctx); err != nil {
			return nil, nil, err
		}
	}
	if create {
		tctx, cancel := context.WithTimeout(ctx, app.Timeout)
		err := control.EnsureTopic(tctx, app.Kafka, topic)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("kafka.brokers %s: %w", brokers, err)
		}
	}
	r, err := control.NewReader(ccfg)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	tctx, cancel := context.WithTimeout(ctx, app.Timeout)
	st, err := r.Load(tctx)
	cancel()
	switch {
	case !create && errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, nil, fmt.Errorf("nothing deployed to app %q: its control topic %s does not exist on %s", app.AppID, topic, brokers)
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
func configVersion(ctx context.Context, lp *plugin.Processor, app App) ([]byte, bool) {
	skip := func(err error) ([]byte, bool) {
		app.Logger.Warn("the config file's plugin cannot run, so it is not recorded as the processor's initial version: this deploy has nothing to roll back to",
			"processor", lp.Spec.Name, "plugin", lp.Spec.Path, "err", err)
		return nil, false
	}
	wasm, err := os.ReadFile(lp.Spec.Path)
	if err != nil {
		return skip(err)
	}
	if err := app.Limits.CheckSize(wasm); err != nil {
		return skip(err)
	}
	mod, err := lp.Compile(ctx, wasm)
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

// Module returns the bytes of processor's version named ref in the control
// topic of app: the active version or one in its history whose label, or
// version ID (label@hash-prefix), or hash prefix (at least 6 hex digits)
// is ref. A label several versions share names the most recent of them
// (the active one, then the history's order).
func Module(ctx context.Context, app App, processor, ref string) ([]byte, versions.Info, error) {
	if _, err := findProcessor(app, processor); err != nil {
		return nil, versions.Info{}, err
	}
	if err := NeedBrokers(app, "reading a deployed version"); err != nil {
		return nil, versions.Info{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pub, st, err := openControl(ctx, app, false)
	if err != nil {
		return nil, versions.Info{}, err
	}
	pub.Close()
	m, err := st.Manifest(processor)
	if errors.Is(err, control.ErrNoManifest) {
		return nil, versions.Info{}, fmt.Errorf("processor %q: nothing deployed (control topic %s has no version of it), so no version %q", processor, control.TopicName(app.AppID), ref)
	}
	if err != nil {
		return nil, versions.Info{}, fmt.Errorf("processor %q: %w", processor, err)
	}
	all := append([]control.Version{m.Version}, m.History...)
	var known []string
	for _, v := range all {
		known = append(known, plugin.VersionID(v))
		byHash := len(ref) >= 6 && strings.HasPrefix(v.Hash, strings.ToLower(ref))
		if v.Label == ref || plugin.VersionID(v) == ref || byHash {
			wasm, err := st.Module(ctx, v.Hash)
			if err != nil {
				return nil, versions.Info{}, fmt.Errorf("processor %q: version %s: %w", processor, plugin.VersionID(v), err)
			}
			return wasm, plugin.Info(v), nil
		}
	}
	return nil, versions.Info{}, fmt.Errorf("processor %q has no version %q in control topic %s; its versions, newest first: %s",
		processor, ref, control.TopicName(app.AppID), strings.Join(known, ", "))
}
