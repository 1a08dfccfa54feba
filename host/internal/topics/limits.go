package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// brokerDefaultMaxMessageBytes is Kafka's default message.max.bytes, the
// limit of a topic that does not set max.message.bytes.
const brokerDefaultMaxMessageBytes = 1048588

// Limit is what a topic accepts of one record, learned at startup so that a
// record it would refuse fails at emit time, as that record's failure,
// instead of failing the produce (and, retried, the whole transaction).
type Limit struct {
	// MaxMessageBytes is the topic's max.message.bytes: the largest record
	// batch it takes.
	MaxMessageBytes int32
	// Compacted is set when cleanup.policy includes compact: such a topic
	// refuses records without a key.
	Compacted bool
}

// Limits describes the configs of topics and returns each one's Limit.
// A config the broker does not report takes Kafka's default.
func Limits(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]Limit, error) {
	out := make(map[string]Limit, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	rcs, err := describeConfigs(ctx, adm, topics...)
	if err != nil {
		return nil, fmt.Errorf("describing the configs of topics %s: %w", strings.Join(topics, ", "), err)
	}
	for _, t := range topics {
		lim := Limit{MaxMessageBytes: brokerDefaultMaxMessageBytes}
		rc, err := rcs.On(t, nil)
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", t, err)
		}
		if rc.Err != nil {
			return nil, fmt.Errorf("topic %s: describing its configs: %w", t, rc.Err)
		}
		for _, c := range rc.Configs {
			switch {
			case c.Key == "max.message.bytes" && c.Value != nil:
				n, err := strconv.ParseInt(*c.Value, 10, 32)
				if err != nil || n <= 0 {
					return nil, fmt.Errorf("topic %s: max.message.bytes %q is not a positive number", t, *c.Value)
				}
				lim.MaxMessageBytes = int32(n)
			case c.Key == "cleanup.policy" && c.Value != nil:
				lim.Compacted = strings.Contains(*c.Value, "compact")
			}
		}
		out[t] = lim
	}
	return out, nil
}

// describeConfigs describes the configs of topics. A topic created a
// moment ago (by this process or another member) can be unknown to the
// broker that answers until the metadata reaches it, on Kafka for up to a
// few hundred milliseconds after CreateTopics returned: a topic answered
// UNKNOWN_TOPIC_OR_PARTITION is asked again, every 100ms for up to
// unknownTopicWait, before its error stands.
func describeConfigs(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.ResourceConfigs, error) {
	deadline := time.Now().Add(unknownTopicWait)
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
		if err != nil {
			return nil, err
		}
		unknown := false
		for _, rc := range rcs {
			unknown = unknown || errors.Is(rc.Err, kerr.UnknownTopicOrPartition)
		}
		if !unknown || time.Now().After(deadline) {
			return rcs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unknownTopicWait bounds how long a topic that should exist may be unknown
// to the broker (describeConfigs).
const unknownTopicWait = 5 * time.Second
