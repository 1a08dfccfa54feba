// Command failover measures how long a stateful app takes to process again
// after one of its processes is SIGKILLed, with and without standby
// replicas. Run it through `make bench-failover`, which starts
// a Kafka broker of its own (scripts/failover.sh).
//
// For each state.standby_replicas setting given: a fresh app of three
// `wasmstream run` processes whose processor (internal/failover/plugin)
// keeps every record's value under its key, so the state is as large as
// the input's keys times their values (-state-bytes across -partitions
// tasks). Once the input is processed (and, with standbys, every copy has
// caught up), updates flow at -load records/s and one process is
// SIGKILLed. Measured per moved task, from the kill: when the group gave
// it to another process (the session timeout's share), when its committed
// offset moved again (it processes again), and how many changelog records
// its new owner restored. Then, in the same run, the restore rate of a
// moved task's store against a raw franz-go consume of its changelog
// partition.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/procs"
)

type options struct {
	Brokers        []string
	Work           string
	Wasmstream     string
	Plugin         string
	StateBytes     int64
	ValueSize      int
	Partitions     int
	Processes      int
	Standbys       []int
	Protocol       string
	SessionTimeout time.Duration
	Load           int
}

func main() {
	var o options
	var brokers, standbys string
	flag.StringVar(&brokers, "brokers", "127.0.0.1:19492", "the Kafka brokers (comma-separated)")
	flag.StringVar(&o.Work, "work", ".cache/failover/run", "configs, state directories and logs")
	flag.StringVar(&o.Wasmstream, "wasmstream", "bin/wasmstream", "the wasmstream binary")
	flag.StringVar(&o.Plugin, "plugin", "bin/plugins/failover.wasm", "the processor (internal/failover/plugin)")
	flag.Int64Var(&o.StateBytes, "state-bytes", 1<<30, "bytes of values in the app's state, across its tasks")
	flag.IntVar(&o.ValueSize, "value-size", 1024, "bytes per value")
	flag.IntVar(&o.Partitions, "partitions", 6, "input partitions (tasks)")
	flag.IntVar(&o.Processes, "processes", 3, "wasmstream processes")
	flag.StringVar(&standbys, "standbys", "0,1", "state.standby_replicas settings to measure, in order")
	flag.StringVar(&o.Protocol, "protocol", "classic", "kafka.group_protocol: classic or consumer")
	flag.DurationVar(&o.SessionTimeout, "session-timeout", 10*time.Second, "kafka.session_timeout (classic; KIP-848 groups use the broker's)")
	flag.IntVar(&o.Load, "load", 300, "updates per second while the process is killed")
	flag.Parse()
	o.Brokers = strings.Split(brokers, ",")
	for _, s := range strings.Split(standbys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "failover: -standbys %q: want numbers like 0,1\n", standbys)
			os.Exit(2)
		}
		o.Standbys = append(o.Standbys, n)
	}
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
	var results []result
	for _, n := range o.Standbys {
		r, err := measure(o, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "failover: standby_replicas %d: %v\n", n, err)
			os.Exit(1)
		}
		results = append(results, r)
		fmt.Println(r.String())
	}
	fmt.Println()
	fmt.Println(table(o, results))
}

// result is one measurement.
type result struct {
	standbys             int
	stateBytes           int64 // the processes' state directories after loading, summed
	load                 time.Duration
	moved                []int32
	assigned             time.Duration // kill to the last moved task given to another process
	resumed              time.Duration // kill to the last moved task's committed offset moving
	restored             int64         // changelog records restored for the moved tasks
	restoreRate, rawRate float64
}

func (r result) String() string {
	return fmt.Sprintf("standby_replicas %d: state %.2f GiB on disk (all processes), loaded in %v; tasks %v moved; reassigned after %v, processing again after %v; %d changelog records restored; restore %.0f records/s against a raw consume of %.0f (%.2fx)",
		r.standbys, float64(r.stateBytes)/(1<<30), r.load.Round(time.Second), r.moved, r.assigned.Round(10*time.Millisecond),
		r.resumed.Round(10*time.Millisecond), r.restored, r.restoreRate, r.rawRate, ratio(r.restoreRate, r.rawRate))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func table(o options, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| standby_replicas | group protocol | moved tasks | reassigned after (session timeout %v) | processing again after | changelog records restored | restore rate / raw consume |\n", o.SessionTimeout)
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		rate := "—"
		if r.rawRate > 0 && r.restoreRate > 0 {
			rate = fmt.Sprintf("%.0f / %.0f = %.2fx", r.restoreRate, r.rawRate, ratio(r.restoreRate, r.rawRate))
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %v | %v | %d | %s |\n", r.standbys, o.Protocol, len(r.moved),
			r.assigned.Round(10*time.Millisecond), r.resumed.Round(10*time.Millisecond), r.restored, rate)
	}
	return b.String()
}

// measure runs one app with standbys copies and kills one of its processes.
func measure(o options, standbys int) (result, error) {
	res := result{standbys: standbys}
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	app := fmt.Sprintf("failover-%d-%d", standbys, time.Now().Unix())
	in := app + "-in"
	if _, err := adm.CreateTopic(ctx, int32(o.Partitions), 1, nil, in); err != nil {
		return res, fmt.Errorf("creating %s: %w", in, err)
	}
	keys := int(o.StateBytes / int64(o.ValueSize))
	start := time.Now()
	if err := produce(ctx, cl, in, keys, o.ValueSize, 0, keys); err != nil {
		return res, err
	}
	fmt.Printf("standby_replicas %d: produced %d records of %d bytes in %v\n", standbys, keys, o.ValueSize, time.Since(start).Round(time.Second))

	var ps []*procs.Proc
	defer func() {
		for _, p := range ps {
			if p.Running() {
				_ = p.Stop(time.Minute)
			}
		}
	}()
	for i := range o.Processes {
		port, err := procs.FreePort()
		if err != nil {
			return res, err
		}
		name := fmt.Sprintf("p%d", i)
		p := &procs.Proc{Name: name, Config: filepath.Join(o.Work, app+"-"+name+".yaml"),
			StateDir: filepath.Join(o.Work, app+"-state-"+name), Admin: "127.0.0.1:" + strconv.Itoa(port)}
		if err := writeConfig(o, p, app, in, standbys); err != nil {
			return res, err
		}
		if err := p.Start(o.Wasmstream, filepath.Join(o.Work, app+"-"+name+".log"), 2*time.Minute); err != nil {
			return res, err
		}
		ps = append(ps, p)
	}
	if err := waitCommitted(ctx, adm, app, in, 30*time.Minute); err != nil {
		return res, err
	}
	if standbys > 0 {
		if err := waitStandbys(ps, o.Partitions*standbys, 30*time.Minute); err != nil {
			return res, err
		}
	}
	res.load = time.Since(start)
	for _, p := range ps {
		res.stateBytes += procs.DirSize(p.StateDir)
	}

	// Updates flow while the victim dies.
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		steady(lctx, cl, in, keys, o.ValueSize, o.Load)
	}()
	defer func() { stopLoad(); wg.Wait() }()
	if err := waitSettled(ctx, adm, app, in, o.Protocol, o.Partitions, 5*time.Minute); err != nil {
		return res, err
	}

	victim := ps[0]
	owned, err := ownedBy(ctx, adm, app, in, victim.Name, o.Protocol)
	if err != nil {
		return res, err
	}
	if len(owned) == 0 {
		return res, fmt.Errorf("%s owns no partition of %s", victim.Name, in)
	}
	res.moved = owned
	killed := time.Now()
	victim.Kill()
	// The moved tasks' committed offsets once the victim is gone (read
	// after the kill: it commits every 100 ms until then, and a commit it
	// had sent may land just after).
	time.Sleep(500 * time.Millisecond)
	before, err := committed(ctx, adm, app, in)
	if err != nil {
		return res, err
	}
	assigned := map[int32]time.Duration{}
	resumed := map[int32]time.Duration{}
	deadline := killed.Add(10 * time.Minute)
	for len(resumed) < len(owned) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("tasks %v did not process again within 10 minutes of the kill (resumed: %v)", owned, resumed)
		}
		time.Sleep(100 * time.Millisecond)
		at := time.Since(killed)
		if len(assigned) < len(owned) {
			if who, err := owners(ctx, adm, app, in, o.Protocol); err == nil {
				for _, p := range owned {
					if w, ok := who[p]; ok && w != victim.Name && assigned[p] == 0 {
						assigned[p] = at
					}
				}
			}
		}
		now, err := committed(ctx, adm, app, in)
		if err != nil {
			continue
		}
		for _, p := range owned {
			if _, done := resumed[p]; !done && now[p] > before[p] {
				resumed[p] = at
			}
		}
	}
	for _, p := range owned {
		res.assigned = max(res.assigned, assigned[p])
		res.resumed = max(res.resumed, resumed[p])
	}
	// Records restored for the moved tasks, and their rate.
	for _, p := range ps[1:] {
		n, rate := restoredFor(p, owned)
		res.restored += n
		res.restoreRate = max(res.restoreRate, rate)
	}
	if res.restored > 1000 {
		raw, err := rawConsume(ctx, o.Brokers, app+"-latest-changelog", owned[0])
		if err != nil {
			return res, err
		}
		res.rawRate = raw
	} else {
		res.restoreRate = 0
	}
	return res, nil
}

func writeConfig(o options, p *procs.Proc, app, in string, standbys int) error {
	cfg := fmt.Sprintf(`app_id: %s
guarantee: exactly_once
kafka:
  brokers: [%s]
  client_id: %s
  commit_interval: 100ms
  session_timeout: %s
  group_protocol: %s
  create_topics: true
processors:
  - name: latest
    plugin: %s
    inputs: [%s]
    stores: [latest]
state:
  dir: %s
  standby_replicas: %d
admin:
  listen: %s
log:
  level: info
`, app, strings.Join(o.Brokers, ", "), p.Name, o.SessionTimeout, o.Protocol, abs(o.Plugin), in, abs(p.StateDir), standbys, p.Admin)
	return os.WriteFile(p.Config, []byte(cfg), 0o644)
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// produce writes keys [from, to) with random values of size bytes.
func produce(ctx context.Context, cl *kgo.Client, topic string, keys, size, from, to int) error {
	rng := rand.New(rand.NewPCG(uint64(from), 7))
	var first error
	var mu sync.Mutex
	for i := from; i < to; i++ {
		v := make([]byte, size)
		for j := 0; j+8 <= size; j += 8 {
			u := rng.Uint64()
			for k := range 8 {
				v[j+k] = byte(u >> (8 * k))
			}
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i%keys)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return first
}

// steady updates random keys at rate per second until ctx ends.
func steady(ctx context.Context, cl *kgo.Client, topic string, keys, size, rate int) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(99, 7))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range rate / 10 {
			v := make([]byte, size)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(rng.IntN(keys))), Value: v}, nil)
		}
	}
}

func committed(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(cctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

func waitCommitted(ctx context.Context, adm *kadm.Client, group, topic string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			c, err := committed(ctx, adm, group, topic)
			if err == nil {
				done := true
				ends.Each(func(l kadm.ListedOffset) {
					if c[l.Partition] < l.Offset {
						done = false
					}
				})
				if done {
					return nil
				}
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("%s not processed within %v", topic, timeout)
}

// waitStandbys waits until the processes keep want standbys in all, each
// caught up at its latest round.
func waitStandbys(ps []*procs.Proc, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, behind := 0, int64(0)
		for _, p := range ps {
			for _, m := range scrape(p, "wasmstream_standby_lag_records") {
				n++
				behind += int64(m.value)
			}
		}
		if n == want && behind == 0 {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("the standbys did not catch up within %v", timeout)
}

// owners maps each partition of topic to the client id (process name) of
// its member.
func owners(ctx context.Context, adm *kadm.Client, group, topic, protocol string) (map[int32]string, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out := map[int32]string{}
	if protocol == "consumer" {
		gs, err := adm.DescribeConsumerGroups(dctx, group)
		if err != nil {
			return nil, err
		}
		for _, m := range gs[group].Members {
			for p := range m.Assignment[topic] {
				out[p] = m.ClientID
			}
		}
		return out, nil
	}
	gs, err := adm.DescribeGroups(dctx, group)
	if err != nil {
		return nil, err
	}
	for _, m := range gs[group].Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == topic {
					for _, p := range t.Partitions {
						out[p] = m.ClientID
					}
				}
			}
		}
	}
	return out, nil
}

// waitSettled waits until every partition of topic has an owner and the
// owners have not changed for 5 s (under KIP-848 the broker moves
// partitions for a while after members join, and a kill must not land in
// the middle of a move: the benchmark would measure the move).
func waitSettled(ctx context.Context, adm *kadm.Client, group, topic, protocol string, partitions int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last map[int32]string
	since := time.Now()
	for time.Now().Before(deadline) {
		now, err := owners(ctx, adm, group, topic, protocol)
		if err == nil && len(now) == partitions {
			if !maps.Equal(now, last) {
				last, since = now, time.Now()
			} else if time.Since(since) >= 5*time.Second {
				return nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the group's assignment of %s did not settle within %v", topic, timeout)
}

func ownedBy(ctx context.Context, adm *kadm.Client, group, topic, name, protocol string) ([]int32, error) {
	all, err := owners(ctx, adm, group, topic, protocol)
	if err != nil {
		return nil, err
	}
	var out []int32
	for p, o := range all {
		if o == name {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// metric is one sample of a scraped family.
type metric struct {
	labels string
	value  float64
}

// scrape reads the samples of family from p's /metrics.
func scrape(p *procs.Proc, family string) []metric {
	code, body := procs.HTTPGet("http://"+p.Admin+"/metrics", 5*time.Second)
	if code != 200 {
		return nil
	}
	var out []metric
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, family+"{") && !strings.HasPrefix(line, family+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out = append(out, metric{labels: line[len(family):i], value: v})
	}
	return out
}

// restoredFor sums, on p, the records the latest restores of the tasks of
// partitions applied, and the best rate among them.
func restoredFor(p *procs.Proc, partitions []int32) (int64, float64) {
	var n int64
	var rate float64
	rates := scrape(p, "wasmstream_restore_records_per_second")
	for _, m := range scrape(p, "wasmstream_restore_records") {
		if !strings.Contains(m.labels, `store="latest"`) {
			continue
		}
		for _, part := range partitions {
			if strings.Contains(m.labels, "/"+strconv.Itoa(int(part))+`"`) {
				n += int64(m.value)
				for _, r := range rates {
					if r.labels == m.labels {
						rate = max(rate, r.value)
					}
				}
			}
		}
	}
	return n, rate
}

// rawConsume reads a partition of topic from its start to its end with a
// plain franz-go consumer, read_committed, and returns records per second.
func rawConsume(ctx context.Context, brokers []string, topic string, partition int32) (float64, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return 0, err
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok || end.Err != nil {
		return 0, fmt.Errorf("no end offset for %s/%d", topic, partition)
	}
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxPartitionBytes(8<<20), kgo.FetchMaxBytes(16<<20))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var n int64
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		fs := cl.PollFetches(cctx)
		if err := fs.Err0(); err != nil {
			return 0, err
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			n++
			last = r.Offset
		})
		if last+2 >= end.Offset { // the last record, or the marker after it
			break
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
