package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/engine"
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
	// State is where each task's state starts: ReplayStateEmpty ("" too)
	// or ReplayStateCurrent.
	State ReplayState
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	Tasks                    int // partitions replayed
	Records, Emitted, Failed int // Failed: records and timer firings
	Fired                    int // timer firings
}

// ReplayState is where a replayed task's state starts.
type ReplayState string

const (
	// ReplayStateEmpty: every task starts from empty stores (the default).
	ReplayStateEmpty ReplayState = "empty"
	// ReplayStateCurrent: every task starts from a copy of its stores in
	// the app's state directory (Config.StateDir), opened read-only
	// (OpenStateReadOnly) and never written to. The app must be stopped
	// on this machine: a running process holds the directory.
	ReplayStateCurrent ReplayState = "current"
)

// replayStateMax bounds the bytes of keys and values a task's starting
// state may hold with ReplayStateCurrent: replay keeps it in memory (twice
// with a diff).
const replayStateMax = 1 << 30

// Replay runs a version of a processor's plugin over a range of its
// input and writes what it emits to w, one JSON line per emitted record
// or failed input record (`wasmstream replay`). It is offline from the
// app: its own client, no consumer group, nothing committed, produced or
// stored; each task's state is in memory, starting empty or from the
// app's local state (opts.State). The same range, module, config and
// starting state give byte-identical output (RATIONALE.md, "Replay").
// Timers fire after each record over the records' time (abi/ABI.md
// section 8.1); it refuses a plugin that marks keys for the commit hook,
// and a processor with tables.
func Replay(ctx context.Context, cfg *Config, opts ReplayOptions, w io.Writer, log *slog.Logger) (ReplayResult, error) {
	var res ReplayResult
	rs, err := openReplay(ctx, cfg, opts, log)
	if err != nil {
		return res, err
	}
	defer rs.close(ctx)
	mod, err := rs.compile(ctx, opts.Plugin)
	if err != nil {
		return res, err
	}
	defer mod.Close(context.WithoutCancel(ctx))
	err = rs.eachTask(ctx, func(part int32, recs []replay.Input, start *replay.State) error {
		c, err := replay.Task(ctx, rs.p, mod, recs, start, w)
		res.Tasks++
		res.Records, res.Emitted, res.Failed = res.Records+c.Records, res.Emitted+c.Emitted, res.Failed+c.Failed
		res.Fired += c.Fired
		return err
	})
	return res, err
}

// ReplayDiffTask is what a diff found in one task (partition). Every
// record is in exactly one of Matching, Differing and the failures:
// Records = Matching + Differing + Failed + AgainstFailed - FailedBoth.
type ReplayDiffTask struct {
	Partition int32 `json:"partition"`
	Records   int   `json:"records"`
	// Matching: both versions processed the record and emitted the same
	// records (output, key, value, headers but wasmstream-version, in
	// order). Differing: both processed it, the emits differ.
	Matching  int `json:"matching"`
	Differing int `json:"differing"`
	// Failed and AgainstFailed count the records each version failed
	// (Failed: the replayed version, AgainstFailed: the one diffed
	// against); FailedBoth those both failed. A failure on one side only
	// is a difference, and sampled.
	Failed        int `json:"failed"`
	AgainstFailed int `json:"against_failed"`
	FailedBoth    int `json:"failed_both"`
}

// Identical says whether the versions behaved alike on every record: the
// same emits, or both failed.
func (c ReplayDiffTask) Identical() bool {
	return c.Differing == 0 && c.Failed == c.FailedBoth && c.AgainstFailed == c.FailedBoth
}

// ReplayDiffSample is an input record on which two versions differ: where
// it was read, and each version's emits or failure.
type ReplayDiffSample struct {
	In      ReplaySource   `json:"in"`
	Version ReplayDiffSide `json:"version"`
	Against ReplayDiffSide `json:"against"`
}

// ReplaySource is where an input record was read.
type ReplaySource struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// ReplayDiffSide is one version's behaviour on a sampled record: its
// emits, or its failure (Error set, Emits empty).
type ReplayDiffSide struct {
	Emits []ReplayEmit `json:"emits"`
	Error string       `json:"error,omitempty"`
}

// ReplayEmit is a record a version emitted, as `wasmstream replay` writes
// it (without the version header, which only the runner adds).
type ReplayEmit struct {
	Output    string         `json:"output"`
	Topic     string         `json:"topic"`
	Key       []byte         `json:"key,omitempty"`   // base64 in JSON; absent: a null key
	Value     []byte         `json:"value,omitempty"` // base64 in JSON; absent: a null value
	Headers   []ReplayHeader `json:"headers,omitempty"`
	Timestamp int64          `json:"timestamp"` // as emitted
	Partition int32          `json:"partition"` // as emitted; -1: by key
}

// ReplayHeader is an emitted record's header.
type ReplayHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

func replayTask(c replay.DiffCounts) ReplayDiffTask {
	return ReplayDiffTask{Partition: c.Partition, Records: c.Records, Matching: c.Matching, Differing: c.Differing,
		Failed: c.Failed, AgainstFailed: c.AgainstFailed, FailedBoth: c.FailedBoth}
}

func replaySample(s replay.Sample) ReplayDiffSample {
	side := func(d replay.Side) ReplayDiffSide {
		out := ReplayDiffSide{Emits: []ReplayEmit{}, Error: d.Error}
		for _, l := range d.Emits {
			e := ReplayEmit{Output: l.Output, Topic: l.Topic, Key: l.Key, Value: l.Value}
			if l.Timestamp != nil {
				e.Timestamp = *l.Timestamp
			}
			if l.Partition != nil {
				e.Partition = *l.Partition
			}
			for _, h := range l.Headers {
				e.Headers = append(e.Headers, ReplayHeader{Key: h.Key, Value: h.Value})
			}
			out.Emits = append(out.Emits, e)
		}
		return out
	}
	return ReplayDiffSample{In: ReplaySource(s.In), Version: side(s.Version), Against: side(s.Against)}
}

// ReplayDiffResult is what ReplayDiff found.
type ReplayDiffResult struct {
	// Total sums Tasks (its Partition is -1).
	Total ReplayDiffTask   `json:"total"`
	Tasks []ReplayDiffTask `json:"tasks"`
	// Samples are the first differing records, task after task, at most
	// the maximum asked for.
	Samples []ReplayDiffSample `json:"samples"`
}

// Identical says whether the two versions behaved alike on every record.
func (r ReplayDiffResult) Identical() bool { return r.Total.Identical() }

// ReplayDiff runs two versions of a processor's plugin, opts.Plugin and
// against (nil: the config file's plugin), over the same range of its
// input, each task of each version from the same starting state, and
// compares their emits record by record as a shadow run does (output,
// key, value and headers other than the version header; RATIONALE.md,
// "Replay"). It keeps the first maxSamples differing records. Offline
// and deterministic as Replay.
func ReplayDiff(ctx context.Context, cfg *Config, opts ReplayOptions, against []byte, maxSamples int, log *slog.Logger) (ReplayDiffResult, error) {
	res := ReplayDiffResult{Total: ReplayDiffTask{Partition: -1}, Tasks: []ReplayDiffTask{}, Samples: []ReplayDiffSample{}}
	rs, err := openReplay(ctx, cfg, opts, log)
	if err != nil {
		return res, err
	}
	defer rs.close(ctx)
	mod, err := rs.compile(ctx, opts.Plugin)
	if err != nil {
		return res, err
	}
	defer mod.Close(context.WithoutCancel(ctx))
	other, err := rs.compile(ctx, against)
	if err != nil {
		return res, fmt.Errorf("the version to diff against: %w", err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	err = rs.eachTask(ctx, func(part int32, recs []replay.Input, start *replay.State) error {
		c, samples, err := replay.Diff(ctx, rs.p, mod, other, recs, start, maxSamples-len(res.Samples))
		c.Partition = part
		res.Tasks = append(res.Tasks, replayTask(c))
		for _, sm := range samples {
			res.Samples = append(res.Samples, replaySample(sm))
		}
		t := &res.Total
		t.Records += c.Records
		t.Matching += c.Matching
		t.Differing += c.Differing
		t.Failed += c.Failed
		t.AgainstFailed += c.AgainstFailed
		t.FailedBoth += c.FailedBoth
		return err
	})
	return res, err
}

// replaySetup is what a replay runs against: the processor, its input
// ranges and, with ReplayStateCurrent, the app's state read-only.
type replaySetup struct {
	cfg    *Config
	pc     *ProcessorConfig
	lim    plugin.Limits
	p      *plugin.Processor
	kafka  kclient.Config
	inputs []string
	ranges map[int32]map[string]offsetRange
	state  *StateReader
}

func openReplay(ctx context.Context, cfg *Config, opts ReplayOptions, log *slog.Logger) (_ *replaySetup, err error) {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.Clone()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rs := &replaySetup{cfg: cfg}
	var names []string
	for i := range cfg.Processors {
		names = append(names, cfg.Processors[i].Name)
		if cfg.Processors[i].Name == opts.Processor {
			rs.pc = &cfg.Processors[i]
		}
	}
	pc := rs.pc
	if pc == nil {
		return nil, fmt.Errorf("unknown processor %q; the config's processors: %v", opts.Processor, names)
	}
	if len(pc.Tables)+len(pc.TaskTables) > 0 {
		return nil, fmt.Errorf("processor %q reads tables, which replay does not load", pc.Name)
	}
	if opts.From < 0 || (opts.To >= 0 && opts.To < opts.From) {
		return nil, fmt.Errorf("replay: the range [%d, %d) is not a range of offsets", opts.From, opts.To)
	}
	switch opts.State {
	case "", ReplayStateEmpty, ReplayStateCurrent:
	default:
		return nil, fmt.Errorf("replay: state %q: want %q or %q", opts.State, ReplayStateEmpty, ReplayStateCurrent)
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("kafka.brokers is empty: replay reads the input from the brokers the app runs against")
	}
	if rs.lim, err = cfg.pluginLimits(); err != nil {
		return nil, err
	}
	if opts.State == ReplayStateCurrent {
		// Before any broker round trip: a held or missing directory is
		// the likelier mistake, and the cheaper to report.
		if rs.state, err = openReplayState(cfg.StateDir()); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			rs.close(ctx)
		}
	}()
	if rs.p, err = plugin.New(ctx, cfg.pluginSpec(pc), rs.lim, log); err != nil {
		return nil, err
	}
	if rs.kafka, err = cfg.kafkaClient(cfg.Kafka.Brokers, log); err != nil {
		return nil, err
	}
	if err := cfg.reachKafka(ctx, rs.kafka, cfg.Kafka.ConnectTimeout, log); err != nil {
		return nil, err
	}
	rs.inputs = cfg.inputTopics(pc)
	if rs.ranges, err = replayRanges(ctx, rs.kafka, rs.inputs, opts); err != nil {
		return nil, err
	}
	if rs.state != nil && len(rs.p.Spec.Stores) > 0 {
		if err := rs.checkLocalTasks(); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// checkLocalTasks refuses, with ReplayStateCurrent, a task whose stores
// the state directory does not hold (it ran on another machine, or never
// ran): starting it from empty state would not be its current state.
func (rs *replaySetup) checkLocalTasks() error {
	stores, err := rs.state.Stores()
	if err != nil {
		return fmt.Errorf("replay --state current: listing the stores in %s: %w", rs.state.Dir(), err)
	}
	local := map[int32]bool{}
	for _, s := range stores {
		if s.Processor == rs.pc.Name {
			local[s.Partition] = true
		}
	}
	var missing []int32
	for part := range rs.ranges {
		if !local[part] {
			missing = append(missing, part)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	have := slices.Sorted(maps.Keys(local))
	return fmt.Errorf("replay --state current: %s holds no state of processor %q's partition(s) %v (they ran on another machine, or never ran); "+
		"replay the partitions it holds, %v, with --partitions, or use --state empty", rs.state.Dir(), rs.pc.Name, missing, have)
}

// openReplayState opens dir read-only, or says why it cannot.
func openReplayState(dir string) (*StateReader, error) {
	sr, err := OpenStateReadOnly(dir, nil)
	switch {
	case errors.Is(err, ErrNoState):
		return nil, fmt.Errorf("replay --state current: no state database in %s (state.dir and app_id name it; was the app ever run on this machine?): %w", dir, err)
	case errors.Is(err, ErrStateInUse):
		return nil, fmt.Errorf("replay --state current: the state directory %s is held by a running process; stop it (or replay from a copy of the directory made while it was stopped, with state.dir set to it): %w", dir, err)
	case err != nil:
		return nil, fmt.Errorf("replay --state current: reading %s: %w", dir, err)
	}
	return sr, nil
}

func (rs *replaySetup) close(ctx context.Context) {
	if rs.p != nil {
		_ = rs.p.RT.Close(context.WithoutCancel(ctx))
	}
	if rs.state != nil {
		_ = rs.state.Close()
	}
}

// compile checks and compiles wasm (nil: the config file's plugin) as a
// deploy does: size, runtime.trusted_keys, compile, and the replay's own
// refusals.
func (rs *replaySetup) compile(ctx context.Context, wasm []byte) (*engine.Module, error) {
	if wasm == nil {
		var err error
		if wasm, err = os.ReadFile(rs.p.Spec.Path); err != nil {
			return nil, fmt.Errorf("plugin: %w", err)
		}
	}
	if err := rs.lim.CheckSize(wasm); err != nil {
		return nil, err
	}
	mod, err := rs.p.Compile(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("processor %q cannot run this module: %w", rs.pc.Name, err)
	}
	if err := replay.Check(mod.Info()); err != nil {
		_ = mod.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return mod, nil
}

// eachTask reads each task's records, partition after partition, and
// its starting state, and calls fn with them.
func (rs *replaySetup) eachTask(ctx context.Context, fn func(part int32, recs []replay.Input, start *replay.State) error) error {
	for _, part := range sortedPartitions(rs.ranges) {
		recs, err := readRange(ctx, rs.kafka, rs.inputs, part, rs.ranges[part])
		if err != nil {
			return err
		}
		start, err := rs.startState(part)
		if err != nil {
			return err
		}
		if err := fn(part, recs, start); err != nil {
			return fmt.Errorf("partition %d: %w", part, err)
		}
	}
	return nil
}

// startState is the task's stores in the app's state directory, copied
// into memory; nil with ReplayStateEmpty.
func (rs *replaySetup) startState(part int32) (*replay.State, error) {
	if rs.state == nil {
		return nil, nil
	}
	st := &replay.State{}
	size := 0
	for _, store := range rs.p.Spec.Stores {
		m := map[string][]byte{}
		err := rs.state.Scan(rs.pc.Name, part, store, func(k, v []byte) error {
			if size += len(k) + len(v); size > replayStateMax {
				return fmt.Errorf("replay --state current: task %s holds more than %d MiB of state, more than replay keeps in memory",
					rs.cfg.TaskName(rs.pc.Name, part), replayStateMax>>20)
			}
			m[string(k)] = bytes.Clone(v)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading store %q of partition %d: %w", store, part, err)
		}
		st.Stores = append(st.Stores, m)
	}
	return st, nil
}

// offsetRange is [lo, hi) of one input partition.
type offsetRange struct{ lo, hi int64 }

// replayRanges are, per partition number, the range of each input
// topic's partition to read: opts' range within the partition's start
// and last stable offset.
func replayRanges(ctx context.Context, kafka kclient.Config, inputs []string, opts ReplayOptions) (map[int32]map[string]offsetRange, error) {
	cl, err := kafka.NewClient()
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
		kgo.KeepControlRecords())
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
