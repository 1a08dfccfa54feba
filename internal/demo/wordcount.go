package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
)

// rounds are the lines of part two, one round per host.
var rounds = [][]string{
	{"the quick brown fox", "jumps over the lazy dog", "the dog sleeps"},
	{"the fox wakes the dog"},
	{"the end"},
}

const (
	wcProcessor = "wordcount"
	wcStore     = "counts" // the plugin's store name
)

// runWordcount is part two: word counts in a state store, kept across a
// clean restart on the same state directory (the local store and its
// checkpoint) and a start on an empty one (a restore from the changelog).
// The three hosts run one after the other on the same broker.
func runWordcount(ctx context.Context, o Options, dir string, brokers []string, suffix string) error {
	plugin := filepath.Join(dir, "wordcount.wasm")
	if err := os.WriteFile(plugin, WordcountWasm, 0o644); err != nil {
		return err
	}
	in, outTopic := "lines"+suffix, "word-counts"+suffix
	cfgFor := func(stateDir string) (*host.Config, error) {
		cfg := &host.Config{
			AppID: "wasmstream-demo-wc" + suffix,
			// One partition: one task, wordcount/0, one checkpoint to show.
			Kafka: host.KafkaConfig{Brokers: brokers, CreateTopics: true, TopicPartitions: 1, CommitInterval: 50 * time.Millisecond},
			Processors: []host.ProcessorConfig{{
				Name:    wcProcessor,
				Plugin:  plugin,
				Inputs:  []string{in},
				Outputs: map[string]host.OutputConfig{"counts": {Topic: outTopic}},
				Stores:  []string{wcStore},
			}},
			State: host.StateConfig{Dir: stateDir},
			// Compiled once by the first host, loaded by the next two.
			Runtime: host.RuntimeConfig{CacheDir: filepath.Join(dir, "wasm-cache")},
		}
		cfg.ApplyDefaults()
		return cfg, cfg.Validate()
	}
	stateA, stateB := filepath.Join(dir, "state-a"), filepath.Join(dir, "state-b")
	cfg, err := cfgFor(stateA)
	if err != nil {
		return err
	}
	// The topics exist before the first host starts, as on a real cluster.
	// (A host that creates the input topic of a stateful processor itself
	// lists it again through a metadata cache that may not have it yet.)
	if err := createTopics(ctx, brokers, in, outTopic); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\n== part 2: state that survives a restart ==\n")
	fmt.Fprintf(o.Out, "processor %s: plugin wordcount.wasm (%d KiB), %s -> %s, a count per word in store %q (changelog %s)\n",
		wcProcessor, len(WordcountWasm)>>10, in, outTopic, wcStore, cfg.ChangelogTopic(wcStore))

	// host 1: a fresh state directory, an empty changelog.
	fmt.Fprintf(o.Out, "\nhost 1 on state dir A (empty)\n")
	w, err := startWordcount(ctx, cfg, o)
	if err != nil {
		return err
	}
	defer w.stop()
	if r := w.restored; r.Restored == 0 {
		fmt.Fprintf(o.Out, "  restore: nothing to read, the changelog is empty\n")
	} else {
		fmt.Fprintf(o.Out, "  restored %d records from the changelog\n", r.Restored)
	}
	counts, err := newCountReader(brokers, outTopic)
	if err != nil {
		return err
	}
	defer counts.close()
	if err := w.feed(ctx, o.Out, brokers, in, rounds[0], counts); err != nil {
		return err
	}
	printCounts(o.Out, nil, counts.latest)
	if err := w.stop(); err != nil {
		return err
	}
	cp, words, err := localStore(cfg.StateDir())
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "  stopped cleanly; state dir A holds %d words, checkpoint at changelog offset %d\n", words, cp)

	// host 2: the same state directory, a restart.
	fmt.Fprintf(o.Out, "\nhost 2 on state dir A again (a restart)\n")
	if w, err = startWordcount(ctx, cfg, o); err != nil {
		return err
	}
	defer w.stop()
	if r := w.restored; r.Restored == 0 {
		fmt.Fprintf(o.Out, "  restarted: counts continued from the local store (checkpoint at offset %d); nothing to read from the changelog\n", r.Start)
	} else {
		fmt.Fprintf(o.Out, "  restarted from the local store (checkpoint at offset %d), then caught up %d records from the changelog\n", r.Start, r.Restored)
	}
	before := clone(counts.latest)
	if err := w.feed(ctx, o.Out, brokers, in, rounds[1], counts); err != nil {
		return err
	}
	printCounts(o.Out, before, counts.latest)
	if err := w.stop(); err != nil {
		return err
	}
	if cp, _, err = localStore(cfg.StateDir()); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "  stopped cleanly; checkpoint at changelog offset %d\n", cp)

	// host 3: an empty state directory, as on a new machine.
	if cfg, err = cfgFor(stateB); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\nhost 3 on state dir B (empty: a new machine)\n")
	if w, err = startWordcount(ctx, cfg, o); err != nil {
		return err
	}
	defer w.stop()
	r := w.restored
	fmt.Fprintf(o.Out, "  restored %d records from the changelog (offsets %d to %d) in %s\n",
		r.Restored, r.Start, r.Position, r.Elapsed.Round(time.Millisecond))
	before = clone(counts.latest)
	if err := w.feed(ctx, o.Out, brokers, in, rounds[2], counts); err != nil {
		return err
	}
	printCounts(o.Out, before, counts.latest)
	if err := w.stop(); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "  stopped cleanly\n\nThe counts went on across a restart (local store) and a move (changelog restore).\n")
	if o.Keep == "" {
		fmt.Fprintf(o.Out, "To look inside the store afterwards: wasmstream demo --keep DIR, then wasmstream state dump -c DIR/pipeline.yaml --store %s\n", wcStore)
		return nil
	}
	yml := filepath.Join(dir, "pipeline.yaml")
	if err := writePipeline(yml, cfg); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Look inside host 3's store, offline: wasmstream state dump -c %s --store %s\n", yml, wcStore)
	return nil
}

// writePipeline writes cfg's word count pipeline as the YAML a user would
// write, for wasmstream state dump (which reads the state directory and
// needs no broker: the embedded one is gone by then).
func writePipeline(path string, cfg *host.Config) error {
	p := cfg.Processors[0]
	q := strconv.Quote
	yml := fmt.Sprintf(`# Written by wasmstream demo --keep: the word count of part two, as host 3 ran it.
app_id: %s
kafka:
  brokers: [%s]   # the demo's embedded broker, gone after the demo
state:
  dir: %s
processors:
  - name: %s
    plugin: %s
    inputs: [%s]
    outputs: {counts: %s}
    stores: [%s]
`, q(cfg.AppID), q(cfg.Kafka.Brokers[0]), q(cfg.State.Dir), q(p.Name), q(p.Plugin), q(p.Inputs[0]), q(p.Outputs["counts"].Topic), q(p.Stores[0]))
	return os.WriteFile(path, []byte(yml), 0o644)
}

// createTopics creates single-partition topics.
func createTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("creating topics %s: %w", strings.Join(topics, ", "), err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// wcHost is a running wordcount host.
type wcHost struct {
	h        *host.Host
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run returned
	runErr   error         // valid after done
	stopped  bool
	restored host.RestoreProgress // the restore of wordcount/0 store counts
}

// startWordcount starts a host and waits until its task's store is
// restored.
func startWordcount(ctx context.Context, cfg *host.Config, o Options) (*wcHost, error) {
	restored := make(chan host.RestoreProgress, 1)
	h, err := host.New(ctx, cfg, host.WithLogger(o.Logger), host.WithRestoreProgress(func(p host.RestoreProgress) {
		if p.Done {
			select {
			case restored <- p:
			default:
			}
		}
	}))
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	w := &wcHost{h: h, cancel: cancel, done: make(chan struct{})}
	go func() {
		w.runErr = h.Run(runCtx)
		close(w.done)
	}()
	select {
	case w.restored = <-restored:
		return w, nil
	case <-w.done:
		err := w.stop()
		return nil, fmt.Errorf("wordcount host stopped before its state was restored: %v", err)
	case <-ctx.Done():
		_ = w.stop()
		return nil, fmt.Errorf("wordcount task was not assigned and restored before the timeout: %w", ctx.Err())
	}
}

// stop stops the host cleanly (offsets committed, state applied) and
// closes it, releasing the state directory. Idempotent.
func (w *wcHost) stop() error {
	if w.stopped {
		return nil
	}
	w.stopped = true
	w.cancel()
	<-w.done
	cerr := w.h.Close()
	if w.runErr != nil && !errors.Is(w.runErr, context.Canceled) {
		return fmt.Errorf("wordcount host: %w", w.runErr)
	}
	return cerr
}

// feed produces lines and waits until the counts of all their words came
// out.
func (w *wcHost) feed(ctx context.Context, out io.Writer, brokers []string, topic string, lines []string, counts *countReader) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	want := counts.seen
	for i, line := range lines {
		fmt.Fprintf(out, "  line %q\n", line)
		res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(line)})
		if err := res.FirstErr(); err != nil {
			return fmt.Errorf("producing a line: %w", err)
		}
		want += distinctWords(line)
	}
	for counts.seen < want {
		select {
		case <-w.done:
			return fmt.Errorf("wordcount host stopped: %v", w.runErr)
		default:
		}
		if err := counts.poll(ctx); err != nil {
			return fmt.Errorf("%d of %d counts came out before the timeout: %w", counts.seen, want, err)
		}
	}
	return nil
}

// distinctWords is the number of emits wordcount makes for line: one per
// distinct word (the sample lines are lower-case words and spaces).
func distinctWords(line string) int {
	seen := map[string]bool{}
	for _, w := range strings.Fields(line) {
		seen[w] = true
	}
	return len(seen)
}

// countReader reads the output topic from the start: the latest count of
// each word.
type countReader struct {
	cl     *kgo.Client
	latest map[string]int64
	seen   int // records read
}

func newCountReader(brokers []string, topic string) (*countReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	return &countReader{cl: cl, latest: map[string]int64{}}, nil
}

func (c *countReader) poll(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	fs := c.cl.PollFetches(pctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	fs.EachRecord(func(r *kgo.Record) {
		c.seen++
		n, _ := strconv.ParseInt(string(r.Value), 10, 64)
		c.latest[string(r.Key)] = n
	})
	return nil
}

func (c *countReader) close() { c.cl.Close() }

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// printCounts prints every count (before == nil), or those that changed
// since before: "the 3 -> 5".
func printCounts(out io.Writer, before, now map[string]int64) {
	var words []string
	for w, n := range now {
		if before == nil || before[w] != n {
			words = append(words, w)
		}
	}
	sort.Slice(words, func(i, j int) bool {
		if now[words[i]] != now[words[j]] {
			return now[words[i]] > now[words[j]]
		}
		return words[i] < words[j]
	})
	parts := make([]string, len(words))
	for i, w := range words {
		switch {
		case before == nil:
			parts[i] = fmt.Sprintf("%s=%d", w, now[w])
		case before[w] == 0:
			parts[i] = fmt.Sprintf("%s new -> %d", w, now[w])
		default:
			parts[i] = fmt.Sprintf("%s %d -> %d", w, before[w], now[w])
		}
	}
	if before == nil {
		fmt.Fprintf(out, "  counts: %s\n", strings.Join(parts, " "))
	} else {
		fmt.Fprintf(out, "  counts: %s\n", strings.Join(parts, ", "))
	}
}

// localStore reads the stopped host's state directory, read-only: the
// checkpoint of wordcount/0's store and how many words it holds.
func localStore(dir string) (checkpoint int64, words int, err error) {
	r, err := host.OpenStateReadOnly(dir, nil)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	stores, err := r.Stores()
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, s := range stores {
		if s.Processor == wcProcessor && s.Partition == 0 && s.Store == wcStore && s.HasCheckpoint {
			checkpoint, found = s.Checkpoint, true
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("state dir %s has no checkpoint for %s/0 store %q", dir, wcProcessor, wcStore)
	}
	err = r.Scan(wcProcessor, 0, wcStore, func(_, _ []byte) error { words++; return nil })
	return checkpoint, words, err
}
