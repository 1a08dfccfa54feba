// Package topics makes sure the topics an app uses exist with the shape
// the host relies on before anything is consumed: inputs and outputs
// (created on request), changelogs (compacted, one partition per input
// partition, so a task's state lives in the changelog partition of the
// same number: I3, I4), repartition topics (delete retention without a
// time limit, as many partitions as the writing processor's first input
// unless configured) and dead-letter topics. The inputs of a processor
// with stores and several inputs (co-partitioned) have one partition
// count.
package topics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Processor is what the topics of one processor are.
type Processor struct {
	Name    string
	Inputs  []string
	Outputs map[string]string // output name -> topic
	// Changelogs maps each store to its changelog topic.
	Changelogs map[string]string
	// DeadLetter is the dead-letter topic; "" when on_error is not
	// dead_letter.
	DeadLetter string
	// Repartition maps each repartition output to its internal topic,
	// which the host creates (delete retention, no time limit: the host
	// purges it) with RepartitionPartitions partitions, or when that is 0
	// as many as the processor's first input has. Inputs may name the
	// repartition topics of other processors.
	Repartition           map[string]string
	RepartitionPartitions int32
	// Tables maps each global table to its topic: it must exist, or is
	// created (compacted) like inputs when Want.Create is set.
	Tables map[string]string
}

// Want is the topics of an app.
type Want struct {
	Processors []Processor
	// Create makes Ensure create missing inputs and outputs, with
	// Partitions partitions.
	Create     bool
	Partitions int32
	// Brokers names the cluster in errors.
	Brokers string
}

// Ensure checks that every input and output topic exists, creating
// missing ones when w.Create is set, and creates the topics the host owns:
// changelogs and dead-letter topics. adm answers within ctx's deadline or
// the call fails. adm's client should refresh metadata after
// kclient.MetadataMinAge: Ensure lists topics that it or another member
// created a moment before, and asks again while the listing shows no
// partitions.
func Ensure(ctx context.Context, adm *kadm.Client, w Want, log *slog.Logger) error {
	procs, create, partitions := w.Processors, w.Create, w.Partitions
	internal := map[string]bool{} // repartition topics: the host's own
	for _, p := range procs {
		for _, t := range p.Repartition {
			internal[t] = true
		}
	}
	want := map[string]string{} // topic -> why we need it
	tables := map[string]bool{} // topics read as global tables: created compacted
	for _, p := range procs {
		for name, t := range p.Tables {
			want[t] = fmt.Sprintf("table %q of processor %q", name, p.Name)
			tables[t] = true
		}
	}
	for _, p := range procs {
		for _, in := range p.Inputs {
			if !internal[in] {
				want[in] = fmt.Sprintf("input of processor %q", p.Name)
			}
		}
		for name, out := range p.Outputs {
			want[out] = fmt.Sprintf("output %q of processor %q", name, p.Name)
		}
	}
	names := make([]string, 0, len(want))
	for t := range want {
		names = append(names, t)
	}
	sort.Strings(names)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("cannot reach Kafka at %s: %w", w.Brokers, err)
	}
	var missing []string
	for _, t := range names {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		} else if d.Err != nil {
			return fmt.Errorf("topic %s (%s): %w", t, want[t], d.Err)
		}
	}
	if len(missing) > 0 && !create {
		var errs []error
		for _, t := range missing {
			errs = append(errs, fmt.Errorf("topic %q (%s) does not exist; create it or set kafka.create_topics: true", t, want[t]))
		}
		return errors.Join(errs...)
	}
	for _, t := range missing {
		var configs map[string]*string
		if tables[t] {
			compact := "compact" // a table keeps the latest value per key
			configs = map[string]*string{"cleanup.policy": &compact}
		}
		err := createTopic(ctx, adm, t, partitions, configs)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // another member may have won the race
			return fmt.Errorf("creating topic %s (%s): %w", t, want[t], err)
		}
		log.Info("created topic", "topic", t, "partitions", partitions, "for", want[t])
	}
	// Partition counts: listed ones, and for the topics just created the
	// count they were created with (a fresh listing may come from a
	// metadata cache that does not know them yet).
	counts := map[string]int32{}
	for _, t := range names {
		counts[t] = int32(len(details[t].Partitions))
	}
	for _, t := range missing {
		counts[t] = partitions
	}
	// Changelogs, repartition and dead-letter topics are the host's own:
	// created whatever create_topics says. Repartition topics first: a
	// reader's changelogs take their partition count.
	if err := ensureRepartitions(ctx, adm, procs, counts, log); err != nil {
		return err
	}
	if err := checkCopartitioned(procs, counts); err != nil {
		return err
	}
	for _, p := range procs {
		stores := make([]string, 0, len(p.Changelogs))
		for st := range p.Changelogs {
			stores = append(stores, st)
		}
		sort.Strings(stores)
		for _, st := range stores {
			if err := ensureChangelog(ctx, adm, p.Changelogs[st], p.Inputs[0], counts[p.Inputs[0]], log); err != nil {
				return fmt.Errorf("processor %q store %q: %w", p.Name, st, err)
			}
		}
	}
	for _, p := range procs {
		if p.DeadLetter == "" {
			continue
		}
		// As many partitions as the processor's widest input. A
		// dead-letter record does not keep its input partition: it goes
		// where its key hashes to, like an output without a chosen
		// partition; its wasmstream-source-partition header says where
		// it came from.
		parts := int32(1)
		for _, in := range p.Inputs {
			if n := counts[in]; n > parts {
				parts = n
			}
		}
		if err := createTopic(ctx, adm, p.DeadLetter, parts, nil); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating dead-letter topic %s: %w", p.DeadLetter, err)
		}
	}
	return nil
}

// checkCopartitioned refuses a processor with stores and several inputs
// whose inputs differ in partition count: its task p reads partition p of
// every input, so a partition without its peers would never be read with
// them (or at all).
func checkCopartitioned(procs []Processor, counts map[string]int32) error {
	var errs []error
	for _, p := range procs {
		if len(p.Changelogs) == 0 || len(p.Inputs) < 2 {
			continue
		}
		first := p.Inputs[0]
		var differ []string
		for _, in := range p.Inputs[1:] {
			if counts[in] != counts[first] {
				differ = append(differ, fmt.Sprintf("%s has %d", in, counts[in]))
			}
		}
		if len(differ) > 0 {
			errs = append(errs, fmt.Errorf("processor %q has stores and several inputs, which must have the same partition count (its task p reads partition p of each): %s has %d partitions but %s; repartition the others to %d partitions (a repartition output with repartition_partitions), or split the processor",
				p.Name, first, counts[first], strings.Join(differ, ", "), counts[first]))
		}
	}
	return errors.Join(errs...)
}

// ensureRepartitions creates or checks every repartition topic of procs,
// adding each one's partition count to counts. A processor's topics are
// ensured once the count of its first input is known, which may itself be
// a repartition topic: chains are resolved in order (config validation
// refuses cycles).
func ensureRepartitions(ctx context.Context, adm *kadm.Client, procs []Processor, counts map[string]int32, log *slog.Logger) error {
	done := make([]bool, len(procs))
	for {
		progress, left := false, 0
		for i, p := range procs {
			if done[i] || len(p.Repartition) == 0 {
				continue
			}
			first := p.Inputs[0]
			from, known := counts[first]
			if !known {
				left++
				continue
			}
			parts := p.RepartitionPartitions
			if parts == 0 {
				parts = from
			}
			outs := make([]string, 0, len(p.Repartition))
			for o := range p.Repartition {
				outs = append(outs, o)
			}
			sort.Strings(outs)
			for _, o := range outs {
				t := p.Repartition[o]
				if err := ensureRepartition(ctx, adm, t, parts, log); err != nil {
					return fmt.Errorf("processor %q repartition output %q: %w", p.Name, o, err)
				}
				counts[t] = parts
			}
			done[i], progress = true, true
		}
		if left == 0 {
			return nil
		}
		if !progress {
			return errors.New("repartition topics feed each other in a cycle: no partition count to start from")
		}
	}
}

// ensureRepartition creates a repartition topic with partitions
// partitions, or checks that an existing one has that many and is not
// compacted. Its records never expire by time (retention.ms=-1): they are
// deleted only once read and committed (the host's purge), so a reader
// that is down for long loses nothing.
func ensureRepartition(ctx context.Context, adm *kadm.Client, topic string, partitions int32, log *slog.Logger) error {
	if partitions <= 0 {
		return fmt.Errorf("repartition topic %s: no partition count (the processor's first input has no partitions)", topic)
	}
	del, forever := "delete", "-1"
	err := createTopic(ctx, adm, topic, partitions, map[string]*string{"cleanup.policy": &del, "retention.ms": &forever})
	if err == nil {
		log.Info("created repartition topic", "topic", topic, "partitions", partitions)
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating repartition topic %s: %w", topic, err)
	}
	n, err := existingPartitions(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("repartition topic %s: %w", topic, err)
	}
	if n != partitions {
		return fmt.Errorf("repartition topic %s has %d partitions but the processor writes it with %d (its first input's count, or repartition_partitions): its records would reach the wrong tasks; delete the topic (its unread records are lost) or set repartition_partitions to %d", topic, n, partitions, n)
	}
	policy, err := cleanupPolicy(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("repartition topic %s: %w", topic, err)
	}
	if strings.Contains(policy, "compact") {
		return fmt.Errorf("repartition topic %s has cleanup.policy=%s; it must be delete, or compaction drops records before they are read", topic, policy)
	}
	return nil
}

// existingPartitions is the partition count of a topic that exists.
// Another member may have just created it: until the metadata knows its
// partitions, listing shows none, so it waits for them, briefly.
func existingPartitions(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	for try := 0; ; try++ {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return 0, err
		}
		if n := len(details[topic].Partitions); n > 0 || try >= 50 {
			return int32(n), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cleanupPolicy is a topic's cleanup.policy.
func cleanupPolicy(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	configs, err := describeConfigs(ctx, adm, topic)
	if err != nil {
		return "", fmt.Errorf("describing configs: %w", err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil {
		return "", fmt.Errorf("describing configs: %w", err)
	}
	if rc.Err != nil {
		return "", fmt.Errorf("describing configs: %w", rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue(), nil
		}
	}
	return "", nil
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

// ensureChangelog creates a store's changelog topic (compacted, one
// partition per input partition) or checks that an existing one has that
// shape. A changelog with the wrong partition count would put a task's
// state in another task's partition; one that is not compacted would lose
// keys to retention: both are refused before any processing.
func ensureChangelog(ctx context.Context, adm *kadm.Client, topic, input string, partitions int32, log *slog.Logger) error {
	if partitions <= 0 {
		return fmt.Errorf("input topic %q has no partitions", input)
	}
	compact := "compact"
	err := createTopic(ctx, adm, topic, partitions, map[string]*string{"cleanup.policy": &compact})
	if err == nil {
		log.Info("created changelog topic", "topic", topic, "partitions", partitions)
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating changelog topic %s: %w", topic, err)
	}
	n, err := existingPartitions(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("changelog topic %s: %w", topic, err)
	}
	if n != partitions {
		return fmt.Errorf("changelog topic %s has %d partitions but input %s has %d: a task's state must live in the changelog partition of the same number; delete the changelog (its state is lost) or repartition the input", topic, n, input, partitions)
	}
	policy, err := cleanupPolicy(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("changelog topic %s: %w", topic, err)
	}
	if policy != "" && !strings.Contains(policy, "compact") {
		return fmt.Errorf("changelog topic %s has cleanup.policy=%s; it must be compact, or retention deletes state", topic, policy)
	}
	return nil
}
