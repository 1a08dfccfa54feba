package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// A processor's plugin has versions: the config file's plugin is the first;
// `wasmstream deploy` publishes others to the app's control topic
// (<app_id>-plugins), which every process of the app follows. A process
// starts with the version the control topic names, and swaps each of its
// tasks to a newly published one at the task's next commit point.

// VersionInfo describes one plugin version.
type VersionInfo struct {
	ID    string `json:"id"` // the value of the wasmstream-version header
	Hash  string `json:"sha256,omitempty"`
	Label string `json:"label,omitempty"`
}

// Refusal is a version from the control topic this process would not run.
type Refusal struct {
	VersionInfo
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ProcessorVersions is where a processor stands in this process.
type ProcessorVersions struct {
	Processor string `json:"processor"`
	// Active is the version this process runs (and new tasks start with).
	Active VersionInfo `json:"active"`
	// Tasks maps each task ("processor/topic/partition") to the version
	// ID it runs; during a swap some still run the old one.
	Tasks map[string]string `json:"tasks"`
	// Refused lists the latest versions this process refused, newest last;
	// Refusals counts them all.
	Refused  []Refusal `json:"refused,omitempty"`
	Refusals int64     `json:"refusals"`
}

// procVersions is the host's record of one processor's versions.
type procVersions struct {
	mu       sync.Mutex
	active   control.Version
	byID     map[string]control.Version
	refused  []Refusal // the latest maxRefusals
	refusals int64
}

const maxRefusals = 8

func (pv *procVersions) refuse(log func(string, ...any), processor string, v control.Version, err error) {
	r := Refusal{VersionInfo: info(v), Reason: err.Error(), At: time.Now().UTC()}
	pv.mu.Lock()
	pv.refused = append(pv.refused, r)
	pv.refusals++
	if len(pv.refused) > maxRefusals {
		pv.refused = pv.refused[len(pv.refused)-maxRefusals:]
	}
	active := pv.active
	pv.mu.Unlock()
	log("plugin version from the control topic refused; the running version stays",
		"processor", processor, "version", r.ID, "running", versionID(active), "reason", err)
}

// versionID names a version in the wasmstream-version header:
// "<label>@<sha256 prefix>", or the prefix alone without a label.
func versionID(v control.Version) string {
	if v.Label == "" {
		return v.Short()
	}
	return v.Label + "@" + v.Short()
}

func info(v control.Version) VersionInfo {
	if v.Hash == "" {
		return VersionInfo{ID: "(unreadable)"}
	}
	return VersionInfo{ID: versionID(v), Hash: v.Hash, Label: v.Label}
}

// loadControl makes sure the control topic exists, reads it to its end and
// compiles the version it names for each processor, which the host then
// starts with instead of the config file's plugin. A version it cannot run
// is refused (logged, counted, shown) and the config's plugin is used.
func (h *Host) loadControl(ctx context.Context) error {
	h.ctlTopic = control.TopicName(h.cfg.AppID)
	h.versions = map[string]*procVersions{}
	for _, lp := range h.procs {
		pv := &procVersions{active: lp.version, byID: map[string]control.Version{}}
		pv.byID[versionID(lp.version)] = lp.version
		h.versions[lp.cfg.Name] = pv
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.brokers...)}, h.kafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()
	if err := control.EnsureTopic(tctx, kadm.NewClient(cl), h.ctlTopic); err != nil {
		return err
	}
	h.ctlReader, err = control.NewReader(control.Config{Brokers: h.brokers, Topic: h.ctlTopic,
		ClientOpts: h.kafkaOpts})
	if err != nil {
		return err
	}
	st, err := h.ctlReader.Load(tctx)
	if err != nil {
		return err
	}
	for _, lp := range h.procs {
		pv := h.versions[lp.cfg.Name]
		m, err := st.Manifest(lp.cfg.Name)
		switch {
		case errors.Is(err, control.ErrNoManifest):
			continue // never deployed: the config's plugin
		case err != nil:
			pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
			continue
		case m.Hash == lp.version.Hash:
			lp.version = m.Version // the same bytes, under the deployed label
			pv.active = m.Version
			pv.byID[versionID(m.Version)] = m.Version
			continue
		}
		wasm, err := st.Module(m.Hash)
		if err == nil {
			err = h.checkSize(wasm)
		}
		if err != nil {
			pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
			continue
		}
		mod, err := lp.compile(ctx, wasm)
		if err != nil {
			pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
			continue
		}
		lp.module, lp.version = mod, m.Version
		pv.active = m.Version
		pv.byID[versionID(m.Version)] = m.Version
		h.log.Info("running the deployed plugin version from the control topic", "processor", lp.cfg.Name,
			"version", versionID(m.Version), "deployed_by", m.DeployedBy, "deployed_at", m.DeployedAt)
	}
	return nil
}

func (h *Host) checkSize(wasm []byte) error {
	if max := uint64(h.cfg.Runtime.MaxModuleSize); uint64(len(wasm)) > max {
		return fmt.Errorf("module of %d bytes is over runtime.max_module_size (%d)", len(wasm), max)
	}
	return nil
}

// follow applies the control topic's new versions until ctx ends. A read
// error (the topic deleted, a broker gone) is logged and reading resumes
// after a pause: processing goes on with the running versions meanwhile.
func (h *Host) follow(ctx context.Context) {
	for {
		err := h.ctlReader.Follow(ctx, func(m control.Manifest, wasm []byte, err error) {
			h.onManifest(ctx, m, wasm, err)
		})
		if ctx.Err() != nil {
			return
		}
		h.log.Error("reading the control topic; retrying in 5s", "topic", h.ctlTopic, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// onManifest takes in one manifest of the control topic: it compiles the
// version (on the follower's goroutine, off the record path) and asks the
// runner to swap to it.
func (h *Host) onManifest(ctx context.Context, m control.Manifest, wasm []byte, err error) {
	var lp *loadedProcessor
	for _, p := range h.procs {
		if p.cfg.Name == m.Processor {
			lp = p
		}
	}
	if lp == nil {
		h.log.Warn("the control topic names a processor this config does not have; ignored", "processor", m.Processor)
		return
	}
	pv := h.versions[lp.cfg.Name]
	if err != nil {
		pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
		return
	}
	pv.mu.Lock()
	same := pv.active.Hash == m.Hash
	pv.mu.Unlock()
	if same {
		return // already running it (e.g. the rollback this process made)
	}
	if err := h.checkSize(wasm); err != nil {
		pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
		return
	}
	mod, err := lp.compile(ctx, wasm)
	if err != nil {
		pv.refuse(h.log.Error, lp.cfg.Name, m.Version, err)
		return
	}
	canary := runner.Canary{}
	if m.Reason == control.ReasonDeploy {
		// A rollback goes back to a version that ran before: no canary.
		canary = runner.Canary{
			Window:          h.cfg.Swap.CanaryWindow,
			MaxFailureRatio: h.cfg.Swap.MaxFailureRatio,
			MinRecords:      h.cfg.Swap.MinRecords,
		}
	}
	id := versionID(m.Version)
	pv.mu.Lock()
	pv.active = m.Version
	pv.byID[id] = m.Version
	pv.mu.Unlock()
	h.log.Info("new plugin version from the control topic; tasks switch at their next commit point",
		"processor", lp.cfg.Name, "version", id, "reason", m.Reason, "deployed_by", m.DeployedBy)
	if err := h.runner.Swap(lp.cfg.Name, runner.Version{ID: id, Plugin: &pluginFactory{module: mod, binding: lp.binding, version: id}}, canary); err != nil {
		h.log.Error("swap", "processor", lp.cfg.Name, "err", err)
	}
}

// onRollback publishes an automatic rollback made by this process's runner
// to the control topic, so the rest of the fleet follows. Several processes
// may detect the same failing version: the publisher only rolls back if the
// topic still names it.
func (h *Host) onRollback(ev runner.RollbackEvent) {
	pv := h.versions[ev.Processor]
	if pv == nil {
		return
	}
	pv.mu.Lock()
	bad, known := pv.byID[ev.From]
	if back, ok := pv.byID[ev.To]; ok {
		pv.active = back
	}
	pv.mu.Unlock()
	if !known || bad.Hash == "" {
		// Without the failing version's hash the rollback could undo
		// whatever the topic names now, a newer deploy included.
		h.log.Error("automatic rollback not published: the failing version is unknown to the host",
			"processor", ev.Processor, "from", ev.From)
		return
	}
	pub, err := h.controlPublisher()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), brokerTimeout)
		_, err = pub.Rollback(ctx, ev.Processor, control.AutoRollback(ev.Reason), bad.Hash, deployer())
		cancel()
	}
	switch {
	case err == nil:
		h.log.Warn("automatic rollback published to the control topic", "processor", ev.Processor, "from", ev.From, "to", ev.To)
	case errors.Is(err, control.ErrActiveChanged):
		h.log.Info("automatic rollback: the control topic has already moved on", "processor", ev.Processor, "from", ev.From)
	default:
		h.log.Error("automatic rollback could not be published; this process runs the previous version, others may not",
			"processor", ev.Processor, "from", ev.From, "to", ev.To, "err", err)
	}
}

func (h *Host) controlPublisher() (*control.Publisher, error) {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	if h.publisher == nil {
		p, err := control.NewPublisher(control.Config{Brokers: h.brokers, Topic: h.ctlTopic,
			ClientOpts: h.kafkaOpts})
		if err != nil {
			return nil, err
		}
		h.publisher = p
	}
	return h.publisher, nil
}

// Versions reports, per processor, the version this process runs, the
// version of each of its tasks and the versions it refused. Safe for
// concurrent use.
func (h *Host) Versions() []ProcessorVersions {
	var out []ProcessorVersions
	for _, lp := range h.procs {
		pv := h.versions[lp.cfg.Name]
		if pv == nil {
			continue
		}
		pv.mu.Lock()
		p := ProcessorVersions{Processor: lp.cfg.Name, Active: info(pv.active), Tasks: map[string]string{},
			Refused: append([]Refusal(nil), pv.refused...), Refusals: pv.refusals}
		pv.mu.Unlock()
		if h.runner != nil {
			active, tasks := h.runner.ActiveVersion(lp.cfg.Name)
			if v, ok := pv.lookup(active); ok {
				p.Active = info(v)
			}
			for id, v := range tasks {
				p.Tasks[id.String()] = v
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Processor < out[j].Processor })
	return out
}

func (pv *procVersions) lookup(id string) (control.Version, bool) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	v, ok := pv.byID[id]
	return v, ok
}

// SwapStalls returns the latest per-task swap stalls of a processor and
// the gaps across commit points without a swap (see runner.Runner.SwapStalls).
func (h *Host) SwapStalls(processor string) (stalls, gaps []time.Duration) {
	if h.runner == nil {
		return nil, nil
	}
	return h.runner.SwapStalls(processor)
}

// deployer names who publishes: user@host.
func deployer() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
