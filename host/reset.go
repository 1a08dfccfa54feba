package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/host/internal/reset"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// ResetOptions say where Reset moves the app's committed input offsets:
// exactly one of Earliest, Latest, Time (non-zero) or AtOffset (Offset in
// every partition, within its start and end offsets).
type ResetOptions struct {
	Earliest bool
	Latest   bool
	Time     time.Time
	AtOffset bool
	Offset   int64
	// DryRun computes the result and changes nothing.
	DryRun bool
}

// ResetResult is what Reset did (with DryRun: would do).
type ResetResult struct {
	Group string // the app's consumer group
	// Offsets are the committed offsets set, by topic and partition: the
	// inputs' at the target, the repartition topics' at their end.
	Offsets map[string]map[int32]int64
	// DeletedChangelogs are the changelog topics deleted (the next run
	// creates them empty); StateDir the local state directory removed,
	// "" if there was none.
	DeletedChangelogs []string
	StateDir          string
}

// Reset prepares cfg's stopped app to process its input again (`wasmstream
// reset`, like Kafka Streams' application-reset tool): it refuses while
// the app's consumer group has members, naming them; moves the group's
// committed offsets of every processor's inputs to the target, and those
// of the app's repartition topics to their end; deletes every store's
// changelog topic; and removes the local state directory
// (state.dir/app_id), refusing it while a process on this machine holds
// it. Outputs, dead-letter topics, global and task tables' topics are left
// as they are. Another machine's state directory must be removed there
// before that machine runs the app again (RATIONALE.md, "Reset").
func Reset(ctx context.Context, cfg *Config, opts ResetOptions, log *slog.Logger) (ResetResult, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.Clone()
	cfg.ApplyDefaults()
	res := ResetResult{Group: cfg.AppID}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	to, err := resetTarget(opts)
	if err != nil {
		return res, err
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return res, errors.New("kafka.brokers is empty: reset works on the brokers the app runs against (an embedded development broker keeps nothing between runs)")
	}
	kafka, err := cfg.kafkaClient(cfg.Kafka.Brokers, log)
	if err != nil {
		return res, err
	}
	if err := cfg.reachKafka(ctx, kafka, cfg.Kafka.ConnectTimeout, log); err != nil {
		return res, err
	}
	cl, err := kafka.NewClient()
	if err != nil {
		return res, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	// The group first (it names every process of the app), then the
	// local state: a process of this machine holding it stops the reset
	// before anything in Kafka changes. reset.Run asks the group again.
	members, err := reset.Members(rctx, adm, cfg.AppID)
	if err != nil {
		return res, err
	}
	if len(members) > 0 {
		return res, &reset.ActiveError{Group: cfg.AppID, Members: members}
	}
	dir := cfg.StateDir()
	if err := stateInUse(dir, log); err != nil {
		return res, err
	}
	r, err := reset.Run(rctx, adm, cfg.resetPlan(), to, opts.DryRun)
	res.Offsets, res.DeletedChangelogs = r.Offsets, r.Deleted
	if err != nil {
		return res, err
	}
	if _, err := os.Stat(dir); err == nil {
		res.StateDir = dir
		if !opts.DryRun {
			if err := os.RemoveAll(dir); err != nil {
				return res, fmt.Errorf("removing the local state directory: %w", err)
			}
		}
	}
	return res, nil
}

// stateInUse refuses a state directory a process holds: its global
// tables' database or any processor's.
func stateInUse(dir string, log *slog.Logger) error {
	dbs := []string{dir}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the local state directory: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), processorDirPrefix) {
			dbs = append(dbs, filepath.Join(dir, e.Name()))
		}
	}
	for _, db := range dbs {
		r, err := state.OpenReadOnly(db, log)
		switch {
		case errors.Is(err, state.ErrLocked):
			return fmt.Errorf("the local state directory %s is in use by a running process: stop it first (%w)", dir, err)
		case err == nil:
			_ = r.Close()
		}
	}
	return nil
}

// resetTimeout bounds a reset's Kafka work once the brokers answered.
const resetTimeout = 2 * time.Minute

func resetTarget(o ResetOptions) (reset.Target, error) {
	n := 0
	for _, b := range []bool{o.Earliest, o.Latest, !o.Time.IsZero(), o.AtOffset} {
		if b {
			n++
		}
	}
	if n != 1 {
		return reset.Target{}, errors.New("reset: give exactly one target: earliest, latest, a time or an offset")
	}
	if o.AtOffset && o.Offset < 0 {
		return reset.Target{}, fmt.Errorf("reset: offset %d is negative", o.Offset)
	}
	t := reset.Target{Earliest: o.Earliest, Latest: o.Latest, Time: o.Time, Offset: -1}
	if o.AtOffset {
		t.Offset = o.Offset
	}
	return t, nil
}

// resetPlan names what a reset of the app touches: the processors'
// external inputs, the repartition topics they read, and their stores'
// changelogs (a task table's topic is the user's: kept).
func (c *Config) resetPlan() reset.Plan {
	p := reset.Plan{Group: c.AppID}
	add := func(list *[]string, t string) {
		if !slices.Contains(*list, t) {
			*list = append(*list, t)
		}
	}
	for i := range c.Processors {
		pc := &c.Processors[i]
		internal := c.repartitionInputs(pc)
		for _, t := range c.inputTopics(pc) {
			if slices.Contains(internal, t) {
				add(&p.Internal, t)
			} else {
				add(&p.Inputs, t)
			}
		}
		for _, st := range c.taskStores(pc) {
			if _, ok := pc.TaskTables[st]; !ok {
				add(&p.Changelogs, c.ChangelogTopic(st))
			}
		}
	}
	return p
}
