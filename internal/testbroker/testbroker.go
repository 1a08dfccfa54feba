// Package testbroker gives every integration test in wasmstream its Kafka
// broker, so that one suite runs against two brokers:
//
//   - by default an in-process kfake cluster (github.com/twmb/franz-go/pkg/kfake),
//     a new one per New call, listening on 127.0.0.1 and closed when the test ends;
//   - the real broker when WASMSTREAM_TEST_BROKERS is set to its comma-separated
//     seed addresses (scripts/kafka.sh start runs one at 127.0.0.1:19092).
//
// Tests never hard-code topic or group names: Name makes one unique per test,
// because the real broker is shared by every test of a run (and by earlier
// runs until the next scripts/kafka.sh start).
//
// What kfake cannot do faithfully is skipped there with RequireReal; what
// differs (kfake's compaction also moves the log start, real Kafka's does not;
// kfake answers instantly where the real broker is asynchronous) is hidden
// behind the helpers below, each of which waits until the effect is visible.
//
// Every helper fails the test (t.Fatalf) on error and bounds its waits; none
// returns an error.
package testbroker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvBrokers names the environment variable that selects the real broker: its
// value is a comma-separated list of seed addresses, e.g. "127.0.0.1:19092".
// Unset or empty means kfake.
const EnvBrokers = "WASMSTREAM_TEST_BROKERS"

// opTimeout bounds each admin or produce call a helper makes. The real broker
// answers in milliseconds; 30 s only guards against a hung broker.
const opTimeout = 30 * time.Second

// metadataWait bounds how long CreateTopic waits for a new topic to show in
// metadata with a leader for every partition (the real broker creates topics
// asynchronously; it usually takes a few milliseconds).
const metadataWait = 30 * time.Second

// expireWait bounds how long ExpireOldSegments waits for the log start to
// move. On the real broker the retention check runs every second
// (log.retention.check.interval.ms=1000 in scripts/kafka.sh), so a few seconds
// is typical.
const expireWait = 60 * time.Second

// restartTimeout bounds scripts/kafka.sh restart: stop (up to 30 s before
// SIGKILL) plus start (up to 90 s).
const restartTimeout = 3 * time.Minute

// Broker is the Kafka cluster one test (or one group of subtests) uses. Its
// methods are safe for concurrent use by subtests, except Restart.
type Broker struct {
	addrs []string // seed addresses; for kfake, its listeners
	real  bool     // WASMSTREAM_TEST_BROKERS was set

	mu       sync.Mutex
	fake     *kfake.Cluster // nil on the real broker
	fakeOpts []kfake.Opt    // the options fake was built with, for Restart
	dataDir  string         // kfake persistence dir when Restartable, else ""

	// Lazily created clients shared by the helpers, closed when the test
	// given to New ends.
	producer    *kgo.Client
	manualProd  *kgo.Client
	adminClient *kadm.Client
}

// Option changes how New builds the broker.
type Option func(*options)

type options struct {
	kfakeOpts    []kfake.Opt
	restartable  bool
	outOfProcess bool
}

// OutOfProcess runs kfake in a process of its own (internal/testbroker/
// kfakeserver, built on first use) instead of in the test's: for tests
// that measure the test process's heap, goroutines or file descriptors,
// which an in-process kfake (it keeps every record in memory, and serves
// every connection with goroutines of the test's process) would blur.
// Such a broker is reached only through the Kafka protocol: Fake returns
// nil, Restart and KfakeOpts are not supported. No effect on the real
// broker.
func OutOfProcess() Option {
	return func(o *options) { o.outOfProcess = true }
}

// KfakeOpts passes extra options to kfake.NewCluster (for example
// kfake.NumBrokers(3) or kfake.BrokerConfigs). They are ignored on the real
// broker. New starts kfake with kfake.NumBrokers(1), like the real broker;
// these options come after and override it.
func KfakeOpts(opts ...kfake.Opt) Option {
	return func(o *options) { o.kfakeOpts = append(o.kfakeOpts, opts...) }
}

// Restartable makes a kfake cluster keep its state in a temporary directory
// (kfake.DataDir) so that Restart can close it and start it again with the
// same data on the same ports. Without it Restart fails the test on kfake.
// It has no effect on the real broker, which is always restartable.
func Restartable() Option {
	return func(o *options) { o.restartable = true }
}

// New returns the broker for test t: a new kfake cluster, closed by
// t.Cleanup, or the real broker named by WASMSTREAM_TEST_BROKERS, which must
// already be running (it checks that the first seed accepts connections, so a
// forgotten scripts/kafka.sh start fails fast with a clear message). It logs
// which one it chose.
func New(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := &Broker{}

	if seeds := realSeeds(); len(seeds) > 0 {
		conn, err := net.DialTimeout("tcp", seeds[0], 3*time.Second)
		if err != nil {
			t.Fatalf("testbroker: %s=%s but %s does not accept connections (start it with scripts/kafka.sh start): %v",
				EnvBrokers, os.Getenv(EnvBrokers), seeds[0], err)
		}
		conn.Close()
		b.addrs = seeds
		b.real = true
		t.Cleanup(b.closeClients)
		t.Logf("testbroker: real broker at %s", strings.Join(seeds, ","))
		return b
	}

	// KIP-848 group timings as scripts/kafka.sh gives the real broker: a
	// member hears of a rebalance within half a second, and a dead member
	// is expired after 10 s (the broker defaults, 5 s and 45 s, would make
	// every rebalance test wait).
	groupTimings := map[string]string{
		"group.consumer.heartbeat.interval.ms": "500",
		"group.consumer.session.timeout.ms":    "10000",
	}
	if o.outOfProcess {
		if len(o.kfakeOpts) > 0 || o.restartable {
			t.Fatal("testbroker: OutOfProcess takes neither KfakeOpts nor Restartable")
		}
		b.addrs = startServer(t, groupTimings)
		t.Cleanup(b.closeClients)
		t.Logf("testbroker: kfake in a process of its own at %s (set %s to use a real broker)", strings.Join(b.addrs, ","), EnvBrokers)
		return b
	}
	b.fakeOpts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.BrokerConfigs(groupTimings)}, o.kfakeOpts...)
	if o.restartable {
		b.dataDir = t.TempDir()
		b.fakeOpts = append(b.fakeOpts, kfake.DataDir(b.dataDir))
	}
	c, err := kfake.NewCluster(b.fakeOpts...)
	if err != nil {
		t.Fatalf("testbroker: starting kfake: %v", err)
	}
	b.fake = c
	b.addrs = c.ListenAddrs()
	// Close whichever cluster is current at the end (Restart replaces it).
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.fake.Close()
	})
	t.Cleanup(b.closeClients) // runs before the cluster closes
	t.Logf("testbroker: kfake at %s (set %s to use a real broker)", strings.Join(b.addrs, ","), EnvBrokers)
	return b
}

// realSeeds returns the addresses in WASMSTREAM_TEST_BROKERS, or nil.
func realSeeds() []string {
	var seeds []string
	for _, s := range strings.Split(os.Getenv(EnvBrokers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// Addrs returns the seed addresses to give a client (kgo.SeedBrokers).
func (b *Broker) Addrs() []string {
	return append([]string(nil), b.addrs...)
}

// Real reports whether this is the real broker rather than kfake.
func (b *Broker) Real() bool { return b.real }

// Fake returns the kfake cluster for fault injection (Cluster.ControlKey,
// Cluster.Fault, ApplyRetention, ...), or nil on the real broker. A test that
// uses it should call RequireFake first. Restart replaces the cluster, so call
// Fake again after a Restart.
func (b *Broker) Fake() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fake
}

// RequireReal skips t on kfake, for behaviour kfake does not reproduce
// faithfully; why says what (it is printed in the skip message).
func (b *Broker) RequireReal(t testing.TB, why string) {
	t.Helper()
	if !b.Real() {
		t.Skipf("real broker only: %s (runs in make test against real Kafka)", why)
	}
}

// RequireFake skips t on the real broker, for tests that inject faults
// through Fake.
func (b *Broker) RequireFake(t testing.TB, why string) {
	t.Helper()
	if b.Real() {
		t.Skipf("kfake only: %s", why)
	}
}

// maxNameLen keeps names well under Kafka's 249-character topic limit (and the
// limits on group and transactional ids), leaving room for suffixes that
// callers derive from a name, such as "<app>-<store>-changelog".
const maxNameLen = 199

// Name returns a name unique to this call, usable as a topic, group,
// transactional or application id: prefix, "-", the test name, "-", 12 random
// hex digits. Characters Kafka does not allow in topic names, and '.' and '_'
// (which Kafka treats as colliding), become '-'; the test name is shortened so
// the whole stays under 200 characters.
func (b *Broker) Name(t testing.TB, prefix string) string {
	t.Helper()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("testbroker: random name suffix: %v", err)
	}
	suffix := hex.EncodeToString(rnd[:])
	p := sanitize(prefix)
	if p == "" {
		p = "t"
	}
	if len(p) > 64 {
		p = p[:64]
	}
	name := sanitize(t.Name())
	if room := maxNameLen - len(p) - len(suffix) - 2; len(name) > room {
		name = name[:room]
	}
	name = strings.Trim(name, "-")
	if name == "" {
		return p + "-" + suffix
	}
	return p + "-" + name + "-" + suffix
}

// sanitize keeps [A-Za-z0-9-], turns every other run of characters into one
// '-', and trims leading and trailing '-'.
func sanitize(s string) string {
	var sb strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if ok {
			sb.WriteRune(r)
			dash = false
		} else if !dash {
			sb.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(sb.String(), "-")
}

// Client returns a new client seeded with the broker's addresses plus opts,
// closed when t ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := b.newClient(t, opts...)
	t.Cleanup(cl.Close)
	return cl
}

// newClient returns a client the caller must close.
func (b *Broker) newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(b.addrs...)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("testbroker: new client: %v", err)
	}
	return cl
}

// helperClient returns a client for the helpers' own use, which the caller
// must close. It refreshes metadata after at most 250 ms instead of kgo's
// 5 s (kgo.MetadataMinAge), so a helper retrying after a leader error or a
// broker restart is not held up for seconds.
func (b *Broker) helperClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(b.addrs...), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("testbroker: new client: %v", err)
	}
	return cl
}

// Admin returns an admin client, closed when t ends.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// admin returns the broker's shared admin client (closed with the test given
// to New), so helpers do not open a connection per call.
func (b *Broker) admin(t testing.TB) *kadm.Client {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adminClient == nil {
		b.adminClient = kadm.NewClient(b.helperClient(t))
	}
	return b.adminClient
}

func (b *Broker) closeClients() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, cl := range []*kgo.Client{b.producer, b.manualProd} {
		if cl != nil {
			cl.Close()
		}
	}
	if b.adminClient != nil {
		b.adminClient.Close()
	}
	b.producer, b.manualProd, b.adminClient = nil, nil, nil
}

// CreateTopic creates topic name with the given partition count, replication
// factor 1 and topic configs (nil for none), and waits (up to 30 s) until
// metadata shows every partition with a leader: the real broker creates topics
// asynchronously, and producing before that fails with
// UNKNOWN_TOPIC_OR_PARTITION. On the real broker the topic is deleted when t
// ends, unless t failed (its data is then kept for inspection until the next
// scripts/kafka.sh start).
func (b *Broker) CreateTopic(t testing.TB, name string, partitions int, configs map[string]string) {
	t.Helper()
	adm := b.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	var cfgs map[string]*string
	if len(configs) > 0 {
		cfgs = make(map[string]*string, len(configs))
		for k, v := range configs {
			cfgs[k] = kadm.StringPtr(v)
		}
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, cfgs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testbroker: create topic %q (%d partitions, configs %v): %v %s", name, partitions, configs, err, resp.ErrMessage)
	}
	if b.Real() {
		t.Cleanup(func() { b.deleteTopic(t, name) })
	}

	deadline := time.Now().Add(metadataWait)
	for {
		why := topicNotReady(ctx, adm, name, partitions)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbroker: topic %q created but not ready after %v: %s", name, metadataWait, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// topicNotReady returns "" when metadata shows topic with n partitions that
// all have a leader, else what is missing.
func topicNotReady(ctx context.Context, adm *kadm.Client, topic string, n int) string {
	ds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Sprintf("metadata: %v", err)
	}
	d, ok := ds[topic]
	if !ok || d.Err != nil {
		return fmt.Sprintf("metadata has no topic (err %v)", d.Err)
	}
	if len(d.Partitions) != n {
		return fmt.Sprintf("metadata shows %d of %d partitions", len(d.Partitions), n)
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return fmt.Sprintf("partition %d: leader %d, err %v", p.Partition, p.Leader, p.Err)
		}
	}
	return ""
}

// deleteTopic removes a topic at the end of a passing test on the real broker
// so repeated runs do not pile up partitions. Failures are only logged.
func (b *Broker) deleteTopic(t testing.TB, name string) {
	if t.Failed() {
		t.Logf("testbroker: keeping topic %q of failed test", name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A fresh client: t may outlive the test given to New, whose cleanup
	// closes the shared admin client.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		t.Logf("testbroker: delete topic %q: %v", name, err)
		return
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, name)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Logf("testbroker: delete topic %q: %v", name, err)
	}
}

// Produce writes recs synchronously (acks=all, idempotent) with kgo's default
// partitioner: records with a key go to murmur2(key) % partitions like the
// Java producer; Record.Partition is ignored (use ProduceTo). It fails t if any
// record is not written within 30 s.
func (b *Broker) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	b.produce(t, false, recs)
}

// ProduceTo writes recs synchronously to the given partition of each record's
// topic (it sets Record.Partition).
func (b *Broker) ProduceTo(t testing.TB, partition int32, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		r.Partition = partition
	}
	b.produce(t, true, recs)
}

func (b *Broker) produce(t testing.TB, manual bool, recs []*kgo.Record) {
	t.Helper()
	b.mu.Lock()
	var cl *kgo.Client
	if manual {
		if b.manualProd == nil {
			b.manualProd = b.helperClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		}
		cl = b.manualProd
	} else {
		if b.producer == nil {
			b.producer = b.helperClient(t)
		}
		cl = b.producer
	}
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("testbroker: produce %d records: %v", len(recs), err)
	}
}

// ReadCommitted returns every record of topic that a read_committed consumer
// sees, from each partition's log start up to its last stable offset as listed
// once when the call starts (records produced later are not waited for). The
// result is ordered by partition, then offset; aborted transactional records
// and control records are not in it. It fails t if it cannot read up to those
// offsets within timeout.
//
// A partition counts as read when a record or transaction marker at or past
// its end-1 has been seen, so it needs no quiet period. Caveat: if a
// transaction is still open and an aborted one interleaves with it just below
// the last stable offset, the end cannot be observed and the call times out;
// tests call it after their producers have finished.
func (b *Broker) ReadCommitted(t testing.TB, topic string, timeout time.Duration) []*kgo.Record {
	t.Helper()
	return b.readCommitted(t, topic, timeout, 0)
}

// ReadCommittedAfterStop is ReadCommitted for a test whose transactional
// producer has just stopped. A transaction's commit reaches its partitions
// after the producer's EndTxn returned (the coordinator writes the
// markers; Kafka does it asynchronously), so a read right after the stop
// could list a last stable offset short of the last transaction: a test
// saw that transaction's changelog records and none of its outputs (once,
// on a loaded machine). So it first waits, up to settleWait, for each
// partition's last stable offset to reach its end; a transaction that
// stays open (a killed producer's, until its timeout) is not waited for
// past that.
func (b *Broker) ReadCommittedAfterStop(t testing.TB, topic string, timeout time.Duration) []*kgo.Record {
	t.Helper()
	return b.readCommitted(t, topic, timeout, min(settleWait, timeout/2))
}

func (b *Broker) readCommitted(t testing.TB, topic string, timeout, settle time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	adm := b.admin(t)
	ends, err := settledEnds(ctx, adm, topic, settle)
	if err != nil {
		t.Fatalf("testbroker: read %q: list last stable offsets: %v", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("testbroker: read %q: list start offsets: %v", topic, err)
	}

	end := make(map[int32]int64)       // partitions still to read -> last stable offset
	from := make(map[int32]kgo.Offset) // where to start each
	seen := make(map[int32]int64)      // highest offset seen, for the timeout message
	byPart := make(map[int32][]*kgo.Record)
	for p, o := range ends[topic] {
		s := starts[topic][p].Offset
		if o.Offset > s {
			end[p] = o.Offset
			from[p] = kgo.NewOffset().At(s)
			seen[p] = s - 1
		}
	}
	if len(end) == 0 {
		return nil
	}

	cl := b.helperClient(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers advance the position past aborted data, which is otherwise
		// invisible: without them a partition ending in an aborted
		// transaction could never be seen as fully read.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	defer cl.Close()

	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("testbroker: read %q: not at the end after %v: still reading partition->(last offset seen, end) %v",
				topic, timeout, progress(end, seen))
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("testbroker: read %q partition %d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			e, reading := end[r.Partition]
			if !reading || r.Offset >= e {
				return
			}
			seen[r.Partition] = r.Offset
			if !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			if r.Offset+1 >= e {
				delete(end, r.Partition)
			}
		})
	}

	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var out []*kgo.Record
	for _, p := range parts {
		out = append(out, byPart[p]...)
	}
	return out
}

func progress(end, seen map[int32]int64) string {
	var parts []string
	for p, e := range end {
		parts = append(parts, fmt.Sprintf("%d->(%d, %d)", p, seen[p], e))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// DeleteRecords moves the log start of topic/partition to before (records
// below offset before become unreadable), as kadm.DeleteRecords does, and
// fails t unless the broker reports the new log start.
func (b *Broker) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resp, err := b.admin(t).DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("testbroker: delete records %s/%d before %d: %v", topic, partition, before, err)
	}
	r, ok := resp[topic][partition]
	if !ok {
		t.Fatalf("testbroker: delete records %s/%d before %d: no answer for the partition", topic, partition, before)
	}
	if r.Err != nil {
		t.Fatalf("testbroker: delete records %s/%d before %d: %v", topic, partition, before, r.Err)
	}
	if r.LowWatermark < before {
		t.Fatalf("testbroker: delete records %s/%d before %d: log start is %d", topic, partition, before, r.LowWatermark)
	}
}

// WaitNoOpenTransaction waits (up to timeout) until no transaction is open
// on topic: every partition's last stable offset is its end. A consumer
// group's transactional offsets can be visible before the transaction's
// markers reach every output partition, and ReadCommitted reads only to
// the last stable offset, so a test that reads an app's output once its
// input is committed waits for this first.
func (b *Broker) WaitNoOpenTransaction(t testing.TB, topic string, timeout time.Duration) {
	t.Helper()
	adm := b.admin(t)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, open, err := openTransaction(ctx, adm, topic)
		cancel()
		if err == nil && open == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbroker: %q still has an open transaction after %v (%s; err %v)", topic, timeout, open, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openTransaction lists topic's last stable offsets and says which
// partition, if any, has a transaction open: its last stable offset short
// of its end ("" when none has).
func openTransaction(ctx context.Context, adm *kadm.Client, topic string) (stable kadm.ListedOffsets, open string, err error) {
	stable, err = adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, "", err
	}
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := stable.Lookup(topic, e.Partition); !ok || s.Offset != e.Offset {
			open = fmt.Sprintf("partition %d: last stable offset %d, end %d", e.Partition, s.Offset, e.Offset)
		}
	})
	return stable, open, nil
}

// ExpireOldSegments makes retention remove everything currently in topic: it
// sets the topic's retention.ms to 1, waits (up to 60 s) until every partition
// that held records has its log start at or past the end offset it had when
// the call started, then restores retention.ms (to the topic's previous
// override, or the broker default).
//
// Real broker: the retention check runs every second (scripts/kafka.sh sets
// log.retention.check.interval.ms=1000), and a breached active segment is
// rolled and deleted too, so this takes one to a few seconds. kfake: retention
// is applied with Cluster.ApplyRetention. Records produced while this runs may
// be removed too.
func (b *Broker) ExpireOldSegments(t testing.TB, topic string) {
	t.Helper()
	adm := b.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), expireWait+opTimeout)
	defer cancel()

	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("testbroker: expire %q: list end offsets: %v", topic, err)
	}

	restore := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("testbroker: expire %q: describe configs: %v", topic, err)
	}
	if rc, err := rcs.On(topic, nil); err == nil && rc.Err == nil {
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				restore = kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: c.Value}
			}
		}
	}
	if err := b.alterTopicConfig(ctx, t, topic, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}); err != nil {
		t.Fatalf("testbroker: expire %q: %v", topic, err)
	}
	defer func() {
		// Errorf, not Fatalf: this may run while a Fatalf is unwinding.
		if err := b.alterTopicConfig(context.Background(), t, topic, restore); err != nil {
			t.Errorf("testbroker: expire %q: restoring retention.ms: %v", topic, err)
		}
	}()

	deadline := time.Now().Add(expireWait)
	for {
		if c := b.Fake(); c != nil {
			c.ApplyRetention()
		}
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			t.Fatalf("testbroker: expire %q: list start offsets: %v", topic, err)
		}
		var behind []string
		for p, e := range ends[topic] {
			if s := starts[topic][p].Offset; s < e.Offset {
				behind = append(behind, fmt.Sprintf("%d: start %d < end %d", p, s, e.Offset))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(behind)
			t.Fatalf("testbroker: expire %q: log start did not move within %v: %s", topic, expireWait, strings.Join(behind, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *Broker) alterTopicConfig(ctx context.Context, t testing.TB, topic string, c kadm.AlterConfig) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := b.admin(t).AlterTopicConfigs(ctx, []kadm.AlterConfig{c}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		r, err = resp.On(topic, nil)
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("alter config %s (op %v): %w", c.Name, c.Op, err)
	}
	return nil
}

// Restart stops the broker and starts it again with its data, for recovery
// tests. Clients reconnect by themselves.
//
// Real broker: runs scripts/kafka.sh restart (the script is found by walking
// up from the working directory to go.mod) and takes a few seconds. It
// disrupts every test using the broker at that moment, including other
// packages that go test runs in parallel: run restart tests on their own (for
// example go test -run Restart -p 1), and name them with "Restart".
//
// kfake: needs Restartable() in New; the cluster is closed and a new one
// started on the same port from the persisted state (in about a millisecond).
// Fake returns the new cluster afterwards.
//
// Restart closes the helpers' shared clients (they are reopened on next use),
// so it must not run while another goroutine is inside a helper of the same
// Broker.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	if !b.Real() && b.dataDir == "" {
		t.Fatalf("testbroker: Restart on kfake needs testbroker.Restartable() in New (kfake keeps its state in memory otherwise)")
	}
	// The helpers' shared clients would first trip over their dead
	// connections and back off; start them afresh instead.
	b.closeClients()
	if b.Real() {
		b.restartReal(t)
	} else {
		b.restartFake(t)
	}
}

func (b *Broker) restartFake(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var ports []int
	for _, a := range b.addrs {
		_, ps, err := net.SplitHostPort(a)
		if err == nil {
			var p int
			p, err = strconv.Atoi(ps)
			ports = append(ports, p)
		}
		if err != nil {
			t.Fatalf("testbroker: restart kfake: bad listen address %q: %v", a, err)
		}
	}
	b.fake.Close()
	start := time.Now()
	opts := append(append([]kfake.Opt(nil), b.fakeOpts...), kfake.Ports(ports...))
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("testbroker: restart kfake on ports %v: %v", ports, err)
	}
	b.fake = c
	t.Logf("testbroker: kfake restarted in %v", time.Since(start).Round(time.Millisecond))
}

func (b *Broker) restartReal(t testing.TB) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testbroker: restart: %v", err)
	}
	script := filepath.Join(root, "scripts", "kafka.sh")
	ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	defer cancel()

	// Refuse to restart a broker other than the one under test.
	status, err := exec.CommandContext(ctx, script, "status").CombinedOutput()
	if err != nil {
		t.Fatalf("testbroker: restart: %s status: %v: %s", script, err, strings.TrimSpace(string(status)))
	}
	for _, a := range b.addrs {
		if !strings.Contains(string(status), a) {
			t.Fatalf("testbroker: restart: %s=%s is not the broker %s manages (%s)",
				EnvBrokers, strings.Join(b.addrs, ","), script, strings.TrimSpace(string(status)))
		}
	}

	start := time.Now()
	out, err := exec.CommandContext(ctx, script, "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("testbroker: %s restart: %v\n%s", script, err, out)
	}
	t.Logf("testbroker: real broker restarted in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
}

// serverBuild is the kfakeserver binary, built once per test process.
var serverBuild struct {
	once sync.Once
	path string
	err  error
}

// startServer builds (once) and starts a kfakeserver with the broker
// configs, and returns its addresses. The server ends when t ends: its
// stdin is closed (and it is killed if it has not exited 10 s later); it
// also ends by itself if the test process dies.
func startServer(t testing.TB, configs map[string]string) []string {
	t.Helper()
	serverBuild.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			serverBuild.err = err
			return
		}
		dir, err := os.MkdirTemp("", "wasmstream-kfakeserver-")
		if err != nil {
			serverBuild.err = err
			return
		}
		serverBuild.path = filepath.Join(dir, "kfakeserver")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", serverBuild.path, "./internal/testbroker/kfakeserver")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			serverBuild.err = fmt.Errorf("go build ./internal/testbroker/kfakeserver: %v\n%s", err, out)
		}
	})
	if serverBuild.err != nil {
		t.Fatalf("testbroker: %v", serverBuild.err)
	}
	var args []string
	for k, v := range configs {
		args = append(args, "-broker-config", k+"="+v)
	}
	cmd := exec.Command(serverBuild.path, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("testbroker: starting kfakeserver: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line := make(chan string, 1)
	go func() {
		var buf [4096]byte
		n, _ := stdout.Read(buf[:])
		line <- string(buf[:n])
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		addrs, ok := strings.CutPrefix(strings.TrimSpace(l), "listening ")
		if !ok || addrs == "" {
			t.Fatalf("testbroker: kfakeserver said %q, want \"listening <addrs>\"", l)
		}
		return strings.Split(addrs, ",")
	case <-exited:
		t.Fatal("testbroker: kfakeserver exited before it listened")
	case <-time.After(30 * time.Second):
		t.Fatal("testbroker: kfakeserver did not listen within 30 s")
	}
	return nil
}

// repoRoot walks up from the working directory (a package directory under go
// test) to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// AllCommitted reports whether group's committed offsets have reached
// every partition's end in ends (false while the group or its coordinator
// is not there yet).
func AllCommitted(t testing.TB, adm *kadm.Client, group string, ends kadm.ListedOffsets) bool {
	committed, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) || kerr.IsRetriable(err) {
			return false
		}
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	all := true
	ends.Each(func(e kadm.ListedOffset) {
		if c, _ := committed.Lookup(e.Topic, e.Partition); c.At < e.Offset {
			all = false
		}
	})
	return all
}

// settleWait bounds how long ReadCommittedAfterStop waits for a topic's
// open transactions to end before it reads.
const settleWait = 5 * time.Second

// settledEnds lists topic's last stable offsets once no transaction is
// open on it (openTransaction), or as they are after wait; with wait 0
// (ReadCommitted) it lists them once, without the end offsets.
func settledEnds(ctx context.Context, adm *kadm.Client, topic string, wait time.Duration) (kadm.ListedOffsets, error) {
	if wait <= 0 {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		return stable, err
	}
	deadline := time.Now().Add(wait)
	for {
		stable, open, err := openTransaction(ctx, adm, topic)
		if err != nil || open == "" || !time.Now().Before(deadline) {
			return stable, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
