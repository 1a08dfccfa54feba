package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ensureTopics checks that every input and output topic exists, creating
// missing ones when create is true, and creates the internal topics the
// host owns (dead-letter topics). An unreachable cluster is an error after
// brokerTimeout.
func (h *Host) ensureTopics(ctx context.Context, create bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ClientID(h.cfg.Kafka.ClientID))
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
	// Dead-letter topics are the host's own: created whatever create_topics
	// says, with as many partitions as the processor's widest input so a
	// failed record keeps its partition.
	if len(missing) > 0 {
		if details, err = adm.ListTopics(ctx, names...); err != nil {
			return fmt.Errorf("listing topics: %w", err)
		}
	}
	for _, p := range h.cfg.Processors {
		if p.OnError != OnErrorDeadLetter {
			continue
		}
		parts := int32(1)
		for _, in := range p.Inputs {
			if n := int32(len(details[in].Partitions)); n > parts {
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
