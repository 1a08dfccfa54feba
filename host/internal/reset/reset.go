// Package reset is `wasmstream reset`: it prepares a stopped app to
// process its input again, as Kafka Streams' application-reset tool does.
// It moves the group's committed offsets of the app's inputs to a target
// (earliest, latest, a time, an offset), moves those of the app's internal
// repartition topics to their end, and deletes the stores' changelog
// topics (the next run creates them empty). It refuses while the group has
// members. It knows the app only as topic and group names (the host
// package makes them from the config) and talks to Kafka through kadm.
package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Plan is what a reset touches.
type Plan struct {
	Group string // the app's consumer group (app_id)
	// Inputs are the topics whose committed offsets go to the target:
	// the processors' external inputs.
	Inputs []string
	// Internal are the repartition topics the app reads: their committed
	// offsets go to their end (the processors that write them write
	// again what the reset inputs produce).
	Internal []string
	// Changelogs are deleted; the host creates them again, empty, at its
	// next start.
	Changelogs []string
}

// Target is where the inputs' committed offsets go: exactly one of
// Earliest, Latest, Time (non-zero) or Offset (>= 0).
type Target struct {
	Earliest, Latest bool
	Time             time.Time
	Offset           int64 // -1: not this kind
}

func (t Target) String() string {
	switch {
	case t.Earliest:
		return "the earliest offset"
	case t.Latest:
		return "the latest offset"
	case !t.Time.IsZero():
		return "the first record at or after " + t.Time.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("offset %d", t.Offset)
}

// Result is what a reset did (or, dry, would do).
type Result struct {
	// Offsets are the committed offsets it set, by topic and partition.
	Offsets map[string]map[int32]int64
	// Deleted are the changelog topics it deleted; Absent those that did
	// not exist.
	Deleted, Absent []string
}

// ActiveError is the refusal of a reset while the group has members.
type ActiveError struct {
	Group   string
	Members []string // "client-id member-id on host"
}

func (e *ActiveError) Error() string {
	return fmt.Sprintf("group %s has %d active member(s): %s; stop every process of the app (and wait out kafka.session_timeout for one that crashed), then run reset again",
		e.Group, len(e.Members), strings.Join(e.Members, ", "))
}

// Members lists the group's members, under the classic protocol and the
// consumer (KIP-848) protocol alike, as "client-id member-id on host".
func Members(ctx context.Context, adm *kadm.Client, group string) ([]string, error) {
	var out []string
	var errs []error
	cg, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		if d, ok := cg[group]; ok && d.Err == nil {
			for _, m := range d.Members {
				out = append(out, fmt.Sprintf("%s %s on %s", m.ClientID, m.MemberID, m.ClientHost))
			}
		} else if ok && !ignorable(d.Err) {
			errs = append(errs, d.Err)
		}
	} else if !ignorable(err) {
		errs = append(errs, err)
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		if d, ok := dg[group]; ok && d.Err == nil {
			for _, m := range d.Members {
				s := fmt.Sprintf("%s %s on %s", m.ClientID, m.MemberID, m.ClientHost)
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		} else if ok && !ignorable(d.Err) {
			errs = append(errs, d.Err)
		}
	} else if !ignorable(err) {
		errs = append(errs, err)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("describing group %s: %w", group, errors.Join(errs...))
	}
	sort.Strings(out)
	return out, nil
}

// ignorable are the answers of a describe that mean "not a group of this
// protocol" or "no such group": the other describe answers for it.
func ignorable(err error) bool {
	return errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.UnsupportedVersion) ||
		errors.Is(err, kerr.InconsistentGroupProtocol)
}

// Run resets the app of plan: it refuses while the group has members
// (ActiveError), then commits the target offsets and deletes the
// changelogs, waiting until they are gone. dry computes and returns the
// same result without changing anything.
func Run(ctx context.Context, adm *kadm.Client, plan Plan, to Target, dry bool) (Result, error) {
	res := Result{Offsets: map[string]map[int32]int64{}}
	members, err := Members(ctx, adm, plan.Group)
	if err != nil {
		return res, err
	}
	if len(members) > 0 {
		return res, &ActiveError{Group: plan.Group, Members: members}
	}
	offsets, err := targets(ctx, adm, plan, to)
	if err != nil {
		return res, err
	}
	offsets.Each(func(o kadm.Offset) {
		if res.Offsets[o.Topic] == nil {
			res.Offsets[o.Topic] = map[int32]int64{}
		}
		res.Offsets[o.Topic][o.Partition] = o.At
	})
	existing, err := adm.ListTopics(ctx, plan.Changelogs...)
	if err != nil {
		return res, fmt.Errorf("listing the changelog topics: %w", err)
	}
	for _, t := range plan.Changelogs {
		if d, ok := existing[t]; ok && d.Err == nil {
			res.Deleted = append(res.Deleted, t)
		} else {
			res.Absent = append(res.Absent, t)
		}
	}
	if dry {
		return res, nil
	}
	if len(offsets) > 0 {
		resp, err := adm.CommitOffsets(ctx, plan.Group, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.IllegalGeneration) {
				return res, fmt.Errorf("committing the offsets of group %s: %w (a member joined: stop every process of the app and run reset again)", plan.Group, err)
			}
			return res, fmt.Errorf("committing the offsets of group %s: %w", plan.Group, err)
		}
	}
	if len(res.Deleted) > 0 {
		resp, err := adm.DeleteTopics(ctx, res.Deleted...)
		if err != nil {
			return res, fmt.Errorf("deleting the changelog topics: %w", err)
		}
		for _, r := range resp.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return res, fmt.Errorf("deleting changelog topic %s: %w", r.Topic, r.Err)
			}
		}
		if err := waitGone(ctx, adm, res.Deleted); err != nil {
			return res, err
		}
	}
	return res, nil
}

// targets are the offsets to commit: plan's inputs at to, its internal
// topics at their end.
func targets(ctx context.Context, adm *kadm.Client, plan Plan, to Target) (kadm.Offsets, error) {
	out := kadm.Offsets{}
	add := func(l kadm.ListedOffsets, what string) error {
		var err error
		l.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && err == nil {
				err = fmt.Errorf("listing %s offsets of %s: %w", what, o.Topic, o.Err)
			}
			out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		})
		return err
	}
	if len(plan.Inputs) > 0 {
		var l kadm.ListedOffsets
		var err error
		switch {
		case to.Earliest:
			l, err = adm.ListStartOffsets(ctx, plan.Inputs...)
		case to.Latest:
			l, err = adm.ListEndOffsets(ctx, plan.Inputs...)
		case !to.Time.IsZero():
			l, err = adm.ListOffsetsAfterMilli(ctx, to.Time.UnixMilli(), plan.Inputs...)
		default:
			l, err = clamped(ctx, adm, plan.Inputs, to.Offset)
		}
		if err != nil {
			return nil, fmt.Errorf("listing the inputs' offsets: %w", err)
		}
		if err := add(l, "the inputs'"); err != nil {
			return nil, err
		}
	}
	if len(plan.Internal) > 0 {
		l, err := adm.ListEndOffsets(ctx, plan.Internal...)
		if err != nil {
			return nil, fmt.Errorf("listing the repartition topics' end offsets: %w", err)
		}
		if err := add(l, "the end"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// clamped is offset in every partition of topics, within the partition's
// start and end offsets.
func clamped(ctx context.Context, adm *kadm.Client, topics []string, offset int64) (kadm.ListedOffsets, error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := kadm.ListedOffsets{}
	starts.Each(func(s kadm.ListedOffset) {
		at := max(offset, s.Offset)
		if e, ok := ends.Lookup(s.Topic, s.Partition); ok && e.Err == nil {
			at = min(at, e.Offset)
		}
		s.Offset = at
		if out[s.Topic] == nil {
			out[s.Topic] = map[int32]kadm.ListedOffset{}
		}
		out[s.Topic][s.Partition] = s
	})
	return out, nil
}

// waitGone waits until no topic of topics is listed: a deletion is
// asynchronous, and the next run must create them anew, not find them
// half deleted.
func waitGone(ctx context.Context, adm *kadm.Client, topics []string) error {
	for {
		listed, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			var left []string
			for _, t := range topics {
				if d, ok := listed[t]; ok && d.Err == nil {
					left = append(left, t)
				}
			}
			if len(left) == 0 {
				return nil
			}
			err = fmt.Errorf("still listed: %s", strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the changelog topics to be deleted: %w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
