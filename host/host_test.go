package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
	"github.com/wasmstream/wasmstream/internal/wasmgen"
)

// engineTestdata is a hand-written WAT plugin of the engine's test suite.
func engineTestdata(name string) string {
	return filepath.Join("internal", "engine", "testdata", name+".wasm")
}

type pipeline struct {
	b       *testbroker.Broker
	cfg     *Config
	in, out string
	opts    []Option // for every New in run, after the test logger
}

// newPipeline makes a one-processor config on the test broker with fresh
// topics (3 partitions).
func newPipeline(t testing.TB, plugin string, onError ErrorPolicy) *pipeline {
	return newPipelineOn(t, testbroker.New(t), plugin, onError)
}

// newPipelineOn is newPipeline on broker b.
func newPipelineOn(t testing.TB, b *testbroker.Broker, plugin string, onError ErrorPolicy) *pipeline {
	p := &pipeline{b: b, in: b.Name(t, "in"), out: b.Name(t, "out")}
	b.CreateTopic(t, p.in, 3, nil)
	b.CreateTopic(t, p.out, 3, nil)
	p.cfg = &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 50 * time.Millisecond, SessionTimeout: 10 * time.Second},
		Processors: []ProcessorConfig{{
			Name: "proc", Plugin: plugin, Inputs: []string{p.in},
			Outputs: map[string]OutputConfig{"out": {Topic: p.out}}, OnError: onError,
			// Short enough for the looping plugin's timeouts to be quick,
			// long enough that a loaded machine (GC pauses, 2 busy cores)
			// does not time out an ordinary record.
			Limits: Limits{RecordTimeout: time.Second},
		}},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	p.cfg.ApplyDefaults()
	if err := p.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

func testLogger(t testing.TB) *slog.Logger { return testbroker.Logger(t, slog.LevelWarn) }

// run starts the host; the returned func stops it and returns Run's error.
func (p *pipeline) run(t testing.TB) (*Host, func() error) {
	h, err := New(context.Background(), p.cfg, append([]Option{WithLogger(testLogger(t))}, p.opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h, runHost(t, h)
}

// runHost runs h until the returned stop, which waits for Run (at most
// 60 s) and closes h.
func runHost(t testing.TB, h *Host) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(60 * time.Second):
				runErr = errors.New("host did not stop within 60s")
			}
			h.Close()
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (p *pipeline) produce(t *testing.T, keys ...string) {
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: p.in, Key: []byte(k), Value: []byte("v-" + k)}
	}
	p.b.Produce(t, recs...)
}

// waitProcessed waits until the group committed the input's end offsets.
func (p *pipeline) waitProcessed(t *testing.T) {
	t.Helper()
	adm := p.b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, p.in)
	if err != nil {
		t.Fatal(err)
	}
	for {
		committed, err := adm.FetchOffsets(ctx, p.cfg.AppID)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) && !kerr.IsRetriable(err) {
			t.Fatalf("fetch offsets: %v", err)
		}
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			c, _ := committed.Lookup(p.in, e.Partition)
			if e.Offset > 0 && c.At != e.Offset {
				done = false
			}
		})
		if done {
			if p.out != "" && p.cfg.Guarantee != AtLeastOnce {
				// The group's offsets can show before the last
				// transaction's markers reach every output partition.
				p.b.WaitNoOpenTransaction(t, p.out, 60*time.Second)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("input not fully committed: ends %v, committed %v", ends, committed)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func keysOf(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Key))
	}
	sort.Strings(out)
	return out
}

// A Go-SDK plugin (plugins/filter) end to end: JSON in, the matching
// records out, offsets committed.
func TestFilterPluginEndToEnd(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/filter"), OnErrorFail)
	p.cfg.Processors[0].Config = map[string]any{"field": "country", "op": "eq", "value": "NL"}
	_, stop := p.run(t)
	var recs []*kgo.Record
	for i, c := range []string{"NL", "DE", "NL", "FR", "NL"} {
		recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte{byte('a' + i)}, Value: []byte(`{"country":"` + c + `"}`)})
	}
	p.b.Produce(t, recs...)
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(p.b.ReadCommitted(t, p.out, 30*time.Second)); strings.Join(got, ",") != "a,c,e" {
		t.Fatalf("outputs %v, want a,c,e", got)
	}
}

// Each kind of plugin fault fails only its record, goes through the
// dead-letter policy with its kind named, and the host keeps processing
// the following records on a fresh instance (I7).
func TestPluginFaultsGoThroughPolicy(t *testing.T) {
	cases := []struct {
		plugin, badKey, kind string
		good                 []string // keys the plugin processes without fault
	}{
		{"trap", "boom", "trap", []string{"ok1", "ok2"}},
		{"loop", "spin", "timeout", []string{"ok1", "ok2"}},
		{"membomb", "boom", "memory_limit", []string{"soft"}}, // membomb grows on every record; "soft" handles the refusal
		{"badptr", "emit", "abi_misuse", nil},
	}
	for _, c := range cases {
		t.Run(c.plugin, func(t *testing.T) {
			p := newPipeline(t, engineTestdata(c.plugin), OnErrorDeadLetter)
			p.cfg.Processors[0].Limits.Memory = 4 << 20
			h, stop := p.run(t)
			p.produce(t, append([]string{c.badKey}, c.good...)...)
			p.waitProcessed(t)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			dlq := p.b.ReadCommitted(t, p.cfg.DeadLetterTopic(&p.cfg.Processors[0]), 30*time.Second)
			if len(dlq) != 1 || string(dlq[0].Key) != c.badKey {
				t.Fatalf("dead letters %v, want just %q", keysOf(dlq), c.badKey)
			}
			kind := ""
			for _, hd := range dlq[0].Headers {
				if hd.Key == runner.HeaderErrorKind {
					kind = string(hd.Value)
				}
			}
			if kind != c.kind {
				t.Fatalf("dead letter kind %q, want %q", kind, c.kind)
			}
			if c.plugin != "membomb" { // membomb's "soft" emits nothing
				if got := keysOf(p.b.ReadCommitted(t, p.out, 30*time.Second)); strings.Join(got, ",") != strings.Join(c.good, ",") {
					t.Fatalf("outputs %v, want %v", got, c.good)
				}
			}
			if st, ok := h.Stats("proc"); !ok || st.DeadLettered != 1 {
				t.Fatalf("dead-lettered %d (processor known: %v)", st.DeadLettered, ok)
			}
		})
	}
}

func TestUnreachableBrokerIsAnError(t *testing.T) {
	cfg := &Config{
		AppID: "x", Kafka: KafkaConfig{Brokers: []string{"127.0.0.1:1"}},
		Processors: []ProcessorConfig{{Name: "p", Plugin: engineTestdata("passthrough"), Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}}},
		Runtime:    RuntimeConfig{CacheDir: testCache()},
	}
	cfg.ApplyDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := New(ctx, cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "cannot reach Kafka at 127.0.0.1:1") {
		t.Fatalf("New = %v, want an error naming the unreachable broker", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestMissingTopicIsAnError(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	p.cfg.Processors[0].Inputs = []string{p.b.Name(t, "nosuch")}
	_, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), p.cfg.Processors[0].Inputs[0]) {
		t.Fatalf("New = %v, want an error naming the missing input topic", err)
	}
}

func TestBadPluginsAreRefusedAtStart(t *testing.T) {
	for name, want := range map[string]string{
		"corrupt":         "plugin",
		"noabi":           "wasmstream_abi_version",
		"abi3":            "version",
		"missingprocess":  "wasmstream_process",
		"forbiddenimport": "env",
		"initfail":        "init",
		"inittrap":        "init",
		// The first mistakes get the fix in the message.
		"command":        "-buildmode=c-shared",
		"undeclaredinit": `fix: add output "alerts" to processors[0].outputs (alerts: <topic>); add store "cards" to processors[0].stores`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := &Config{
				AppID:      "x",
				Processors: []ProcessorConfig{{Name: "p", Plugin: engineTestdata(name), Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}}},
				Runtime:    RuntimeConfig{CacheDir: testCache()},
			}
			cfg.ApplyDefaults()
			err := Validate(context.Background(), cfg, testLogger(t))
			if err == nil || !strings.Contains(err.Error(), "processors[0] (p)") || !strings.Contains(err.Error(), want) {
				t.Fatalf("Validate = %v, want it to name the processor and %q", err, want)
			}
			t.Logf("%s: %v", name, err)
		})
	}
}

// runtime.module_limits' compile budget reaches every compile: a plugin
// whose estimate is over a lowered budget is refused, naming the setting;
// the same plugin passes the defaults.
func TestCompileBudgetFromConfig(t *testing.T) {
	// 20,000 globals: 2.5 MiB per instance; 25 MiB and 200 ms to compile.
	plugin := filepath.Join(t.TempDir(), "globals.wasm")
	if err := os.WriteFile(plugin, wasmgen.Module(wasmgen.Shape{Globals: 20000, Plugin: true}), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limits ModuleLimits
		want   string
	}{
		{ModuleLimits{CompileMemory: 8 << 20}, "over the compile budget of 8 MiB (runtime.module_limits.compile_memory)"},
		{ModuleLimits{CompileTime: time.Millisecond}, "over the compile budget of 1ms (runtime.module_limits.compile_time)"},
		{ModuleLimits{InstanceMemory: 1 << 20}, "over the budget of 1 MiB per instance (runtime.module_limits.instance_memory)"},
		{ModuleLimits{}, ""},
	} {
		cfg := &Config{
			AppID:      "x",
			Processors: []ProcessorConfig{{Name: "p", Plugin: plugin, Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}}},
			Runtime:    RuntimeConfig{CacheDir: testCache(), ModuleLimits: c.limits},
		}
		cfg.ApplyDefaults()
		err := Validate(context.Background(), cfg, testLogger(t))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: Validate = %v, want %q", c.limits, err, c.want)
		}
	}
}

// Validate compiles through runtime.cache_dir, so the run that follows a
// validate finds its plugins compiled.
func TestValidateWarmsTheCompileCache(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{
		AppID:      "x",
		Processors: []ProcessorConfig{{Name: "p", Plugin: engineTestdata("passthrough"), Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}}},
		Runtime:    RuntimeConfig{CacheDir: dir},
	}
	if err := Validate(context.Background(), cfg, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	var files int
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	})
	if err != nil || files == 0 {
		t.Fatalf("cache dir %s holds %d files after validate (%v); want the compiled plugin", dir, files, err)
	}
}

// latest returns the last value per key of a topic's records.
func latest(recs []*kgo.Record) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		out[string(r.Key)] = string(r.Value)
	}
	return out
}

// State survives restarts and moves between machines through its
// changelog: a host with an empty state directory restores the counts, a
// host with an old local store catches up from its checkpoint: it reads
// only what the changelog gained since, never wiping or reading it again
// from the start.
func TestWordcountStateSurvivesRestartAndMove(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/wordcount"), OnErrorFail)
	p.cfg.Processors[0].Stores = []string{p.b.Name(t, "counts")}
	p.cfg.Processors[0].Outputs = map[string]OutputConfig{"counts": {Topic: p.out}}
	// wordcount names its store "counts"; the config's store name must match.
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.AppID = p.b.Name(t, "wc")
	dirA, dirB := t.TempDir(), t.TempDir()
	line := func(text string) {
		p.b.Produce(t, &kgo.Record{Topic: p.in, Key: []byte("k"), Value: []byte(text)})
	}
	// The finished restores of the running host, one per changelog partition.
	var mu sync.Mutex
	var restores []RestoreProgress
	p.opts = []Option{WithRestoreProgress(func(pr RestoreProgress) {
		if pr.Done {
			mu.Lock()
			restores = append(restores, pr)
			mu.Unlock()
		}
	})}
	restored := func() (n int64, done []RestoreProgress) {
		mu.Lock()
		defer mu.Unlock()
		for _, pr := range restores {
			n += pr.Restored
		}
		done, restores = restores, nil
		return n, done
	}
	runWith := func(dir string, lines ...string) map[string]string {
		p.cfg.State.Dir = dir
		_, stop := p.run(t)
		for _, l := range lines {
			line(l)
		}
		p.waitProcessed(t)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return latest(p.b.ReadCommitted(t, p.out, 30*time.Second))
	}
	got := runWith(dirA, "a b a", "b c")
	if got["a"] != "2" || got["b"] != "2" || got["c"] != "1" {
		t.Fatalf("first run counts %v", got)
	}
	// The first run's restores found empty changelogs.
	restored()
	got = runWith(dirB, "a") // an empty state dir: restored from the changelog
	if got["a"] != "3" {
		t.Fatalf("after moving to an empty state dir, a = %s, want 3", got["a"])
	}
	full, fullDone := restored()
	got = runWith(dirA, "b") // the old dir: its checkpoint is behind the changelog
	if got["b"] != "3" {
		t.Fatalf("back on the first state dir, b = %s, want 3", got["b"])
	}
	// The old dir caught up from its checkpoint: it read only the second
	// run's changes (the count of a), fewer than the full restore of the
	// first run's, and read every partition that held the first run's
	// changes from past the log start, wiping nothing.
	caughtUp, done := restored()
	if caughtUp == 0 || caughtUp >= full {
		t.Fatalf("back on the first state dir, the restore read %d changelog records; the full restore read %d: want at least 1 and fewer (restores %+v)", caughtUp, full, done)
	}
	for _, f := range fullDone {
		if f.Restored == 0 {
			continue
		}
		for _, d := range done {
			if d.Topic == f.Topic && d.Partition == f.Partition && (d.Start == 0 || d.Wipes != 0) {
				t.Fatalf("back on the first state dir, %s/%d was restored from offset %d with %d wipes; want from its checkpoint, past the first run's changes", d.Topic, d.Partition, d.Start, d.Wipes)
			}
		}
	}
}

func TestChangelogWithWrongShapeIsRefused(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./plugins/wordcount"), OnErrorFail)
	p.cfg.Processors[0].Outputs = map[string]OutputConfig{"counts": {Topic: p.out}}
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	p.b.CreateTopic(t, p.cfg.ChangelogTopic("counts"), 1, map[string]string{"cleanup.policy": "compact"})
	_, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "has 1 partitions but input") {
		t.Fatalf("New = %v, want a refusal naming the partition mismatch", err)
	}
	p.cfg.AppID = p.b.Name(t, "app2")
	p.b.CreateTopic(t, p.cfg.ChangelogTopic("counts"), 3, map[string]string{"cleanup.policy": "delete"})
	_, err = New(context.Background(), p.cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "cleanup.policy=delete") {
		t.Fatalf("New = %v, want a refusal naming the cleanup policy", err)
	}
}

// The Faust failure (docs/design.md#seed-faust)
// end to end: input consumers start at "latest"; a task restores a large
// changelog on a new machine, and while it does the changelog's log start
// is moved past the restore position. The restore must finish — wiping the
// partial store and rebuilding from the new log start, counted — and
// processing must resume.
func TestRestoreFinishesWhenLogStartMovesDuringRestore(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorFail)
	p.in, p.out = p.b.Name(t, "in1"), p.b.Name(t, "out1")
	p.b.CreateTopic(t, p.in, 1, nil)
	p.b.CreateTopic(t, p.out, 1, nil)
	pc := &p.cfg.Processors[0]
	pc.Inputs, pc.Outputs, pc.Stores = []string{p.in}, map[string]OutputConfig{"out": {Topic: p.out}}, []string{"counts"}
	// Many small commits make many small changelog batches: a broker
	// returns whole batches, so with one big batch the restore would have
	// the whole changelog in memory before the log start could move.
	p.cfg.Kafka.CommitRecords = 500
	p.cfg.Kafka.CommitInterval = time.Second

	const keys = 50000
	changelog := buildCounterChangelog(t, p, keys)
	end := p.endOffset(t, changelog)
	if end < keys {
		t.Fatalf("changelog has %d records, want at least %d", end, keys)
	}

	// A new machine (empty state dir) with input reset "latest": during
	// its restore, after the first batch, the log start moves to end-100.
	p.cfg.State.Dir = t.TempDir()
	p.cfg.Kafka.StartOffset = "latest"
	var moved sync.Once
	var wipes atomic.Int64
	deleteErr := make(chan error, 1)
	// Small fetches and batches, so most of the changelog is still on the
	// broker when the log start moves.
	small := func(o *options) {
		o.restore.FetchMaxPartitionBytes = 2 << 10
		o.restore.BatchRecords = 200
	}
	h, err := New(context.Background(), p.cfg, WithLogger(testLogger(t)), small, WithRestoreProgress(func(pr RestoreProgress) {
		if pr.Restored > 0 && !pr.Done {
			moved.Do(func() {
				// Not p.b.DeleteRecords: this runs on the restore's goroutine,
				// where a test failure must not be a Goexit.
				o := kadm.Offsets{}
				o.AddOffset(changelog, 0, end-100, -1)
				resp, err := p.b.Admin(t).DeleteRecords(context.Background(), o)
				if err == nil {
					err = resp.Error()
				}
				deleteErr <- err
			})
		}
		if pr.Wipes > 0 {
			wipes.Store(int64(pr.Wipes)) // the pass that wiped; a later pass reports 0
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		h.Close()
	}()
	testutil.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-deleteErr:
			if err != nil {
				t.Fatalf("moving the changelog's log start: %v", err)
			}
		default:
		}
		if !h.Ready() || wipes.Load() == 0 {
			return fmt.Errorf("restore did not finish with a wipe (ready=%v wipes=%d)", h.Ready(), wipes.Load())
		}
		return nil
	})
	// Processing resumes on the rebuilt store: a key whose changelog record
	// survived the move continues its count; a key whose record was
	// deleted starts again at 1.
	surviving := p.b.ReadCommitted(t, changelog, 30*time.Second)
	if len(surviving) == 0 || len(surviving) > 100 {
		t.Fatalf("%d changelog records after the move, want 1..100", len(surviving))
	}
	kept := map[string]bool{}
	for _, r := range surviving {
		kept[string(r.Key)] = true
	}
	keptKey := string(surviving[0].Key)
	deletedKey := ""
	for i := 0; deletedKey == ""; i++ {
		if k := fmt.Sprintf("key-%05d", i); !kept[k] {
			deletedKey = k
		}
	}
	p.b.Produce(t, &kgo.Record{Topic: p.in, Key: []byte(keptKey), Value: []byte("after-1")},
		&kgo.Record{Topic: p.in, Key: []byte(deletedKey), Value: []byte("after-2")})
	testutil.Eventually(t, 60*time.Second, func() error {
		got := latest(p.b.ReadCommitted(t, p.out, 30*time.Second))
		if got["after-1"] == "" || got["after-2"] == "" {
			return errors.New("processing did not resume after the restore")
		}
		if got["after-1"] != keptKey+":2" || got["after-2"] != deletedKey+":1" {
			t.Fatalf("after the restore: %q and %q, want %s:2 and %s:1", got["after-1"], got["after-2"], keptKey, deletedKey)
		}
		return nil
	})
	t.Logf("restore wiped %d time(s) and finished", wipes.Load())
}

func (p *pipeline) endOffset(t *testing.T, topic string) int64 {
	ends, err := p.b.Admin(t).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The admin endpoint reports health, readiness, metrics and processors of
// a running host; a task stopped by on_error: fail makes it unhealthy; a
// taken admin address is refused before anything else starts.
func TestAdminEndpoint(t *testing.T) {
	p := newPipeline(t, engineTestdata("trap"), OnErrorFail)
	p.cfg.Admin.Listen = "127.0.0.1:0"
	h, stop := p.run(t)
	base := "http://" + h.AdminAddr()
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz %d %s", code, body)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("never ready: readyz %d %q", code, body)
		}
		return nil
	})
	p.produce(t, "ok1", "boom", "ok2")
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := httpGet(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "proc") {
			return fmt.Errorf("healthz after a failed task: %d %q", code, body)
		}
		return nil
	})
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{`wasmstream_record_failures_total{processor="proc",kind="trap"} 1`, `wasmstream_tasks_failed_total{processor="proc"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if _, procs := httpGet(t, base+"/v1/processors"); !strings.Contains(procs, `"name": "proc"`) || !strings.Contains(procs, `"sha256"`) {
		t.Errorf("/v1/processors: %s", procs)
	}
	second := *p.cfg
	second.Admin.Listen = h.AdminAddr()
	if _, err := New(context.Background(), &second, WithLogger(testLogger(t))); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("a second host on the same admin address: %v", err)
	}
	_ = stop()
}

// buildCounterChangelog runs the counter pipeline p (store "counts") over
// keys input records with distinct keys, so its changelog holds a record
// per key, and returns the changelog with cleanup.policy compact,delete:
// real Kafka refuses DeleteRecords on a compact-only topic, and a changelog
// that also has time retention (which the host accepts) is where the log
// start moves under a restore.
func buildCounterChangelog(t *testing.T, p *pipeline, keys int) string {
	t.Helper()
	dir := p.cfg.State.Dir
	p.cfg.State.Dir = t.TempDir()
	defer func() { p.cfg.State.Dir = dir }()
	_, stop := p.run(t)
	recs := make([]*kgo.Record, 0, keys)
	for i := 0; i < keys; i++ {
		recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte(fmt.Sprintf("key-%05d", i)), Value: []byte(fmt.Sprintf("id-%d", i))})
	}
	p.b.Produce(t, recs...)
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	changelog := p.cfg.ChangelogTopic("counts")
	val := "compact,delete"
	if _, err := p.b.Admin(t).AlterTopicConfigs(context.Background(),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &val}}, changelog); err != nil {
		t.Fatal(err)
	}
	return changelog
}

// New works on its own copy of the config with defaults applied, as the
// CLI's loader does: a Config built in Go without ApplyDefaults runs
// with the documented defaults (commit_records among them), and the
// caller's Config is left as it was. An invalid one is refused before
// anything starts, naming the field.
func TestNewAppliesDefaultsAndValidates(t *testing.T) {
	b := testbroker.New(t)
	in, out := b.Name(t, "in"), b.Name(t, "out")
	b.CreateTopic(t, in, 1, nil)
	b.CreateTopic(t, out, 1, nil)
	cfg := &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs()},
		Processors: []ProcessorConfig{{Name: "proc", Plugin: engineTestdata("passthrough"),
			Inputs: []string{in}, Outputs: map[string]OutputConfig{"out": {Topic: out}}}},
		Runtime: RuntimeConfig{CacheDir: testCache()},
		State:   StateConfig{Dir: t.TempDir()},
	}
	h, err := New(context.Background(), cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("New with a Go-built config: %v", err)
	}
	defer h.Close()
	if h.cfg.Kafka.CommitRecords != DefaultCommitRecords || h.cfg.Kafka.CommitInterval != DefaultCommitInterval ||
		h.cfg.Processors[0].OnError != OnErrorFail || h.cfg.Swap.CanaryWindow != Set(DefaultCanaryWindow) {
		t.Errorf("the host runs without the defaults: %+v", h.cfg)
	}
	if cfg.Kafka.CommitRecords != 0 || cfg.Processors[0].OnError != "" {
		t.Errorf("New changed the caller's config: %+v", cfg)
	}

	bad := cfg.Clone()
	bad.Processors[0].OnError = "retry"
	_, err = New(context.Background(), bad, WithLogger(testLogger(t)))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Path != "processors[0].on_error" {
		t.Fatalf("New with on_error: retry: %v, want a ConfigError for processors[0].on_error", err)
	}
}

// A process started while its brokers are down waits for them (retrying
// with backoff up to kafka.connect_timeout) and starts when they come up,
// instead of exiting at once (once: 72 exits in a 14 s outage under a
// supervisor). The broker here is kfake on both test brokers: the test
// needs one that is absent first and then appears on a known port.
func TestStartupWaitsForBrokers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := &Config{
		AppID: "wait", Kafka: KafkaConfig{Brokers: []string{addr}, CreateTopics: true, ConnectTimeout: time.Minute},
		Processors: []ProcessorConfig{{Name: "p", Plugin: engineTestdata("passthrough"), Inputs: []string{"in"}, Outputs: map[string]OutputConfig{"out": {Topic: "out"}}}},
		Runtime:    RuntimeConfig{CacheDir: testCache()},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type result struct {
		h   *Host
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := New(ctx, cfg, WithLogger(testLogger(t)))
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("New returned before any broker existed: %v", r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	c, err := kfake.NewCluster(kfake.Ports(port), kfake.SeedTopics(3, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("New after the broker came up: %v", r.err)
	}
	r.h.Close()

	// Gave up: the error names the brokers and the setting.
	cfg.Kafka.ConnectTimeout = 300 * time.Millisecond
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"}
	_, err = New(ctx, cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "cannot reach Kafka at 127.0.0.1:1") || !strings.Contains(err.Error(), "kafka.connect_timeout") {
		t.Fatalf("New against no broker = %v, want it to give up naming the broker and kafka.connect_timeout", err)
	}
}

// An emit the output topic would refuse (over its max.message.bytes, or
// without a key for a compacted topic) fails that record through on_error
// instead of failing the produce: once a poison pill, where one such
// emit aborted five transactions and made the runner exit whatever
// on_error said. The host learns each output's limits at startup.
func TestEmitTheOutputWouldRefuseFailsOnlyItsRecord(t *testing.T) {
	for _, c := range []struct {
		name    string
		configs map[string]string
		key     string // the key of the bad record ("" for none)
		value   string
	}{
		{"over max.message.bytes", map[string]string{"max.message.bytes": "2048"}, "big", strings.Repeat("x", 4000)},
		{"no key on a compacted topic", map[string]string{"cleanup.policy": "compact"}, "", "keyless"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPipeline(t, engineTestdata("passthrough"), OnErrorDeadLetter)
			out := p.b.Name(t, "limited")
			p.b.CreateTopic(t, out, 3, c.configs)
			p.out = out
			p.cfg.Processors[0].Outputs = map[string]OutputConfig{"out": {Topic: out}}
			h, stop := p.run(t)
			bad := &kgo.Record{Topic: p.in, Value: []byte(c.value)}
			if c.key != "" {
				bad.Key = []byte(c.key)
			}
			p.b.Produce(t, &kgo.Record{Topic: p.in, Key: []byte("ok1"), Value: []byte("small")}, bad,
				&kgo.Record{Topic: p.in, Key: []byte("ok2"), Value: []byte("small")})
			p.waitProcessed(t)
			if err := stop(); err != nil {
				t.Fatalf("Run: %v (nothing a plugin emits may stop the host)", err)
			}
			if got := keysOf(p.b.ReadCommitted(t, out, 30*time.Second)); strings.Join(got, ",") != "ok1,ok2" {
				t.Fatalf("outputs %v, want ok1,ok2", got)
			}
			dlq := p.b.ReadCommitted(t, p.cfg.DeadLetterTopic(&p.cfg.Processors[0]), 30*time.Second)
			if len(dlq) != 1 || string(dlq[0].Value) != c.value {
				t.Fatalf("%d dead letters, want the bad record", len(dlq))
			}
			if st, _ := h.Stats("proc"); st.Aborts != 0 {
				t.Fatalf("%d transactions aborted", st.Aborts)
			}
		})
	}
}

// A runner whose producer is fenced (here: another producer takes its
// transactional id, as the broker does to a process paused past the
// transaction timeout) is replaced by a new one that rejoins the group and
// carries on, instead of the process exiting (before: a SIGSTOPped
// process exited 1 on resume with PRODUCER_FENCED). Every input is
// processed exactly once in committed output, before and after.
func TestFencedRunnerRejoins(t *testing.T) {
	p := newPipeline(t, engineTestdata("passthrough"), OnErrorFail)
	h, stop := p.run(t)
	p.produce(t, "a1", "a2", "a3")
	p.waitProcessed(t)

	// The fencing producer: same transactional id, a newer epoch.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fencer, err := kgo.NewClient(kgo.SeedBrokers(p.b.Addrs()...), kgo.TransactionalID(h.members[0].opts.TransactionalID))
	if err != nil {
		t.Fatal(err)
	}
	defer fencer.Close()
	if err := fencer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fencer.ProduceSync(ctx, &kgo.Record{Topic: p.b.Name(t, "fence"), Value: []byte("x")}).FirstErr(); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Logf("fencing produce: %v", err)
	}
	if err := fencer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Logf("fencing end: %v", err)
	}

	// The old producer's next transaction fails; the host replaces the
	// runner and goes on.
	for i := 0; h.restarts.Load() == 0; i++ {
		p.produce(t, "b"+strconv.Itoa(i))
		select {
		case <-ctx.Done():
			t.Fatal("the fenced runner was never replaced")
		case <-time.After(200 * time.Millisecond):
		}
	}
	p.produce(t, "c1", "c2")
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := p.b.ReadCommitted(t, p.out, 30*time.Second)
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Key)]++
	}
	in := p.b.ReadCommitted(t, p.in, 30*time.Second)
	for _, r := range in {
		if seen[string(r.Key)] != 1 {
			t.Errorf("input %s is in the committed output %d times, want once", r.Key, seen[string(r.Key)])
		}
	}
	if len(out) != len(in) {
		t.Errorf("%d outputs for %d inputs", len(out), len(in))
	}
}
