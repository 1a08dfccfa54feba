package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ensureTopics checks that every input and output topic exists, creating
// missing ones when create is true, and creates the internal topics the
// host owns (dead-letter topics). An unreachable cluster is an error after
// brokerTimeout.
func (h *Host) ensureTopics(ctx context.Context, create bool) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.brokers...)}, h.kafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()

	want := map[string]string{} // topic -> why we need it
	for _, p := range h.cfg.Processors {
		for _, in := range p.Inputs {
			want[in] = fmt.Sprintf("input of processor %q", p.Name)
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
		return fmt.Errorf("cannot reach Kafka at %s: %w", strings.Join(h.brokers, ","), err)
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
		err := createTopic(ctx, adm, t, int32(h.cfg.Kafka.TopicPartitions), nil)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // another member may have won the race
			return fmt.Errorf("creating topic %s (%s): %w", t, want[t], err)
		}
		h.log.Info("created topic", "topic", t, "partitions", h.cfg.Kafka.TopicPartitions, "for", want[t])
	}
	// Partition counts: listed ones, and for the topics just created the
	// count they were created with (a fresh listing may come from a
	// metadata cache that does not know them yet).
	partitions := map[string]int32{}
	for _, t := range names {
		partitions[t] = int32(len(details[t].Partitions))
	}
	for _, t := range missing {
		partitions[t] = int32(h.cfg.Kafka.TopicPartitions)
	}
	// Dead-letter topics are the host's own: created whatever create_topics
	// says, with as many partitions as the processor's widest input so a
	// failed record keeps its partition.
	for _, p := range h.cfg.Processors {
		for _, store := range p.Stores {
			if err := h.ensureChangelog(ctx, adm, h.cfg.ChangelogTopic(store), p.Inputs[0], partitions[p.Inputs[0]]); err != nil {
				return fmt.Errorf("processor %q store %q: %w", p.Name, store, err)
			}
		}
	}
	for _, p := range h.cfg.Processors {
		if p.OnError != OnErrorDeadLetter {
			continue
		}
		parts := int32(1)
		for _, in := range p.Inputs {
			if n := partitions[in]; n > parts {
				parts = n
			}
		}
		dlq := h.cfg.DeadLetterTopic(&p)
		if err := createTopic(ctx, adm, dlq, parts, nil); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating dead-letter topic %s: %w", dlq, err)
		}
	}
	return nil
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
func (h *Host) ensureChangelog(ctx context.Context, adm *kadm.Client, topic, input string, partitions int32) error {
	if partitions <= 0 {
		return fmt.Errorf("input topic %q has no partitions", input)
	}
	compact := "compact"
	err := createTopic(ctx, adm, topic, partitions, map[string]*string{"cleanup.policy": &compact})
	if err == nil {
		h.log.Info("created changelog topic", "topic", topic, "partitions", partitions)
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating changelog topic %s: %w", topic, err)
	}
	// Another member may have just created it: until the metadata knows
	// its partitions, listing shows none. Wait for them, briefly.
	var details kadm.TopicDetails
	for try := 0; ; try++ {
		if details, err = adm.ListTopics(ctx, topic); err != nil {
			return fmt.Errorf("changelog topic %s: %w", topic, err)
		}
		if len(details[topic].Partitions) > 0 || try >= 50 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("changelog topic %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n := int32(len(details[topic].Partitions)); n != partitions {
		return fmt.Errorf("changelog topic %s has %d partitions but input %s has %d: a task's state must live in the changelog partition of the same number; delete the changelog (its state is lost) or repartition the input", topic, n, input, partitions)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("changelog topic %s: describing configs: %w", topic, err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil {
		return fmt.Errorf("changelog topic %s: describing configs: %w", topic, err)
	}
	if rc.Err != nil {
		return fmt.Errorf("changelog topic %s: describing configs: %w", topic, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && !strings.Contains(c.MaybeValue(), "compact") {
			return fmt.Errorf("changelog topic %s has cleanup.policy=%s; it must be compact, or retention deletes state", topic, c.MaybeValue())
		}
	}
	return nil
}
