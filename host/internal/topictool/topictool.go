// Package topictool is `wasmstream topic`: put records into a topic and
// read them out, list, create and describe topics, from a terminal or a
// script, with the clients every part of the host makes (kclient: the
// brokers, the client id, TLS and SASL).
//
// Two rules make it agree with the host. Produce partitions a keyed record
// as the host partitions its outputs (murmur2 of the key, Kafka's default,
// through kgo.StickyKeyPartitioner; sticky for a null key), so a record
// lands on the partition, and so the task, that the host itself would
// choose. Consume reads committed records only unless asked otherwise,
// as the host's own consumers do under exactly_once.
package topictool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// Client talks to one cluster.
type Client struct {
	kafka kclient.Config
	cl    *kgo.Client // metadata and admin requests
	adm   *kadm.Client
}

// New makes a Client from kafka (which the caller has reached).
func New(kafka kclient.Config) (*Client, error) {
	cl, err := kafka.NewClient()
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Client{kafka: kafka, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the client.
func (c *Client) Close() { c.cl.Close() }

func (c *Client) brokers() string { return strings.Join(c.kafka.Brokers, ",") }

// ErrNoTopic marks a topic that does not exist.
var ErrNoTopic = errors.New("no such topic")

// topic returns the partitions of topic, or an error wrapping ErrNoTopic
// that says how to create it.
func (c *Client) topic(ctx context.Context, topic string) (kadm.TopicDetail, error) {
	tds, err := c.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("listing topic %s on %s: %w", topic, c.brokers(), err)
	}
	td, ok := tds[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicDetail{}, fmt.Errorf("%w: topic %q does not exist on %s (wasmstream topic create %s makes it; wasmstream topic list lists the topics)",
			ErrNoTopic, topic, c.brokers(), topic)
	}
	if td.Err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("topic %s on %s: %w", topic, c.brokers(), td.Err)
	}
	return td, nil
}

// TopicSummary is one line of List.
type TopicSummary struct {
	Name       string
	Partitions int
	Replicas   int // replication factor (of partition 0)
	Internal   bool
}

// List returns the cluster's topics, sorted; the broker's internal topics
// (__consumer_offsets, __transaction_state) only with internal.
func (c *Client) List(ctx context.Context, internal bool) ([]TopicSummary, error) {
	list := c.adm.ListTopics
	if internal {
		list = c.adm.ListTopicsWithInternal
	}
	tds, err := list(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics on %s: %w", c.brokers(), err)
	}
	var out []TopicSummary
	for _, name := range tds.Names() {
		td := tds[name]
		s := TopicSummary{Name: name, Partitions: len(td.Partitions), Internal: td.IsInternal}
		if p, ok := td.Partitions[0]; ok {
			s.Replicas = len(p.Replicas)
		}
		out = append(out, s)
	}
	return out, nil
}

// PrintList writes topics as a table.
func PrintList(w io.Writer, topics []TopicSummary) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS")
	for _, t := range topics {
		name := t.Name
		if t.Internal {
			name += " (internal)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\n", name, t.Partitions, t.Replicas)
	}
	return tw.Flush()
}

// CreateOptions is a topic to create.
type CreateOptions struct {
	Topic string
	// Partitions; -1 is the broker's default.
	Partitions int32
	// Replicas is the replication factor; -1 is the broker's default.
	Replicas int16
	// Configs are topic configs (cleanup.policy=compact, ...).
	Configs map[string]string
}

// Created is what Create made.
type Created struct {
	Partitions int32
	Replicas   int16
}

// Create creates a topic. An existing topic is an error that says so.
func (c *Client) Create(ctx context.Context, o CreateOptions) (Created, error) {
	configs := map[string]*string{}
	for k, v := range o.Configs {
		configs[k] = &v
	}
	resp, err := c.adm.CreateTopic(ctx, o.Partitions, o.Replicas, configs, o.Topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		n := ""
		if td, err := c.topic(ctx, o.Topic); err == nil {
			n = fmt.Sprintf(" (%d partitions)", len(td.Partitions))
		}
		return Created{}, fmt.Errorf("topic %q already exists on %s%s", o.Topic, c.brokers(), n)
	case err != nil && resp.ErrMessage != "":
		return Created{}, fmt.Errorf("creating topic %s on %s: %w: %s", o.Topic, c.brokers(), err, resp.ErrMessage)
	case err != nil:
		return Created{}, fmt.Errorf("creating topic %s on %s: %w", o.Topic, c.brokers(), err)
	}
	created := Created{Partitions: resp.NumPartitions, Replicas: resp.ReplicationFactor}
	if created.Partitions <= 0 { // brokers before Kafka 2.4 do not say
		if td, err := c.topic(ctx, o.Topic); err == nil {
			created.Partitions = int32(len(td.Partitions))
			if p, ok := td.Partitions[0]; ok {
				created.Replicas = int16(len(p.Replicas))
			}
		}
	}
	return created, nil
}

// Describe writes a topic's partitions (leader, replicas, in-sync
// replicas, start, end and last stable offsets) and the configs set on
// it.
func (c *Client) Describe(ctx context.Context, w io.Writer, topic string) error {
	td, err := c.topic(ctx, topic)
	if err != nil {
		return err
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the start offsets of %s: %w", topic, err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	stable, err := c.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the last stable offsets of %s: %w", topic, err)
	}
	parts := td.Partitions.Sorted()
	replicas := 0
	if len(parts) > 0 {
		replicas = len(parts[0].Replicas)
	}
	fmt.Fprintf(w, "topic       %s\n", topic)
	fmt.Fprintf(w, "partitions  %d\nreplicas    %d\n", len(parts), replicas)
	if td.IsInternal {
		fmt.Fprintf(w, "internal    yes (the broker's own)\n")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tIN-SYNC\tSTART\tEND\tLAST-STABLE")
	for _, p := range parts {
		off := func(l kadm.ListedOffsets) string {
			o, ok := l.Lookup(topic, p.Partition)
			if !ok || o.Err != nil {
				return "?"
			}
			return strconv.FormatInt(o.Offset, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, ints(p.Replicas), ints(p.ISR), off(starts), off(ends), off(stable))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return c.describeConfigs(ctx, w, topic)
}

// describeConfigs writes the configs set on topic itself (not the
// broker's defaults).
func (c *Client) describeConfigs(ctx context.Context, w io.Writer, topic string) error {
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing the configs of %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("describing the configs of %s: %w", topic, err)
	}
	var set []string
	for _, cfg := range rc.Configs {
		if cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		v := cfg.MaybeValue()
		if cfg.Sensitive {
			v = "[sensitive]"
		}
		set = append(set, cfg.Key+"="+v)
	}
	sort.Strings(set)
	fmt.Fprintln(w)
	if len(set) == 0 {
		fmt.Fprintln(w, "configs     none set on the topic (the broker's defaults)")
		return nil
	}
	fmt.Fprintln(w, "configs set on the topic:")
	for _, s := range set {
		fmt.Fprintf(w, "  %s\n", s)
	}
	return nil
}

func ints(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}
