package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// depState reads the control topic of p's app with a new Reader.
func depState(t *testing.T, p *pipeline) *control.State {
	t.Helper()
	r, err := control.NewReader(control.Config{Kafka: kclient.Config{Brokers: p.b.Addrs()}, Topic: control.TopicName(p.cfg.AppID)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := r.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// depEnd is the end offset of the control topic of p's app, -1 if the
// topic does not exist.
func depEnd(t *testing.T, p *pipeline) int64 {
	t.Helper()
	topic := control.TopicName(p.cfg.AppID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := p.b.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.Offset
}

func depRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func depCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The first deploy records the config file's plugin as the initial version,
// so that rollback returns to it; a second rollback has nowhere to go.
func TestDeployRecordsConfigVersionThenRollsBack(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	ctx, log := depCtx(t), testLogger(t)
	v1 := control.NewVersion(depRead(t, engineTestdata("passthrough")), "config")
	mod := depRead(t, engineTestdata("trap")) // a valid plugin: traps only on "boom"
	v2 := control.NewVersion(mod, "v2")
	topic := control.TopicName(p.cfg.AppID)

	res, err := Deploy(ctx, p.cfg, "proc", mod, "v2", log)
	if err != nil {
		t.Fatal(err)
	}
	want := DeployResult{Processor: "proc", Topic: topic, Offset: res.Offset,
		Active:   VersionInfo{ID: "v2@" + v2.Short(), Hash: v2.Hash, Label: "v2"},
		Previous: VersionInfo{ID: "config@" + v1.Short(), Hash: v1.Hash, Label: "config"},
		Initial:  VersionInfo{ID: "config@" + v1.Short(), Hash: v1.Hash, Label: "config"}}
	if res != want || res.Offset < 2 {
		t.Fatalf("Deploy = %+v\nwant %+v (offset after the two versions' chunks and the initial manifest)", res, want)
	}
	st := depState(t, p)
	m, err := st.Manifest("proc")
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != v2 || m.Reason != control.ReasonDeploy || m.DeployedBy != control.Deployer() || m.Offset != res.Offset ||
		!slices.Equal(m.History, []control.Version{v1}) {
		t.Fatalf("the control topic holds %+v; want %s deployed by %s with history [%s]", m, v2, control.Deployer(), v1)
	}
	if b, err := st.Module(context.Background(), v2.Hash); err != nil || !bytes.Equal(b, mod) {
		t.Fatalf("Module(v2): %d bytes, %v", len(b), err)
	}

	// The same content again: nothing written, and said so.
	end := depEnd(t, p)
	res, err = Deploy(ctx, p.cfg, "proc", mod, "v2-again", log)
	if !errors.Is(err, ErrAlreadyActive) || res.Active.ID != "v2@"+v2.Short() || !strings.Contains(err.Error(), "already runs v2@") {
		t.Fatalf("Deploy of the active content = %+v, %v; want ErrAlreadyActive naming v2", res, err)
	}
	if e := depEnd(t, p); e != end {
		t.Fatalf("a deploy of the active content wrote %d records", e-end)
	}

	rb, err := Rollback(ctx, p.cfg, "proc", log)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Active.ID != "config@"+v1.Short() || rb.Previous.ID != "v2@"+v2.Short() || rb.Topic != topic || rb.Offset != end {
		t.Fatalf("Rollback = %+v; want config@%s from v2@%s at offset %d", rb, v1.Short(), v2.Short(), end)
	}
	m, err = depState(t, p).Manifest("proc")
	if err != nil || m.Version != v1 || m.Reason != control.ReasonRollback || len(m.History) != 0 {
		t.Fatalf("after rollback the control topic holds %+v, %v; want %s (rollback) with no history", m, err, v1)
	}

	_, err = Rollback(ctx, p.cfg, "proc", log)
	if err == nil || !strings.Contains(err.Error(), "no previous version") || !strings.Contains(err.Error(), "config@"+v1.Short()) {
		t.Fatalf("second Rollback = %v; want no previous version, naming config@%s", err, v1.Short())
	}
	if e := depEnd(t, p); e != end+1 {
		t.Fatalf("end offset %d after the refused rollback, want %d", e, end+1)
	}
}

// Everything a running process would refuse is refused before anything is
// written to the control topic, with an error naming the processor and
// saying what is wrong.
func TestDeployRefusesWhatCannotRun(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	ctx, log := depCtx(t), testLogger(t)
	// Before any deploy the topic does not exist; a refusal must not create it.
	if _, err := Deploy(ctx, p.cfg, "proc", depRead(t, engineTestdata("abi3")), "x", log); err == nil {
		t.Fatal("deploying an ABI 2 module succeeded")
	}
	if e := depEnd(t, p); e != -1 {
		t.Fatalf("a refused first deploy left a control topic (end offset %d)", e)
	}
	if _, err := Deploy(ctx, p.cfg, "proc", depRead(t, engineTestdata("trap")), "ok", log); err != nil {
		t.Fatal(err)
	}
	end := depEnd(t, p)

	notWasm := []byte("#!/bin/sh\necho this is not a module\n")
	big := bytes.Repeat([]byte{0}, 2048)
	small := *p.cfg
	small.Runtime.MaxModuleSize = 1024
	embedded := *p.cfg
	embedded.Kafka.Brokers = nil
	for _, c := range []struct {
		name      string
		cfg       *Config
		processor string
		wasm      []byte
		want      []string
	}{
		{"corrupt", p.cfg, "proc", depRead(t, engineTestdata("corrupt")), []string{`processor "proc"`, "not a WebAssembly module"}},
		{"truncated", p.cfg, "proc", depRead(t, engineTestdata("truncated")), []string{`processor "proc"`, "compile"}},
		{"not wasm", p.cfg, "proc", notWasm, []string{`processor "proc"`, "not a WebAssembly module"}},
		{"empty", p.cfg, "proc", nil, []string{`processor "proc"`, "empty"}},
		{"wrong ABI version", p.cfg, "proc", depRead(t, engineTestdata("abi3")), []string{`processor "proc"`, "ABI version", "supports 1, 2"}},
		{"no ABI marker", p.cfg, "proc", depRead(t, engineTestdata("noabi")), []string{`processor "proc"`, "wasmstream_abi_version"}},
		{"missing export", p.cfg, "proc", depRead(t, engineTestdata("missingprocess")), []string{`processor "proc"`, "missing export", "wasmstream_process"}},
		{"forbidden import", p.cfg, "proc", depRead(t, engineTestdata("forbiddenimport")), []string{`processor "proc"`, "env"}},
		{"init traps", p.cfg, "proc", depRead(t, engineTestdata("inittrap")), []string{`processor "proc"`, "init", "trap"}},
		{"init fails", p.cfg, "proc", depRead(t, engineTestdata("initfail")), []string{`processor "proc"`, "init", `missing field "threshold"`}},
		{"memory over the limit", p.cfg, "proc", depRead(t, engineTestdata("bigmemory")), []string{`processor "proc"`, "memory"}},
		{"over max_module_size", &small, "proc", big, []string{`processor "proc"`, "2048 bytes", "runtime.max_module_size (1KiB)"}},
		{"unknown processor", p.cfg, "nope", depRead(t, engineTestdata("trap")), []string{`unknown processor "nope"`, "proc"}},
		{"embedded broker", &embedded, "proc", depRead(t, engineTestdata("trap")), []string{"kafka.brokers is empty", "embedded"}},
		{"label with @", p.cfg, "proc", depRead(t, engineTestdata("loop")), []string{`processor "proc"`, "'@'"}},
		// The processor's binding: wordcount needs store "counts", which
		// this processor does not declare, and checks it at init.
		{"undeclared store", p.cfg, "proc", depRead(t, wasmbuild.Build(t, "./plugins/wordcount")), []string{`processor "proc"`, "init", "counts"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			label := "bad"
			if c.name == "label with @" {
				label = "v2@x"
			}
			_, err := Deploy(ctx, c.cfg, c.processor, c.wasm, label, log)
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Deploy = %v\nwant it to say %q", err, w)
				}
			}
			if e := depEnd(t, p); e != end {
				t.Errorf("the refused deploy wrote %d records to the control topic", e-end)
			}
			t.Logf("%v", err)
		})
	}

	for _, c := range []struct {
		name      string
		cfg       *Config
		processor string
		want      string
	}{
		{"unknown processor", p.cfg, "nope", `unknown processor "nope"; the config's processors: proc`},
		{"embedded broker", &embedded, "proc", "kafka.brokers is empty"},
	} {
		if _, err := Rollback(ctx, c.cfg, c.processor, log); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Rollback, %s: %v; want %q", c.name, err, c.want)
		}
	}
	if e := depEnd(t, p); e != end {
		t.Errorf("the refused rollbacks wrote %d records to the control topic", e-end)
	}
}

// Rollback of an app that never deployed says so (and creates no topic);
// of a processor with a version but no previous one too.
func TestRollbackWithNothingDeployed(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	ctx, log := depCtx(t), testLogger(t)
	if _, err := Rollback(ctx, p.cfg, "proc", log); err == nil || !strings.Contains(err.Error(), "nothing deployed") {
		t.Fatalf("Rollback with no control topic = %v; want nothing deployed", err)
	}
	if e := depEnd(t, p); e != -1 {
		t.Fatalf("Rollback created the control topic (end offset %d)", e)
	}
	// Another processor of the app has a version; "proc" has none.
	other := *p.cfg
	other.Processors = append(slices.Clone(p.cfg.Processors), p.cfg.Processors[0])
	other.Processors[1].Name = "other"
	other.Processors[1].Inputs = []string{p.b.Name(t, "other-in")}
	if _, err := Deploy(ctx, &other, "other", depRead(t, engineTestdata("trap")), "v2", log); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollback(ctx, p.cfg, "proc", log); err == nil || !strings.Contains(err.Error(), `processor "proc": nothing deployed`) {
		t.Fatalf("Rollback of a processor without a version = %v; want nothing deployed", err)
	}
}

// A config file's plugin that could not run is not recorded as the initial
// version: the deploy goes ahead, with nothing to roll back to.
func TestDeploySkipsConfigPluginThatCannotRun(t *testing.T) {
	p := newPipeline(t, engineTestdata("inittrap"), OnErrorFail)
	ctx := depCtx(t)
	var logs bytes.Buffer
	res, err := Deploy(ctx, p.cfg, "proc", depRead(t, engineTestdata("passthrough")), "v2", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Initial.ID != "" || res.Previous.ID != "" {
		t.Fatalf("Deploy = %+v; want no initial and no previous version", res)
	}
	if !strings.Contains(logs.String(), "cannot run") || !strings.Contains(logs.String(), "init") {
		t.Fatalf("no warning about the config's plugin; logs:\n%s", logs.String())
	}
	m, err := depState(t, p).Manifest("proc")
	if err != nil || m.Label != "v2" || len(m.History) != 0 {
		t.Fatalf("control topic: %+v, %v; want v2 with no history", m, err)
	}
}

// A manifest written straight to the control topic by another tool, whose
// module chunks were never written, is refused by every process. It must
// not take rollback away: the next deploy reports the version before it as
// the one it replaced, and a rollback passes over it with a note (it used to be
// that a bad version blocked rollback).
func TestRollbackSkipsVersionNoProcessCouldRun(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	ctx, log := depCtx(t), testLogger(t)
	config := control.NewVersion(depRead(t, engineTestdata("passthrough")), "config")
	mod2 := depRead(t, engineTestdata("trap"))
	v2 := control.NewVersion(mod2, "v2")
	mod3 := append(append([]byte{}, mod2...), 0x00, 0x04, 0x02, 'v', '3', 0x01) // a custom section: another hash
	v3 := control.NewVersion(mod3, "v3")
	if _, err := Deploy(ctx, p.cfg, "proc", mod2, "v2", log); err != nil {
		t.Fatal(err)
	}
	ghost := control.Version{Hash: strings.Repeat("cd", 32), Size: 8 * control.ChunkSize, Chunks: 8, Label: "ghost"}
	writeManifest := func(active control.Version, history ...control.Version) {
		t.Helper()
		value, err := json.Marshal(control.Manifest{Format: control.Format, Processor: "proc", Version: active,
			DeployedBy: "another-tool", DeployedAt: time.Now().UTC(), Reason: control.ReasonDeploy, History: history})
		if err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Topic: control.TopicName(p.cfg.AppID), Key: []byte("processor/proc"), Value: value}
		if err := p.b.Client(t).ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	writeManifest(ghost, v2, config)

	res, err := Deploy(ctx, p.cfg, "proc", mod3, "v3", log)
	if err != nil {
		t.Fatal(err)
	}
	if res.Previous.Hash != v2.Hash {
		t.Fatalf("deploy over the ghost reports it replaced %+v, want v2@%s", res.Previous, v2.Short())
	}
	if m, err := depState(t, p).Manifest("proc"); err != nil || !slices.Equal(m.History, []control.Version{v2, config}) {
		t.Fatalf("history after deploying over the ghost: %v (%v), want [v2 config]", m.History, err)
	}

	// The ghost in a history, ahead of a good version: skipped with a note.
	writeManifest(v3, ghost, config)
	rb, err := Rollback(ctx, p.cfg, "proc", log)
	if err != nil {
		t.Fatalf("rollback past the ghost: %v", err)
	}
	if rb.Active.Hash != config.Hash || len(rb.Skipped) != 1 || rb.Skipped[0].Version.Hash != ghost.Hash ||
		!strings.Contains(rb.Skipped[0].Why, "chunks missing") {
		t.Fatalf("Rollback = %+v; want config@%s, skipping the ghost for its missing chunks", rb, config.Short())
	}

	// Only the ghost behind: a clear refusal, nothing written.
	writeManifest(v3, ghost)
	end := depEnd(t, p)
	if _, err := Rollback(ctx, p.cfg, "proc", log); err == nil || !strings.Contains(err.Error(), "none of its 1 previous versions can run") {
		t.Fatalf("rollback with only the ghost behind: %v", err)
	}
	if e := depEnd(t, p); e != end {
		t.Fatalf("the refused rollback wrote %d records", e-end)
	}
}

// processors[].shadow, the config's form of deploy --shadow: every
// process runs it from its start beside the plugin, on an embedded broker
// too (no control topic record is needed); nothing of it reaches the
// output, and a module that does not run is skipped, the processor running
// without it.
func TestConfigShadow(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorFail)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	p.cfg.Processors[0].Shadow = wasmbuild.Build(t, "./internal/testplugins/counter")
	h, stop := p.run(t)
	// Its instance starts beside the active path (a slow start, under
	// -race on a loaded machine, leaves the first records uncompared):
	// rounds of 30 keys go in until it compared some.
	var st runner.ShadowStatus
	var ok bool
	testutil.Eventually(t, 120*time.Second, func() error {
		keys := make([]string, 30)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		p.produce(t, keys...)
		p.waitProcessed(t)
		if st, ok = h.runnerOf("proc").ShadowStatus("proc"); !ok || st.Total.Records == 0 {
			return fmt.Errorf("the shadow compared no record: ok=%v %+v", ok, st)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !ok || !st.Running || st.Total.Records == 0 || st.Total.Matches != st.Total.Records || !strings.HasPrefix(st.Version, "config-shadow@") {
		t.Fatalf("config shadow: ok=%v %+v", ok, st)
	}
	for _, r := range p.b.ReadCommitted(t, p.out, 30*time.Second) {
		for _, hd := range r.Headers {
			if hd.Key == "wasmstream-version" && strings.HasPrefix(string(hd.Value), "config-shadow@") {
				t.Fatalf("an output of the shadow: %q", r.Value)
			}
		}
	}

	// A shadow that does not run: logged, and the processor runs.
	p2 := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorFail)
	p2.cfg.Processors[0].Stores = []string{"counts"}
	p2.cfg.State.Dir = t.TempDir()
	p2.cfg.Processors[0].Shadow = filepath.Join(t.TempDir(), "missing.wasm")
	h2, stop2 := p2.run(t)
	p2.produce(t, "a", "b")
	p2.waitProcessed(t)
	_, ok = h2.runnerOf("proc").ShadowStatus("proc")
	if err := stop2(); err != nil || ok {
		t.Fatalf("a missing shadow: Run %v, a shadow ran %v", err, ok)
	}
}
