package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The I/O floor: `benchkit floor` is the word count's topology as a plain
// franz-go consume-transform-produce loop, with no Wasm, no state store
// and no stream processing framework: lines -> words, each produced to a
// repartition topic keyed (and partitioned) by the word -> a count per word
// in a Go map -> the count to the output and to a compacted changelog,
// committed with the input offsets in the same transactions as the other
// systems (one per commit interval, exactly_once) or flushed then
// committed (at_least_once). Every record the others write, it writes
// too, the same number of times, through the same broker: what is left
// of a configuration's cost above the floor's is its own.
//
// Its words are the benchmark's: runs of a-z and 0-9 after lowercasing
// ASCII (the generated input has only a-z and spaces; Kafka Streams' \W+
// and the plugins' rule find the same words in it).

// FloorEmit is the floor's output mode, matching the configurations it is
// the floor of.
type FloorEmit string

const (
	// FloorPerUpdate writes one output and one changelog record per word
	// occurrence, as Kafka Streams without its cache and wasmstream-general.
	FloorPerUpdate FloorEmit = "update"
	// FloorPerCommit writes each word's latest count once per commit
	// window (output and changelog), as Kafka Streams' record cache and
	// the emit-at-commit configurations.
	FloorPerCommit FloorEmit = "commit"
)

// floorOptions are `benchkit floor`'s flags.
type floorOptions struct {
	Brokers        []string
	AppID          string // consumer group, transactional id and topic prefix
	Input, Output  string
	Guarantee      string
	CommitInterval time.Duration
	Partitions     int // of the internal topics (the input's count)
	Emit           FloorEmit
	Log            kgo.Logger // the Kafka client's; nil: none
}

// repartitionTopic and changelogTopic are the floor's internal topics,
// named with the app id as the others' are, so the harness's Watch counts
// them in Progress and Backlog.
func (o floorOptions) repartitionTopic() string { return o.AppID + "-words-repartition" }
func (o floorOptions) changelogTopic() string   { return o.AppID + "-counts-changelog" }

// floorMain runs `benchkit floor`: the measured process of the floor
// configurations, started by the harness like the others and stopped by
// SIGTERM (ctx).
func floorMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchkit floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		brokers    = fs.String("brokers", "127.0.0.1:19192", "the broker, host:port (comma-separated for several)")
		appID      = fs.String("app-id", "", "consumer group, transactional id and prefix of the internal topics")
		input      = fs.String("input", "", "input topic (lines)")
		output     = fs.String("output", "", "output topic (word -> 8-byte big-endian count)")
		guarantee  = fs.String("guarantee", ExactlyOnce, "exactly_once or at_least_once")
		commit     = fs.Duration("commit-interval", 100*time.Millisecond, "commit interval")
		partitions = fs.Int("partitions", 4, "partitions of the repartition and changelog topics")
		emit       = fs.String("emit", string(FloorPerUpdate), "update (one output per word) or commit (the latest count per word per commit)")
		verbose    = fs.Bool("v", false, "log the Kafka client at info level (default: warnings and errors)")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := kgo.LogLevelWarn
	if *verbose {
		level = kgo.LogLevelInfo
	}
	o := floorOptions{Brokers: strings.Split(*brokers, ","), AppID: *appID, Input: *input, Output: *output,
		Guarantee: *guarantee, CommitInterval: *commit, Partitions: *partitions, Emit: FloorEmit(*emit),
		Log: kgo.BasicLogger(stderr, level, func() string { return time.Now().Format("15:04:05.000 ") })}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "benchkit floor: %v\n", err)
		return 2
	}
	if err := runFloor(ctx, o); err != nil {
		fmt.Fprintf(stderr, "benchkit floor: %v\n", err)
		return 1
	}
	return 0
}

func (o floorOptions) validate() error {
	switch {
	case o.AppID == "" || o.Input == "" || o.Output == "":
		return errors.New("-app-id, -input and -output are required")
	case o.Guarantee != ExactlyOnce && o.Guarantee != AtLeastOnce:
		return fmt.Errorf("-guarantee %q: want %s or %s", o.Guarantee, ExactlyOnce, AtLeastOnce)
	case o.Emit != FloorPerUpdate && o.Emit != FloorPerCommit:
		return fmt.Errorf("-emit %q: want %s or %s", o.Emit, FloorPerUpdate, FloorPerCommit)
	case o.CommitInterval < time.Millisecond:
		return fmt.Errorf("-commit-interval %s: want at least 1ms", o.CommitInterval)
	case o.Partitions < 1:
		return fmt.Errorf("-partitions %d: want at least 1", o.Partitions)
	}
	return nil
}

// floorMaxPoll is the records of one poll, as Kafka Streams'
// max.poll.records (1000). The floor is one loop: how a poll spreads over
// partitions does not change its work.
const floorMaxPoll = 1000

// runFloor creates the internal topics and runs the loop until ctx ends.
func runFloor(ctx context.Context, o floorOptions) error {
	// createTopic lists a topic until it shows; at franz-go's default
	// metadata age (5 s) the listings after a first one that came too
	// early are answered from the client's cache, which held the floor's
	// start back by 5 s (seen as a 5.5 s first commit).
	admCl, err := newClient(o.Brokers, kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		return err
	}
	adm := kadm.NewClient(admCl)
	err = createFloorTopics(ctx, adm, o)
	admCl.Close()
	if err != nil {
		return err
	}
	f := newFloorCounter(o)
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...), kgo.ClientID("wasmstream-benchkit-floor"),
		kgo.ConsumerGroup(o.AppID),
		kgo.ConsumeTopics(o.Input, o.repartitionTopic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Every record names its partition (floorPartition, or the
		// task's for the changelog).
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// The producer settings of wasmstream's runner, and its metadata
		// age: a produce the broker asks to retry waits for a metadata
		// refresh, up to franz-go's default 5 s (RATIONALE.md, "Kafka
		// I/O"), which would make the floor's rounds stall where the
		// host's do not.
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if o.Log != nil {
		opts = append(opts, kgo.WithLogger(o.Log))
	}
	if o.Guarantee == ExactlyOnce {
		return floorExactlyOnce(ctx, o, f, append(opts,
			kgo.TransactionalID(o.AppID+"-floor"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		))
	}
	return floorAtLeastOnce(ctx, o, f, append(opts, kgo.BlockRebalanceOnPoll()))
}

func createFloorTopics(ctx context.Context, adm *kadm.Client, o floorOptions) error {
	if err := createTopic(ctx, adm, o.repartitionTopic(), o.Partitions); err != nil {
		return err
	}
	if err := createTopicConfigs(ctx, adm, o.changelogTopic(), o.Partitions, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}); err != nil {
		return err
	}
	return nil
}

// floorExactlyOnce is the loop under exactly_once: a franz-go
// GroupTransactSession, one transaction per commit interval holding the
// window's produced records and the offsets of the records it consumed;
// an abort (a rebalance) drops the window's counts and the session rewinds
// to the committed offsets.
func floorExactlyOnce(ctx context.Context, o floorOptions, f *floorCounter, opts []kgo.Opt) error {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer sess.Close()
	inTxn := false
	last := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, max(o.CommitInterval-time.Since(last), time.Millisecond))
		fetches := sess.PollRecords(pctx, floorMaxPoll)
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		if err := fetchError(fetches); err != nil {
			return err
		}
		if fetches.NumRecords() > 0 && !inTxn {
			if err := sess.Begin(); err != nil {
				return fmt.Errorf("beginning a transaction: %w", err)
			}
			inTxn = true
		}
		fetches.EachRecord(func(r *kgo.Record) { f.process(r, sess.Produce) })
		if time.Since(last) < o.CommitInterval {
			continue
		}
		last = time.Now()
		if !inTxn {
			continue
		}
		f.flushWindow(sess.Produce)
		committed, err := sess.End(ctx, kgo.TryCommit)
		inTxn = false
		if err != nil {
			return fmt.Errorf("ending a transaction: %w", err)
		}
		if err := f.produceErr(); err != nil {
			return err
		}
		f.endWindow(committed)
	}
	return nil
}

// floorAtLeastOnce is the loop under at_least_once: at each commit point
// the window's records are flushed, then the consumed offsets committed.
func floorAtLeastOnce(ctx context.Context, o floorOptions, f *floorCounter, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	// A poll blocks rebalances until AllowRebalance, and Close (leaving
	// the group) waits for them: allow before closing, whatever ends the
	// loop.
	defer cl.AllowRebalance()
	last := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, max(o.CommitInterval-time.Since(last), time.Millisecond))
		fetches := cl.PollRecords(pctx, floorMaxPoll)
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		if err := fetchError(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) { f.process(r, cl.Produce) })
		if time.Since(last) >= o.CommitInterval {
			last = time.Now()
			f.flushWindow(cl.Produce)
			if err := cl.Flush(ctx); err != nil {
				return fmt.Errorf("flushing: %w", err)
			}
			if err := f.produceErr(); err != nil {
				return err
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				return fmt.Errorf("committing offsets: %w", err)
			}
			f.endWindow(true)
		}
		cl.AllowRebalance()
	}
	return nil
}

// fetchError is the first fetch error that is not the poll's own deadline.
func fetchError(fs kgo.Fetches) error {
	var err error
	fs.EachError(func(t string, p int32, e error) {
		if err == nil && !errors.Is(e, context.DeadlineExceeded) && !errors.Is(e, context.Canceled) {
			err = fmt.Errorf("fetching %s/%d: %w", t, p, e)
		}
	})
	return err
}

// floorCounter is the floor's processing: the split of a line and the
// count of a word, with the counts of the open window apart from the
// committed ones so that an abort can drop them.
type floorCounter struct {
	o         floorOptions
	committed map[string]uint64
	window    map[string]floorCount // the window's new counts, by word

	mu  sync.Mutex
	err error // the first failed produce
}

// floorCount is a word's count in the open window and the changelog
// partition it is written to (the partition of the task that counts it).
type floorCount struct {
	n         uint64
	partition int32
}

func newFloorCounter(o floorOptions) *floorCounter {
	return &floorCounter{o: o, committed: map[string]uint64{}, window: map[string]floorCount{}}
}

type produceFunc func(context.Context, *kgo.Record, func(*kgo.Record, error))

func (f *floorCounter) promise(_ *kgo.Record, err error) {
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = fmt.Errorf("producing: %w", err)
		}
		f.mu.Unlock()
	}
}

func (f *floorCounter) produceErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// process handles one consumed record: a line is split and each word
// produced to the repartition topic; a word is counted.
func (f *floorCounter) process(r *kgo.Record, produce produceFunc) {
	if r.Topic != f.o.repartitionTopic() {
		forEachWord(r.Value, func(w []byte) {
			produce(context.Background(), &kgo.Record{Topic: f.o.repartitionTopic(), Partition: floorPartition(w, f.o.Partitions),
				Key: w, Value: w}, f.promise)
		})
		return
	}
	w := string(r.Key)
	c, ok := f.window[w]
	if !ok {
		c.n = f.committed[w]
	}
	c.n++
	c.partition = r.Partition
	f.window[w] = c
	if f.o.Emit == FloorPerUpdate {
		f.emit(r.Key, c, produce)
	}
}

// flushWindow writes the window's latest counts under FloorPerCommit.
func (f *floorCounter) flushWindow(produce produceFunc) {
	if f.o.Emit != FloorPerCommit {
		return
	}
	for w, c := range f.window {
		f.emit([]byte(w), c, produce)
	}
}

// emit writes a word's count to the output and to the changelog.
func (f *floorCounter) emit(word []byte, c floorCount, produce produceFunc) {
	v := binary.BigEndian.AppendUint64(nil, c.n)
	produce(context.Background(), &kgo.Record{Topic: f.o.Output, Partition: floorPartition(word, f.o.Partitions), Key: word, Value: v}, f.promise)
	produce(context.Background(), &kgo.Record{Topic: f.o.changelogTopic(), Partition: c.partition, Key: word, Value: v}, f.promise)
}

// endWindow keeps the window's counts if it committed, drops them if not.
func (f *floorCounter) endWindow(committed bool) {
	if committed {
		for w, c := range f.window {
			f.committed[w] = c.n
		}
	}
	clear(f.window)
}

// floorPartition is a word's partition in the repartition and output
// topics: any fixed function of the word does (one task counts it).
func floorPartition(word []byte, partitions int) int32 {
	h := fnv.New32a()
	h.Write(word)
	return int32(h.Sum32() % uint32(partitions))
}

// forEachWord calls fn with each run of ASCII letters and digits of line,
// lowercased in place (line is the consumed record's own buffer). The
// words of the generated input are a-z, so this is the plugins' and Kafka
// Streams' rule on it.
func forEachWord(line []byte, fn func([]byte)) {
	start := -1
	for i := 0; i <= len(line); i++ {
		word := false
		if i < len(line) {
			c := line[i]
			if c >= 'A' && c <= 'Z' {
				line[i] = c + 'a' - 'A'
				c = line[i]
			}
			word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		}
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			fn(line[start:i])
			start = -1
		}
	}
}
