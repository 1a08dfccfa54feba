package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminTimeout bounds every single admin request of the harness.
const adminTimeout = 15 * time.Second

func newClient(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("wasmstream-benchkit")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", strings.Join(brokers, ","), err)
	}
	return cl, nil
}

// createTopic creates topic with the given partition count and the broker's
// default replication factor. An existing topic is an error: every topic the
// harness makes has a name of this session, so one that exists is not ours.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	return createTopicConfigs(ctx, adm, topic, partitions, nil)
}

// createTopicConfigs is createTopic with topic configs (nil: the broker's
// defaults).
func createTopicConfigs(ctx context.Context, adm *kadm.Client, topic string, partitions int, configs map[string]*string) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, int32(partitions), -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating topic %s (%d partitions): %w", topic, partitions, err)
	}
	// A real broker creates topics asynchronously: wait until metadata
	// shows every partition with a leader, so no client of the run starts
	// on a topic that is not there yet.
	for {
		md, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if d, ok := md[topic]; ok && d.Err == nil && len(d.Partitions) == partitions {
				ready := true
				for _, p := range d.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s created but not ready within %s", topic, adminTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopics deletes every topic whose name starts with prefix (not
// empty), and topics; the runs' topics are large, and the broker's disk is
// shared by all runs of a session.
func deleteTopics(ctx context.Context, adm *kadm.Client, prefix string, topics ...string) error {
	if prefix == "" {
		return errors.New("deleteTopics: an empty prefix would name every topic")
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("listing topics to delete %s* and %s: %w", prefix, strings.Join(topics, ", "), err)
	}
	var del []string
	for _, t := range all.Names() {
		if strings.HasPrefix(t, prefix) || slices.Contains(topics, t) {
			del = append(del, t)
		}
	}
	if len(del) == 0 {
		return nil
	}
	resps, err := adm.DeleteTopics(ctx, del...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("deleting topics %s: %w", strings.Join(del, ", "), err)
	}
	return nil
}

// produceInput writes every line of g to topic, each to its own partition,
// at rate lines per second (0: as fast as the client takes them), and
// returns the end offset of each partition afterwards and when the last
// line was acknowledged.
func produceInput(ctx context.Context, brokers []string, topic string, g *Generator, rate float64, timeout time.Duration) (map[int32]int64, time.Time, error) {
	cl, err := newClient(brokers,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var (
		mu       sync.Mutex
		firstErr error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	start := time.Now()
	for n := 0; ; n++ {
		l, ok := g.Next()
		if !ok {
			break
		}
		if rate > 0 {
			// Line n is due at n/rate; sleeps shorter than a
			// millisecond would oversleep, so lines that fall due
			// within one go out together.
			due := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
			if d := time.Until(due); d > time.Millisecond {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		cl.Produce(ctx, &kgo.Record{Partition: l.Partition, Value: []byte(l.Text)}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("writing the input to %s (bound %s): %w", topic, timeout, err)
	}
	last := time.Now()
	mu.Lock()
	err = firstErr
	mu.Unlock()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("writing the input to %s: %w", topic, err)
	}
	ends, err := listEnds(ctx, kadm.NewClient(cl), topic)
	if err != nil {
		return nil, time.Time{}, err
	}
	return ends[topic], last, nil
}

// inputBound bounds the writing of lines lines at rate (0: as fast as
// possible): 1 minute plus 100 us per line (110 s for the default 500,000
// lines, which take 2-5 s on a loaded 2-core machine), plus their time at
// the rate.
func inputBound(lines int, rate float64) time.Duration {
	d := time.Minute + time.Duration(lines)*100*time.Microsecond
	if rate > 0 {
		d += time.Duration(float64(lines) / rate * float64(time.Second))
	}
	return d
}

// listEnds lists the end offsets (high watermarks) of topics, of every
// topic if none is named.
func listEnds(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	ends := make(map[string]map[int32]int64)
	var perr error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			// A topic created or deleted since the metadata was read;
			// the next sample sees it settled.
			if perr == nil && len(topics) > 0 {
				perr = fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			}
			return
		}
		if ends[o.Topic] == nil {
			ends[o.Topic] = make(map[int32]int64)
		}
		ends[o.Topic][o.Partition] = o.Offset
	})
	return ends, perr
}

// groupOffsets lists the committed offsets of group; a group that does not
// exist yet has none.
func groupOffsets(ctx context.Context, adm *kadm.Client, group string) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	resps, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	out := make(map[string]map[int32]int64)
	resps.Each(func(o kadm.OffsetResponse) {
		if o.At < 0 {
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = make(map[int32]int64)
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out, nil
}

// Watch is what a run's progress is sampled from.
type Watch struct {
	Adm       *kadm.Client
	Group     string          // the app's consumer group (its app id)
	Input     string          // the input topic
	InputEnds map[int32]int64 // its end offsets, fixed before the run
	Output    string          // the output topic
	Prefix    string          // "<app id>-": the app's internal topics
}

// Sample takes one Sample of the run.
func (w *Watch) Sample(ctx context.Context) (Sample, error) {
	s := Sample{At: time.Now()}
	ends, err := listEnds(ctx, w.Adm)
	if err != nil {
		return s, err
	}
	committed, err := groupOffsets(ctx, w.Adm, w.Group)
	if err != nil {
		return s, err
	}
	return summarize(s.At, w, ends, committed), nil
}

// summarize computes a Sample from the end offsets of every topic and the
// group's committed offsets (the rules are on Sample's fields).
func summarize(at time.Time, w *Watch, ends, committed map[string]map[int32]int64) Sample {
	s := Sample{At: at}
	for t, ps := range ends {
		if t == w.Output || strings.HasPrefix(t, w.Prefix) {
			for _, end := range ps {
				s.Progress += end
			}
		}
	}
	for p, end := range w.InputEnds {
		s.InputLag += end - committed[w.Input][p] // no commit: 0
	}
	for t, ps := range committed {
		for p, c := range ps {
			s.Progress += c
			if t == w.Input {
				continue
			}
			if b := ends[t][p] - c - 1; b > 0 {
				s.Backlog += b
			}
		}
	}
	return s
}

// readOutput reads topic from its start to its last stable offset with
// read_committed and returns what it holds. It returns an error if the
// read does not finish within timeout.
func readOutput(ctx context.Context, brokers []string, topic string, timeout time.Duration) (*Output, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admCl, err := newClient(brokers)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	// ListCommittedOffsets: the last stable offset, what read_committed can
	// reach. The processes have stopped, so no transaction holds it back.
	lso, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			starts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	out := NewOutput()
	if len(want) == 0 {
		return out, nil
	}
	// Control records (transaction markers) are kept so that a partition
	// whose last offset is a marker is seen to be read to its end.
	cl, err := newClient(brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(64<<20),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var left []string
			for p, end := range want {
				left = append(left, fmt.Sprintf("partition %d below offset %d", p, end))
			}
			return nil, fmt.Errorf("reading %s: not finished within %s (%s)", topic, timeout, strings.Join(left, ", "))
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("reading %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := want[r.Partition]
			if !reading || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				out.Add(r.Key, r.Value)
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}
