package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// topicWait bounds how long EnsureTopic waits for a topic, created by this
// call or by another process at the same moment, to show in metadata with
// a leader and in the configs. The real broker creates topics
// asynchronously (usually within milliseconds); kfake at once.
const topicWait = 30 * time.Second

// EnsureTopic creates the control topic if it does not exist: one
// partition, cleanup.policy=compact, the broker's default replication
// factor. An existing topic must have exactly that shape, or the error
// wraps ErrTopicShape. Processes may call it at the same time: whichever
// creates the topic, every call waits until the topic is usable and
// checks it. It returns once metadata shows the partition with a leader.
func EnsureTopic(ctx context.Context, kafka kclient.Config, topic string) error {
	cl, err := kafka.NewClient()
	if err != nil {
		return fmt.Errorf("control topic %s: kafka client: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	compact := "compact"
	_, err = adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("control topic %s: creating: %w", topic, err)
	}
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	for {
		notReady, err := checkTopic(ctx, adm, topic)
		if err != nil || notReady == "" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("control topic %s: not usable after %s: %s: %w", topic, topicWait, notReady, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkTopic returns what is not ready yet ("" when the topic is usable),
// or an error when the topic cannot be used or the broker fails.
func checkTopic(ctx context.Context, adm *kadm.Client, topic string) (notReady string, err error) {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("control topic %s: metadata: %w", topic, err)
	}
	d, ok := details[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return "not in metadata yet", nil
	case d.Err != nil && kerr.IsRetriable(d.Err):
		return d.Err.Error(), nil
	case d.Err != nil:
		return "", fmt.Errorf("control topic %s: metadata: %w", topic, d.Err)
	case len(d.Partitions) == 0:
		return "no partitions in metadata yet", nil
	}
	for p, pd := range d.Partitions {
		if pd.Err != nil || pd.Leader < 0 {
			return fmt.Sprintf("partition %d has no leader yet", p), nil
		}
	}
	if n := len(d.Partitions); n != 1 {
		return "", fmt.Errorf("%w: control topic %s has %d partitions; it must have exactly 1, so that every process reads versions in one order and a version's chunks precede its manifest (delete the topic, losing the deployed versions, or use another app id)",
			ErrTopicShape, topic, n)
	}

	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("control topic %s: describing configs: %w", topic, err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil {
		return "", fmt.Errorf("control topic %s: describing configs: %w", topic, err)
	}
	if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		return "configs not known yet", nil
	} else if rc.Err != nil {
		return "", fmt.Errorf("control topic %s: describing configs: %w", topic, rc.Err)
	}
	policy := "delete" // Kafka's default, should the broker not list it
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy = c.MaybeValue()
		}
	}
	if strings.ReplaceAll(policy, " ", "") != "compact" {
		return "", fmt.Errorf("%w: control topic %s has cleanup.policy=%s; it must be compact alone, or retention deletes the manifests and the bytes of versions still deployed (alter the topic config to cleanup.policy=compact)",
			ErrTopicShape, topic, policy)
	}
	return "", nil
}
