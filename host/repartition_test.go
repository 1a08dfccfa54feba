package host

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// repartitionConfig is split re-keying lines by word into its repartition
// output words, which count reads.
func repartitionConfig() *Config {
	return &Config{
		AppID: "app",
		Kafka: KafkaConfig{Brokers: []string{"127.0.0.1:9092"}},
		Processors: []ProcessorConfig{
			{Name: "split", Plugin: "split.wasm", Inputs: []string{"lines"}, Repartition: []string{"words"}},
			{Name: "count", Plugin: "wordcount.wasm", Inputs: []string{"split.words"},
				Outputs: map[string]OutputConfig{"counts": {Topic: "word-counts"}}, Stores: []string{"counts"}},
		},
	}
}

// A repartition output is resolved everywhere the host uses inputs and
// outputs: the reader's input and the writer's output are the internal
// topic. (Its validation errors: internal/configload's tests.)
func TestRepartitionConfigResolves(t *testing.T) {
	cfg := repartitionConfig()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	split, count := &cfg.Processors[0], &cfg.Processors[1]
	const topic = "app-split-words-repartition"
	if got := cfg.RepartitionTopic("split", "words"); got != topic {
		t.Fatalf("RepartitionTopic = %q", got)
	}
	if got := cfg.inputTopics(count); !slices.Equal(got, []string{topic}) {
		t.Errorf("count reads %q, want %q", got, topic)
	}
	if got := cfg.pluginSpec(split).Outputs; len(got) != 1 || got["words"] != topic {
		t.Errorf("split's plugin outputs %v", got)
	}
	if got := cfg.pluginSpec(count).Inputs; !slices.Equal(got, []string{topic}) {
		t.Errorf("count's plugin inputs %v", got)
	}
	if got := split.OutputNames(); !slices.Equal(got, []string{"words"}) {
		t.Errorf("split's output names %v", got)
	}
	if cfg.Kafka.RepartitionPurgeInterval != DefaultRepartitionPurgeInterval {
		t.Errorf("purge interval default %v", cfg.Kafka.RepartitionPurgeInterval)
	}
}

// chain is a two-processor app on the test broker: split re-keys lines by
// word through a repartition output, wordcount counts the words.
type chain struct {
	b          *testbroker.Broker
	cfg        *Config
	lines, out string
	// want is the true count of every word produced so far; total their
	// sum.
	want  map[string]int
	total int
	rnd   *rand.Rand
}

func newChain(t *testing.T) *chain {
	b := testbroker.New(t)
	c := &chain{b: b, lines: b.Name(t, "lines"), out: b.Name(t, "counts"), want: map[string]int{},
		rnd: rand.New(rand.NewPCG(1, 2))}
	b.CreateTopic(t, c.lines, 3, nil)
	b.CreateTopic(t, c.out, 3, nil)
	c.cfg = &Config{
		AppID: b.Name(t, "app"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 50 * time.Millisecond, SessionTimeout: 10 * time.Second,
			RepartitionPurgeInterval: 200 * time.Millisecond},
		Processors: []ProcessorConfig{
			{Name: "split", Plugin: wasmbuild.Build(t, "./plugins/split"), Inputs: []string{c.lines},
				Repartition: []string{"words"}},
			{Name: "count", Plugin: wasmbuild.Build(t, "./plugins/wordcount"), Inputs: []string{"split.words"},
				Outputs: map[string]OutputConfig{"counts": {Topic: c.out}}, Stores: []string{"counts"}},
		},
		State:   StateConfig{Dir: t.TempDir()},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	return c
}

func (c *chain) repartitionTopic() string { return c.cfg.RepartitionTopic("split", "words") }

// produce writes n lines of 6 words from a 12-word vocabulary, line i to
// partition i%3: every word appears on every partition, so counting where
// the lines arrive would be wrong.
func (c *chain) produce(t *testing.T, n int) {
	vocab := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu")
	byPart := make([][]*kgo.Record, 3)
	for i := range n {
		var ws []string
		for range 6 {
			w := vocab[c.rnd.IntN(len(vocab))]
			ws = append(ws, w)
			c.want[w]++
			c.total++
		}
		// Capitals and punctuation: the words are split and lowercased.
		line := strings.ToUpper(ws[0][:1]) + ws[0][1:] + ", " + strings.Join(ws[1:], " ") + "."
		byPart[i%3] = append(byPart[i%3], &kgo.Record{Topic: c.lines, Key: []byte("line-" + strconv.Itoa(i)), Value: []byte(line)})
	}
	for p, recs := range byPart {
		c.b.ProduceTo(t, int32(p), recs...)
	}
}

// run starts a host for the chain; the returned func stops it.
func (c *chain) run(t *testing.T) func() error {
	_, stop := c.start(t)
	return stop
}

func (c *chain) start(t *testing.T) (*Host, func() error) {
	p := &pipeline{b: c.b, cfg: c.cfg}
	return p.run(t)
}

// counts reads the committed output: the counts of each word in the order
// they were emitted.
func (c *chain) counts(t *testing.T) (map[string][]int, int) {
	recs := c.b.ReadCommitted(t, c.out, 30*time.Second)
	got := map[string][]int{}
	for _, r := range recs {
		n, err := strconv.Atoi(string(r.Value))
		if err != nil {
			t.Fatalf("output %q = %q: %v", r.Key, r.Value, err)
		}
		got[string(r.Key)] = append(got[string(r.Key)], n)
	}
	return got, len(recs)
}

// waitExact waits until the committed output holds one record per word
// occurrence produced, then checks exactly once: a word's records (one
// output partition, by key) count 1, 2, ... up to its true count, with no
// gap and no repeat.
func (c *chain) waitExact(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got, n := c.counts(t)
		if n >= c.total || time.Now().After(deadline) {
			var bad []string
			for w, want := range c.want {
				seq := got[w]
				ok := len(seq) == want
				for i := 0; ok && i < len(seq); i++ {
					ok = seq[i] == i+1
				}
				if !ok {
					bad = append(bad, fmt.Sprintf("%s: want 1..%d, got %v", w, want, seq))
				}
			}
			if n != c.total || len(bad) > 0 {
				slices.Sort(bad)
				t.Fatalf("committed output has %d records for %d word occurrences; not counted exactly once:\n%s", n, c.total, strings.Join(bad, "\n"))
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A word count after a re-key is right for any input: lines with the same
// words on every partition go through split's repartition output, and
// every word's count is its true count, each occurrence counted once
// (exactly_once across the two hops: each is a transaction of its own and
// wordcount reads committed records only).
func TestRepartitionedWordCountIsExact(t *testing.T) {
	c := newChain(t)
	c.produce(t, 300)
	stop := c.run(t)
	c.waitExact(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The internal topic has the partition count of split's input.
	adm := c.b.Admin(t)
	details, err := adm.ListTopics(context.Background(), c.repartitionTopic())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[c.repartitionTopic()].Partitions); n != 3 {
		t.Fatalf("%s has %d partitions, want 3 (those of %s)", c.repartitionTopic(), n, c.lines)
	}
}

// Records to a repartition topic carry no wasmstream-version header (only
// the app reads them; the header would be most of their bytes), while
// every output record still names the version that produced it.
func TestRepartitionRecordsCarryNoVersionHeader(t *testing.T) {
	c := newChain(t)
	c.cfg.Kafka.RepartitionPurgeInterval = time.Hour // keep the records to read them
	c.produce(t, 30)
	stop := c.run(t)
	c.waitExact(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	versionHeaders := func(recs []*kgo.Record) (n int) {
		for _, r := range recs {
			for _, h := range r.Headers {
				if h.Key == "wasmstream-version" {
					n++
				}
			}
		}
		return n
	}
	internal := c.b.ReadCommitted(t, c.repartitionTopic(), 30*time.Second)
	if len(internal) != c.total {
		t.Fatalf("%s holds %d records, want one per word occurrence (%d)", c.repartitionTopic(), len(internal), c.total)
	}
	if n := versionHeaders(internal); n != 0 {
		t.Errorf("%d of %d repartition records carry wasmstream-version, want none", n, len(internal))
	}
	outputs := c.b.ReadCommitted(t, c.out, 30*time.Second)
	if n := versionHeaders(outputs); n != len(outputs) || n == 0 {
		t.Errorf("%d of %d output records carry wasmstream-version, want all", n, len(outputs))
	}
}

// The host deletes the records of a repartition topic that the reading
// processor committed past: its log start moves up to the group's
// committed offsets.
func TestRepartitionTopicIsPurged(t *testing.T) {
	c := newChain(t)
	c.produce(t, 60)
	c.run(t)
	c.waitExact(t)
	c.waitPurged(t)
}

// waitPurged waits until the log start of every partition of the
// repartition topic has reached the group's committed offset on it.
func (c *chain) waitPurged(t *testing.T) {
	t.Helper()
	adm := c.b.Admin(t)
	topic := c.repartitionTopic()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		committed, err := adm.FetchOffsets(ctx, c.cfg.AppID)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("list start offsets: %v", err)
		}
		purged, parts := true, 0
		var state []string
		starts.Each(func(s kadm.ListedOffset) {
			parts++
			o, _ := committed.Lookup(topic, s.Partition)
			state = append(state, fmt.Sprintf("p%d start %d committed %d", s.Partition, s.Offset, o.At))
			if o.At <= 0 || s.Offset < o.At {
				purged = false
			}
		})
		if purged && parts == 3 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not purged to the committed offsets: %s", topic, strings.Join(state, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A purge that fails (here: the broker refuses DeleteRecords three
// times) is logged and retried at the next round; processing goes on and
// the records are deleted once the broker accepts.
func TestRepartitionPurgeFailuresAreRetried(t *testing.T) {
	c := newChain(t)
	c.b.RequireFake(t, "injects DeleteRecords failures with kfake's control functions")
	var refused atomic.Int32
	c.b.Fake().ControlKey(int16(kmsg.DeleteRecords), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= 3 {
			return nil, nil, false // handled by the broker from now on
		}
		c.b.Fake().KeepControl()
		refused.Add(1)
		dr := req.(*kmsg.DeleteRecordsRequest)
		resp := dr.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range dr.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.PolicyViolation.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.produce(t, 60)
	c.run(t)
	c.waitExact(t)
	c.waitPurged(t)
	if n := refused.Load(); n < 3 {
		t.Fatalf("the broker refused %d DeleteRecords requests, want 3", n)
	}
}

// Stopping the app halfway through and starting it again (with an empty
// state directory: wordcount's store is restored from its changelog)
// keeps every count exact: what split committed to the repartition topic
// is read by count once, wherever it stopped. Lines keep arriving while
// the app stops, so the stop falls in the middle of the stream.
func TestRepartitionedWordCountAcrossStops(t *testing.T) {
	c := newChain(t)
	c.produce(t, 100)
	stop := c.run(t)
	stopped := make(chan error, 1)
	time.AfterFunc(500*time.Millisecond, func() { stopped <- stop() })
	for range 20 {
		c.produce(t, 30)
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	_, n := c.counts(t)
	t.Logf("stopped with %d of %d counts out", n, c.total)
	c.cfg.State.Dir = t.TempDir()
	c.run(t)
	c.produce(t, 100)
	c.waitExact(t)
}

// An existing repartition topic whose partition count is not the one the
// writer would create it with is refused at start, naming it.
func TestRepartitionTopicWithWrongPartitionCountIsRefused(t *testing.T) {
	c := newChain(t)
	c.b.CreateTopic(t, c.repartitionTopic(), 2, nil)
	_, err := New(context.Background(), c.cfg, WithLogger(testLogger(t)))
	if err == nil || !strings.Contains(err.Error(), "repartition topic "+c.repartitionTopic()+" has 2 partitions but the processor writes it with 3") {
		t.Fatalf("New: %v", err)
	}
}

// Under start_offset: latest the reader still starts a repartition
// partition without a committed offset at its earliest offset: what the
// writer wrote before the reader first joined is the app's own data, not
// history to skip.
func TestRepartitionReaderStartsAtEarliestUnderLatest(t *testing.T) {
	c := newChain(t)
	c.cfg.Kafka.StartOffset = "latest"
	// As if split had written these before count ever ran.
	c.b.CreateTopic(t, c.repartitionTopic(), 3, nil)
	var recs []*kgo.Record
	for _, w := range strings.Fields("alpha beta alpha gamma alpha beta") {
		recs = append(recs, &kgo.Record{Topic: c.repartitionTopic(), Key: []byte(w), Value: []byte(w)})
		c.want[w]++
		c.total++
	}
	c.b.Produce(t, recs...)
	c.run(t)
	c.waitExact(t)
}

// Two processes of the chain, one joining and then the other leaving in
// the middle of the stream: the tasks of both processors move between
// them (rebalances abort open transactions and rewind), and every word is
// still counted once.
func TestRepartitionedWordCountAcrossRebalances(t *testing.T) {
	c := newChain(t)
	c.produce(t, 100)
	a, stopA := c.start(t)
	// The second process joins once the first is counting: in the middle
	// of the stream.
	testutil.Eventually(t, 60*time.Second, func() error {
		if st, _ := a.Stats("count"); st.RecordsIn == 0 {
			return fmt.Errorf("the first process has counted nothing yet")
		}
		return nil
	})
	c.cfg.State.Dir = t.TempDir() // the second process has its own state
	b, stopB := c.start(t)
	for range 10 {
		c.produce(t, 30)
		time.Sleep(50 * time.Millisecond)
	}
	statsA, _ := a.Stats("count")
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		c.produce(t, 30)
		time.Sleep(50 * time.Millisecond)
	}
	c.waitExact(t)
	statsB, _ := b.Stats("count")
	t.Logf("count processed %d records in the first process, %d in the second (%d aborts)", statsA.RecordsIn, statsB.RecordsIn, statsA.Aborts+statsB.Aborts)
	if statsA.RecordsIn == 0 || statsB.RecordsIn == 0 {
		t.Fatalf("the count tasks did not move: first process %d records, second %d", statsA.RecordsIn, statsB.RecordsIn)
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
}
