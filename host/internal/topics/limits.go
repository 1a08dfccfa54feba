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

// Limit is what a topic accepts of one record, learned when a runner starts
// (and again when the broker refused a record) so that a record it would
// refuse fails at emit time, as that record's failure, instead of failing
// the produce (and, retried, the whole transaction).
type Limit struct {
	// MaxMessageBytes is the topic's max.message.bytes: the largest record
	// batch it takes.
	MaxMessageBytes int32
	// Compacted is set when cleanup.policy includes compact: such a topic
	// refuses records without a key.
	Compacted bool
	// TimestampAfter and TimestampBefore are how far ahead of and behind
	// the broker's clock a record's timestamp may be
	// (message.timestamp.after.max.ms and before.max.ms); 0 is no limit,
	// as for a topic whose message.timestamp.type is LogAppendTime (the
	// broker stamps records itself) or whose limit is Kafka's "never"
	// (Long.MAX_VALUE). Kafka 4 refuses records more than an hour ahead
	// by default.
	TimestampAfter, TimestampBefore time.Duration
}

// noTimestampLimit is the longest timestamp limit taken as one: anything
// longer (Kafka's default for before.max.ms is Long.MAX_VALUE ms) is none.
const noTimestampLimit = 100 * 365 * 24 * time.Hour

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
		logAppend := false
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
			case c.Key == "message.timestamp.type" && c.Value != nil:
				logAppend = *c.Value == "LogAppendTime"
			case c.Key == "message.timestamp.after.max.ms" && c.Value != nil:
				if lim.TimestampAfter, err = timestampLimit(t, c.Key, *c.Value); err != nil {
					return nil, err
				}
			case c.Key == "message.timestamp.before.max.ms" && c.Value != nil:
				if lim.TimestampBefore, err = timestampLimit(t, c.Key, *c.Value); err != nil {
					return nil, err
				}
			}
		}
		if logAppend {
			lim.TimestampAfter, lim.TimestampBefore = 0, 0
		}
		out[t] = lim
	}
	return out, nil
}

// timestampLimit parses a topic's message.timestamp.*.max.ms value.
func timestampLimit(topic, key, v string) (time.Duration, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("topic %s: %s %q is not a number of milliseconds", topic, key, v)
	}
	switch {
	case ms > noTimestampLimit.Milliseconds():
		return 0, nil
	case ms == 0:
		// 0 would read as no limit; a millisecond is the same limit for
		// a check made before the broker's clock moves on anyway.
		return time.Millisecond, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
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
