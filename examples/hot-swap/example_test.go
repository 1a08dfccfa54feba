// The hot-swap example, run the way its README says, in one test process:
// two processes of the app (two Hosts) from the example's pipeline.yaml,
// names flowing in, v2 deployed with the function `wasmstream deploy` runs,
// then rolled back with the one `wasmstream rollback` runs; v2 replayed
// and diffed against v1 before the deploy, and against the deployed
// versions by label after, with the functions `wasmstream replay` runs.
package hotswap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/configload"
	"github.com/wasmstream/wasmstream/internal/exampletest"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

var names = []string{"ada", "alan", "barbara", "donald", "edsger", "grace", "john", "ken", "leslie", "margaret", "niklaus", "tony"}

func TestDeployAndRollBackOnTwoProcesses(t *testing.T) {
	b := testbroker.New(t)
	log := testbroker.Logger(t, slog.LevelWarn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The README's build: v1.wasm next to pipeline.yaml, v2.wasm to deploy.
	dir := t.TempDir()
	v2 := readWasm(t, "./examples/hot-swap/v2")
	load, in, out := exampleApp(t, b, dir)
	cfg := load()
	if cfg.Guarantee != host.ExactlyOnce || cfg.Kafka.TopicPartitions != 4 {
		t.Fatalf("the example should run exactly_once on 4 partitions: %s, %d", cfg.Guarantee, cfg.Kafka.TopicPartitions)
	}
	hosts, f := twoProcesses(t, b, load, in, log)
	defer f.stop()
	v1ID := hosts[0].Versions()[0].Active.ID
	if !strings.HasPrefix(v1ID, "config@") {
		t.Fatalf("the processes start with %s, want the config file's plugin", v1ID)
	}
	f.greeted(t, b, out, v1ID)

	// Before deploying, what would v2 have done with the names so far?
	// wasmstream replay -c pipeline.yaml greeter --plugin v2.wasm --out v2.jsonl
	// wasmstream replay -c pipeline.yaml greeter --plugin v2.wasm --diff-against v1.wasm --out diff.json
	v1, err := os.ReadFile(filepath.Join(dir, "v1.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	replayV2(t, ctx, cfg, v2, log)
	diff, err := host.ReplayDiff(ctx, cfg, host.ReplayOptions{Processor: "greeter", Plugin: v2, To: -1}, v1, 20, log)
	if err != nil {
		t.Fatal(err)
	}
	checkDiff(t, diff)

	// wasmstream deploy -c pipeline.yaml greeter v2.wasm
	dep, err := host.Deploy(ctx, cfg, "greeter", v2, "v2", log)
	if err != nil {
		t.Fatal(err)
	}
	v2ID := dep.Active.ID
	if !strings.HasPrefix(v2ID, "v2@") || dep.Previous.ID != v1ID || dep.Initial.ID != v1ID {
		t.Fatalf("Deploy = %+v; want v2 replacing %s, recorded as the initial version", dep, v1ID)
	}
	converge(t, hosts, v2ID)
	f.greeted(t, b, out, v2ID)

	// Versions in the control topic (the active one and its history) are
	// diffed by label: v2 against the config file's plugin, and v2 against
	// itself.
	// wasmstream replay -c pipeline.yaml greeter --plugin v2.wasm --diff-against config --out diff.json   (exit 1)
	// wasmstream replay -c pipeline.yaml greeter --plugin v2.wasm --diff-against v2 --out diff.json       (exit 0)
	config, _, err := host.VersionModule(ctx, cfg, "greeter", "config", log)
	if err != nil {
		t.Fatal(err)
	}
	if diff, err = host.ReplayDiff(ctx, cfg, host.ReplayOptions{Processor: "greeter", Plugin: v2, To: -1}, config, 20, log); err != nil {
		t.Fatal(err)
	}
	checkDiff(t, diff)
	deployed, info, err := host.VersionModule(ctx, cfg, "greeter", "v2", log)
	if err != nil || info.ID != v2ID {
		t.Fatalf("the version labeled v2: %s, %v; want %s", info.ID, err, v2ID)
	}
	same, err := host.ReplayDiff(ctx, cfg, host.ReplayOptions{Processor: "greeter", Plugin: v2, To: -1}, deployed, 20, log)
	if err != nil || !same.Identical() || same.Total.Matching == 0 || len(same.Samples) != 0 {
		t.Fatalf("v2 against the deployed v2: %+v, %d samples, %v; want identical", same.Total, len(same.Samples), err)
	}

	// wasmstream rollback -c pipeline.yaml greeter
	rb, err := host.Rollback(ctx, cfg, "greeter", log)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Active.ID != v1ID || rb.Previous.ID != v2ID {
		t.Fatalf("Rollback = %+v; want back to %s from %s", rb, v1ID, v2ID)
	}
	converge(t, hosts, v1ID)
	f.greeted(t, b, out, v1ID)
	inputs := f.stop()

	// Every name greeted exactly once, in the format of the version in its
	// header; per input partition the versions go v1, v2, v1: each task
	// switched once each way.
	byKey := map[string]*kgo.Record{}
	waitFor(t, fmt.Sprintf("all %d greetings committed", len(inputs)), func() bool {
		recs := b.ReadCommitted(t, out, 30*time.Second)
		clear(byKey)
		for _, r := range recs {
			if prev := byKey[string(r.Key)]; prev != nil {
				t.Fatalf("name %s greeted twice: %q (%s) and %q (%s)", r.Key, prev.Value, version(prev), r.Value, version(r))
			}
			byKey[string(r.Key)] = r
		}
		return len(recs) >= len(inputs)
	})
	seqs := map[int32][]string{} // input partition -> versions by input offset
	for _, in := range inputs {
		r := byKey[string(in.Key)]
		if r == nil {
			t.Fatalf("input %s (partition %d offset %d) has no greeting", in.Key, in.Partition, in.Offset)
		}
		want := "hello, " + string(in.Value)
		if version(r) == v2ID {
			want = "Hello, " + string(unicode.ToUpper(rune(in.Value[0]))) + string(in.Value[1:]) + "!"
		} else if version(r) != v1ID {
			t.Fatalf("greeting %q has version %q, want %s or %s", r.Value, version(r), v1ID, v2ID)
		}
		if string(r.Value) != want {
			t.Fatalf("%s greeted %q, want %q", version(r), r.Value, want)
		}
		s := seqs[in.Partition]
		if len(s) == 0 || s[len(s)-1] != version(r) {
			seqs[in.Partition] = append(s, version(r))
		}
	}
	for p := int32(0); p < 4; p++ {
		if !slices.Equal(seqs[p], []string{v1ID, v2ID, v1ID}) {
			t.Errorf("input partition %d: versions in input order %v, want %s, %s, %s", p, seqs[p], v1ID, v2ID, v1ID)
		}
	}
	t.Logf("%d names greeted once each; every partition went %s -> %s -> %s", len(inputs), v1ID, v2ID, v1ID)
}

// exampleApp writes the README's build next to pipeline.yaml in dir
// (v1.wasm, the config's plugin) and returns what loads the example's
// config, pointed at the test broker by the environment; on a shared real
// broker, the app and its topics get names of this run's own.
func exampleApp(t *testing.T, b *testbroker.Broker, dir string) (load func() *host.Config, in, out string) {
	copyFile(t, wasmbuild.Build(t, "./examples/hot-swap/v1"), filepath.Join(dir, "v1.wasm"))
	copyFile(t, "pipeline.yaml", filepath.Join(dir, "pipeline.yaml"))
	appID, in, out := b.Name(t, "hot-swap"), b.Name(t, "names"), b.Name(t, "greetings")
	cacheDir := filepath.Join(dir, "cache")
	return func() *host.Config {
		cfg, err := configload.Load(filepath.Join(dir, "pipeline.yaml"), []string{"WASMSTREAM_KAFKA__BROKERS=" + strings.Join(b.Addrs(), ",")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AppID = appID
		cfg.Processors[0].Inputs = []string{in}
		cfg.Processors[0].Outputs = map[string]host.OutputConfig{"greetings": {Topic: out}}
		cfg.Runtime.CacheDir = cacheDir
		return cfg
	}, in, out
}

// readWasm builds the plugin of pkg and returns its bytes.
func readWasm(t *testing.T, pkg string) []byte {
	b, err := os.ReadFile(wasmbuild.Build(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// twoProcesses starts two processes of the app, names flowing in, and
// waits until both own tasks.
func twoProcesses(t *testing.T, b *testbroker.Broker, load func() *host.Config, in string, log *slog.Logger) ([]*host.Host, *feeder) {
	hosts := []*host.Host{start(t, load(), log), start(t, load(), log)}
	f := feed(t, b.Addrs(), in)
	waitFor(t, "the two processes to share the 4 partitions", func() bool {
		n := 0
		for _, h := range hosts {
			tasks := len(h.Versions()[0].Tasks)
			if tasks == 0 {
				return false
			}
			n += tasks
		}
		return n == 4
	})
	return hosts, f
}

// replayV2 replays v2 over the names so far and checks it greets every
// one of them its way, from a partition's first offset on.
func replayV2(t *testing.T, ctx context.Context, cfg *host.Config, v2 []byte, log *slog.Logger) {
	t.Helper()
	var buf bytes.Buffer
	res, err := host.Replay(ctx, cfg, host.ReplayOptions{Processor: "greeter", Plugin: v2, To: -1}, &buf, log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if res.Tasks != 4 || res.Records == 0 || res.Emitted != res.Records || res.Failed != 0 || len(lines) != res.Records {
		t.Fatalf("replay of v2: %+v, %d lines; want a greeting per name over 4 tasks", res, len(lines))
	}
	for _, l := range lines {
		var line struct {
			In    struct{ Offset int64 } `json:"in"`
			Key   []byte                 `json:"key"`
			Value []byte                 `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		if want := v2Greeting(t, line.Key); string(line.Value) != want {
			t.Fatalf("replayed v2 greeted %q, want %q", line.Value, want)
		}
	}
}

// checkDiff checks a diff of v2 against v1 over the names so far: every
// greeting differs, and the samples show both.
func checkDiff(t *testing.T, d host.ReplayDiffResult) {
	t.Helper()
	if d.Identical() || d.Total.Records == 0 || d.Total.Differing != d.Total.Records || len(d.Tasks) != 4 || len(d.Samples) != min(20, d.Total.Records) {
		t.Fatalf("diff of v2 against v1: %+v over %d tasks, %d samples; want every record differing, 20 samples", d.Total, len(d.Tasks), len(d.Samples))
	}
	for _, s := range d.Samples {
		v, a := s.Version.Emits, s.Against.Emits
		if len(v) != 1 || len(a) != 1 || s.In.Offset < 0 {
			t.Fatalf("sample %+v", s)
		}
		if name := names[keyNumber(t, v[0].Key)%len(names)]; string(v[0].Value) != v2Greeting(t, v[0].Key) || string(a[0].Value) != "hello, "+name {
			t.Fatalf("sample of %s: %q vs %q", name, v[0].Value, a[0].Value)
		}
	}
}

// v2Greeting is v2's greeting of the name the feeder wrote under key.
func v2Greeting(t *testing.T, key []byte) string {
	name := names[keyNumber(t, key)%len(names)]
	return "Hello, " + string(unicode.ToUpper(rune(name[0]))) + name[1:] + "!"
}

func keyNumber(t *testing.T, key []byte) int {
	n, err := strconv.Atoi(string(key))
	if err != nil {
		t.Fatalf("key %q is not the feeder's", key)
	}
	return n
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs a host until the test ends.
func start(t *testing.T, cfg *host.Config, log *slog.Logger) *host.Host {
	h, err := host.New(context.Background(), cfg, host.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() }) // runs after Run's stop: cleanups run in reverse order
	exampletest.Run(t, h)
	return h
}

// converge waits until every host runs version id on all its tasks.
func converge(t *testing.T, hosts []*host.Host, id string) {
	t.Helper()
	waitFor(t, "both processes to run "+id+" on every task", func() bool {
		for _, h := range hosts {
			v := h.Versions()[0]
			if v.Active.ID != id || len(v.Tasks) == 0 {
				return false
			}
			for _, tv := range v.Tasks {
				if tv != id {
					return false
				}
			}
		}
		return true
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

func version(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == "wasmstream-version" {
			return string(h.Value)
		}
	}
	return ""
}

// feeder writes names to the input, as the README's produce loop does,
// a few every 10 ms, and remembers where each landed.
type feeder struct {
	mu      sync.Mutex
	written []*kgo.Record
	err     error
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func feed(t *testing.T, brokers []string, topic string) *feeder {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer cl.Close()
		for n := 0; ; {
			select {
			case <-f.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			batch := make([]*kgo.Record, 4)
			for i := range batch {
				batch[i] = &kgo.Record{Key: []byte(strconv.Itoa(n)), Value: []byte(names[n%len(names)])}
				n++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, batch...).FirstErr()
			cancel()
			f.mu.Lock()
			f.written = append(f.written, batch...)
			f.err = err
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

// greeted waits until names of every input partition were greeted by
// version id since the call (so each task has run it on records).
func (f *feeder) greeted(t *testing.T, b *testbroker.Broker, topic, id string) {
	t.Helper()
	f.mu.Lock()
	from := len(f.written)
	f.mu.Unlock()
	waitFor(t, "greetings of "+id+" from every input partition", func() bool {
		byVersion := map[string]bool{}
		for _, r := range b.ReadCommitted(t, topic, 30*time.Second) {
			if version(r) == id {
				byVersion[string(r.Key)] = true
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.err != nil {
			t.Fatalf("producing: %v", f.err)
		}
		parts := map[int32]bool{}
		for _, in := range f.written[from:] {
			if byVersion[string(in.Key)] {
				parts[in.Partition] = true
			}
		}
		return len(parts) == 4
	})
}

// stop stops writing and returns what was written (partition and offset
// set).
func (f *feeder) stop() []*kgo.Record {
	f.once.Do(func() { close(f.quit) })
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}
