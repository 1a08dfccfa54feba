package topics

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
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
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
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
