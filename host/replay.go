package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/replay"
)

// ReplayOptions say what Replay runs over what.
type ReplayOptions struct {
	Processor string
	// Plugin is the module to run; nil: the config file's plugin. It is
	// checked as a deploy checks it (size, runtime.trusted_keys, compile,
	// instantiate with the processor's config and limits).
	Plugin []byte
	// From and To bound the offsets read in every partition of every
	// input: From <= offset < To; From 0 is each partition's start, To -1
	// its last stable offset when the replay starts (later ones are
	// clamped to it).
	From, To int64
	// FromTime and ToTime, when set, bound the range by time as well: from
	// the first record at or after FromTime, to before the first at or
	// after ToTime (by the partition's offsets, as Kafka's offset-for-time
	// lookup answers).
	FromTime, ToTime time.Time
	// Partitions are the partition numbers (tasks) to replay; nil: all.
	Partitions []int32
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	Tasks                    int // partitions replayed
	Records, Emitted, Failed int
}

// Replay runs a version of a processor's plugin over a range of its
// input and writes what it emits to w, one JSON line per emitted record
// or failed input record (`wasmstream replay`). It is offline from the
// app: its own client, no consumer group, nothing committed, produced or
// stored; each task starts from empty state in memory. The same range,
// module and config give byte-identical output (RATIONALE.md, "Replay").
// It refuses a plugin that uses timers or the commit hook, and a
// processor with tables.
func Replay(ctx context.Context, cfg *Config, opts ReplayOptions, w io.Writer, log *slog.Logger) (ReplayResult, error) {
	var res ReplayResult
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.Clone()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	var pc *ProcessorConfig
	var names []string
	for i := range cfg.Processors {
		names = append(names, cfg.Processors[i].Name)
		if cfg.Processors[i].Name == opts.Processor {
			pc = &cfg.Processors[i]
		}
	}
	if pc == nil {
		return res, fmt.Errorf("unknown processor %q; the config's processors: %v", opts.Processor, names)
	}
	if len(pc.Tables)+len(pc.TaskTables) > 0 {
		return res, fmt.Errorf("processor %q reads tables, which replay does not load", pc.Name)
	}
	if opts.From < 0 || (opts.To >= 0 && opts.To < opts.From) {
		return res, fmt.Errorf("replay: the range [%d, %d) is not a range of offsets", opts.From, opts.To)
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return res, errors.New("kafka.brokers is empty: replay reads the input from the brokers the app runs against")
	}
	lim, err := cfg.pluginLimits()
	if err != nil {
		return res, err
	}
	spec := cfg.pluginSpec(pc)
	wasm := opts.Plugin
	if wasm == nil {
		if wasm, err = os.ReadFile(spec.Path); err != nil {
			return res, fmt.Errorf("plugin: %w", err)
		}
	}
	if err := lim.CheckSize(wasm); err != nil {
		return res, err
	}
	p, err := plugin.New(ctx, spec, lim, log)
	if err != nil {
		return res, err
	}
	defer p.RT.Close(context.WithoutCancel(ctx))
	mod, err := p.Compile(ctx, wasm)
	if err != nil {
		return res, fmt.Errorf("processor %q cannot run this module: %w", pc.Name, err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if err := replay.Check(mod.Info()); err != nil {
		return res, err
	}

	kafka, err := cfg.kafkaClient(cfg.Kafka.Brokers, log)
	if err != nil {
		return res, err
	}
	if err := cfg.reachKafka(ctx, kafka, cfg.Kafka.ConnectTimeout, log); err != nil {
		return res, err
	}
	inputs := cfg.inputTopics(pc)
	ranges, err := replayRanges(ctx, kafka, inputs, opts)
	if err != nil {
		return res, err
	}
	for _, part := range sortedPartitions(ranges) {
		recs, err := readRange(ctx, kafka, inputs, part, ranges[part])
		if err != nil {
			return res, err
		}
		c, err := replay.Task(ctx, p, mod, recs, w)
		res.Tasks++
		res.Records, res.Emitted, res.Failed = res.Records+c.Records, res.Emitted+c.Emitted, res.Failed+c.Failed
		if err != nil {
			return res, fmt.Errorf("partition %d: %w", part, err)
		}
	}
	return res, nil
}

// offsetRange is [lo, hi) of one input partition.
type offsetRange struct{ lo, hi int64 }

// replayRanges are, per partition number, the range of each input
// topic's partition to read: opts' range within the partition's start
// and last stable offset.
func replayRanges(ctx context.Context, kafka kclient.Config, inputs []string, opts ReplayOptions) (map[int32]map[string]offsetRange, error) {
	cl, err := kafka.NewClient(kgo.MetadataMinAge(kclient.MetadataMinAge))
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, inputs...)
	if err != nil {
		return nil, fmt.Errorf("listing the inputs' start offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, inputs...) // last stable offsets
	if err != nil {
		return nil, fmt.Errorf("listing the inputs' last stable offsets: %w", err)
	}
	atTime := func(t time.Time) (kadm.ListedOffsets, error) {
		if t.IsZero() {
			return nil, nil
		}
		l, err := adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), inputs...)
		if err != nil {
			return nil, fmt.Errorf("listing the inputs' offsets at %s: %w", t.Format(time.RFC3339), err)
		}
		return l, nil
	}
	fromTime, err := atTime(opts.FromTime)
	if err != nil {
		return nil, err
	}
	toTime, err := atTime(opts.ToTime)
	if err != nil {
		return nil, err
	}
	out := map[int32]map[string]offsetRange{}
	var lerr error
	starts.Each(func(s kadm.ListedOffset) {
		e, ok := stable.Lookup(s.Topic, s.Partition)
		if s.Err != nil || !ok || e.Err != nil {
			if lerr == nil {
				lerr = fmt.Errorf("input %s partition %d: offsets: %v %v", s.Topic, s.Partition, s.Err, e.Err)
			}
			return
		}
		if opts.Partitions != nil && !slices.Contains(opts.Partitions, s.Partition) {
			return
		}
		r := offsetRange{lo: max(opts.From, s.Offset), hi: e.Offset}
		if opts.To >= 0 {
			r.hi = min(r.hi, opts.To)
		}
		if o, ok := fromTime.Lookup(s.Topic, s.Partition); ok && o.Err == nil {
			r.lo = max(r.lo, o.Offset)
		}
		if o, ok := toTime.Lookup(s.Topic, s.Partition); ok && o.Err == nil {
			r.hi = min(r.hi, o.Offset)
		}
		if out[s.Partition] == nil {
			out[s.Partition] = map[string]offsetRange{}
		}
		out[s.Partition][s.Topic] = r
	})
	if lerr != nil {
		return nil, lerr
	}
	for _, part := range opts.Partitions {
		if out[part] == nil {
			return nil, fmt.Errorf("partition %d: no input has it", part)
		}
	}
	return out, nil
}

func sortedPartitions(m map[int32]map[string]offsetRange) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// replayReadTimeout bounds reading one task's range once the brokers
// answered.
const replayReadTimeout = 2 * time.Minute

// readRange reads partition part of each input over its range, committed
// records only. A partition is read once a record or transaction marker
// at or past the range's last offset was seen (the markers are kept for
// that, never handed on).
func readRange(ctx context.Context, kafka kclient.Config, inputs []string, part int32, ranges map[string]offsetRange) ([]replay.Input, error) {
	index := map[string]uint32{}
	for i, t := range inputs {
		if _, ok := index[t]; !ok {
			index[t] = uint32(i)
		}
	}
	consume := map[string]map[int32]kgo.Offset{}
	left := map[string]bool{}
	for t, r := range ranges {
		if r.lo < r.hi {
			consume[t] = map[int32]kgo.Offset{part: kgo.NewOffset().At(r.lo)}
			left[t] = true
		}
	}
	if len(consume) == 0 {
		return nil, nil
	}
	cl, err := kafka.NewClient(kgo.ConsumePartitions(consume), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.MetadataMinAge(kclient.MetadataMinAge))
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, replayReadTimeout)
	defer cancel()
	var out []replay.Input
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("partition %d: reading the input: %w (still reading %v)", part, err, left)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("input %s partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			rg := ranges[r.Topic]
			if r.Offset >= rg.hi-1 {
				delete(left, r.Topic)
			}
			if r.Attrs.IsControl() || r.Offset >= rg.hi {
				return
			}
			in := replay.Input{Topic: r.Topic, Index: index[r.Topic], Partition: r.Partition, Offset: r.Offset,
				Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				in.Headers = append(in.Headers, abi.Header{Key: h.Key, Value: h.Value})
			}
			out = append(out, in)
		})
	}
	return out, nil
}
