package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/topictool"
)

// TopicTool is `wasmstream topic`: it puts records into topics and reads
// them out, and lists, creates and describes topics, on the brokers of a
// config, with its TLS and SASL settings, or on the embedded development
// broker of a running `wasmstream run` of the config.
type TopicTool struct {
	c       *topictool.Client
	brokers []string
	// partitions is kafka.topic_partitions: CreateTopic's default.
	partitions int32
}

// ErrNoBrokers is returned (wrapped) by OpenTopicTool when the config
// names no brokers and no running process of it has an embedded broker
// whose address is known.
var ErrNoBrokers = errors.New("no Kafka brokers to talk to")

// topicToolWait bounds how long the topic commands wait for brokers that
// do not answer (less than kafka.connect_timeout when that is longer: a
// person at a terminal is waiting).
const topicToolWait = 10 * time.Second

// OpenTopicTool connects to cfg's brokers, with its TLS and SASL settings,
// waiting for them up to kafka.connect_timeout (at most 10 s) and
// explaining a connection, TLS or SASL failure as New does. With
// kafka.brokers empty it uses the embedded broker of a running
// `wasmstream run` of cfg (whose address that process writes beside its
// state, EmbeddedBrokerFile), and says plainly when there is none. log
// receives the waiting messages; nil means slog.Default().
func OpenTopicTool(ctx context.Context, cfg *Config, log *slog.Logger) (*TopicTool, error) {
	if log == nil {
		log = slog.Default()
	}
	c := cfg.Clone()
	c.ApplyDefaults()
	if err := errors.Join(c.kafkaErrors()...); err != nil {
		return nil, err
	}
	brokers, fromFile, wait, err := c.toolBrokers(min(c.Kafka.ConnectTimeout, topicToolWait))
	if err != nil {
		return nil, err
	}
	kafka, err := c.kafkaClient(brokers, log)
	if err != nil {
		return nil, err
	}
	if err := c.reachKafka(ctx, kafka, wait, log); err != nil {
		return nil, embeddedGone(brokers, fromFile, err)
	}
	tc, err := topictool.New(kafka)
	if err != nil {
		return nil, err
	}
	return &TopicTool{c: tc, brokers: brokers, partitions: int32(c.Kafka.TopicPartitions)}, nil
}

// EmbeddedBrokerFile is the file where a process that runs cfg on the
// embedded development broker (kafka.brokers empty) writes that broker's
// address while it runs, for the topic commands: <state.dir>/<app_id>.embedded-broker.
func (c *Config) EmbeddedBrokerFile() string {
	return filepath.Join(c.State.Dir, c.AppID+".embedded-broker")
}

// toolBrokers is where a command run beside the processes (the topic
// commands, deploy, rollback, pause, shadow, query) finds the brokers, and
// how long to wait for them: kafka.brokers, waited for up to wait, or,
// when it is empty, the embedded broker of a running `wasmstream run` of
// c, whose address that process writes to EmbeddedBrokerFile (fromFile:
// then that file), not waited for (it is up while the file is there). The
// error says why there is none.
func (c *Config) toolBrokers(wait time.Duration) (brokers []string, fromFile string, _ time.Duration, err error) {
	if len(c.Kafka.Brokers) > 0 {
		return c.Kafka.Brokers, "", wait, nil
	}
	addr, file, err := c.embeddedBroker()
	if err != nil {
		return nil, "", 0, err
	}
	return []string{addr}, file, 0, nil
}

// embeddedGone is err, the brokers not answering, said plainly when they
// are an embedded broker found through fromFile: its process has stopped.
func embeddedGone(brokers []string, fromFile string, err error) error {
	if err == nil || fromFile == "" {
		return err
	}
	return fmt.Errorf("%w: kafka.brokers is empty, and the embedded broker at %s (written in %s by a wasmstream run of this config) does not answer: "+
		"that run has stopped? Start it again (its embedded broker starts empty), or pass --brokers HOST:PORT (%v)", ErrNoBrokers, brokers[0], fromFile, err)
}

// embeddedBroker reads the address of the embedded broker of a running
// process of c.
func (c *Config) embeddedBroker() (addr, file string, err error) {
	if c.AppID == "" {
		return "", "", fmt.Errorf("%w: pass --brokers HOST:PORT, or -c pipeline.yaml to use its kafka.brokers (or the embedded broker of its running wasmstream run)", ErrNoBrokers)
	}
	file = c.EmbeddedBrokerFile()
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", file, fmt.Errorf("%w: kafka.brokers is empty, so the pipeline runs on the embedded development broker, which lives inside its wasmstream run; "+
			"none of app %q is running (it writes its address to %s): start wasmstream run with this config first, or pass --brokers HOST:PORT", ErrNoBrokers, c.AppID, file)
	case err != nil:
		return "", file, fmt.Errorf("%w: reading the embedded broker's address: %w", ErrNoBrokers, err)
	}
	addr = strings.TrimSpace(string(b))
	if _, port, ok := strings.Cut(addr, ":"); !ok || port == "" {
		return "", file, fmt.Errorf("%w: %s does not hold a host:port (%q); pass --brokers HOST:PORT", ErrNoBrokers, file, addr)
	}
	return addr, file, nil
}

// writeEmbeddedBroker records the embedded broker's address for the topic
// commands. A state directory that cannot be written costs only that.
func (h *Host) writeEmbeddedBroker() {
	file := h.cfg.EmbeddedBrokerFile()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err == nil {
		err = os.WriteFile(file, []byte(strings.Join(h.brokers, ",")+"\n"), 0o644)
		if err == nil {
			h.brokerFile = file
			return
		}
		h.log.Debug("cannot record the embedded broker's address; the topic commands will need --brokers", "file", file, "err", err)
	}
}

// removeEmbeddedBroker removes the address file if it still holds this
// process's broker (another process of the config may have replaced it).
func (h *Host) removeEmbeddedBroker() {
	if h.brokerFile == "" {
		return
	}
	if b, err := os.ReadFile(h.brokerFile); err == nil && strings.TrimSpace(string(b)) == strings.Join(h.brokers, ",") {
		_ = os.Remove(h.brokerFile)
	}
	h.brokerFile = ""
}

// Brokers are the brokers the tool talks to.
func (t *TopicTool) Brokers() []string { return t.brokers }

// Close releases the tool's client.
func (t *TopicTool) Close() { t.c.Close() }

// RecordHeader is a record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// ProduceOptions says what Produce writes and how it reads its input.
type ProduceOptions struct {
	// Topic is the topic to write to; it must exist.
	Topic string
	// Format is "text" (default: one record per line) or "json" (one JSON
	// object per line: key, value, headers, timestamp, partition; see
	// the topic command's help).
	Format string
	// KeySep, in text, splits each line at its first occurrence into key
	// and value. Default "": each line is a value with a null key.
	KeySep string
	// Partition, when set, writes every record there; nil partitions by
	// key exactly as the host partitions what it writes (murmur2 of the
	// key, Kafka's default; a null key goes to a sticky partition).
	Partition *int32
	// Headers are added to every record.
	Headers []RecordHeader
}

// ProduceResult is what Produce wrote.
type ProduceResult struct {
	// Records is the number of records the brokers acknowledged;
	// ByPartition counts them by partition.
	Records     int
	ByPartition map[int32]int
}

// Produce writes one record per non-empty line of in, as it reads them,
// and returns when all are acknowledged or one failed.
func (t *TopicTool) Produce(ctx context.Context, in io.Reader, o ProduceOptions) (ProduceResult, error) {
	po := topictool.ProduceOptions{Topic: o.Topic, Format: o.Format, KeySep: o.KeySep, Partition: -1}
	if o.Partition != nil {
		if *o.Partition < 0 {
			return ProduceResult{}, fmt.Errorf("partition %d is negative", *o.Partition)
		}
		po.Partition = *o.Partition
	}
	for _, h := range o.Headers {
		po.Headers = append(po.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	r, err := t.c.Produce(ctx, in, po)
	return ProduceResult{Records: r.Records, ByPartition: r.ByPartition}, err
}

// ConsumeOptions says what Consume reads and how it writes it.
type ConsumeOptions struct {
	// Topic is the topic to read.
	Topic string
	// Partitions are the partitions to read; empty: all.
	Partitions []int32
	// From is where each partition starts: "start" (default), "end", an
	// offset N, "+N" (N after the start), "-N" (N before the end), or
	// "@TIME", the first record at or after TIME (milliseconds since the
	// epoch, RFC 3339, or a negative duration: @-10m).
	From string
	// Follow keeps reading new records until ctx ends; otherwise Consume
	// stops at the end offsets of when it started.
	Follow bool
	// Max stops after that many records; 0: no limit.
	Max int
	// Format is "text" (default: "PARTITION/OFFSET KEY VALUE {HEADERS}"),
	// "json" (one object per line, which Produce's json format reads
	// back) or a template of %t %p %o %k %v %h %d %T (topic, partition,
	// offset, key, value, headers, timestamp in ms and as RFC 3339).
	Format string
	// ReadUncommitted also reads the records of open and aborted
	// transactions. Default: committed records only, as the host reads.
	ReadUncommitted bool
}

// ConsumeResult is what Consume read.
type ConsumeResult struct {
	Records int
	// Short lists the partitions read short of their end offset: nothing
	// came for 5 s, as happens when the last offsets hold only aborted
	// records.
	Short []int32
}

// Consume reads records and writes them to out.
func (t *TopicTool) Consume(ctx context.Context, out io.Writer, o ConsumeOptions) (ConsumeResult, error) {
	r, err := t.c.Consume(ctx, out, topictool.ConsumeOptions{Topic: o.Topic, Partitions: o.Partitions, From: o.From,
		Follow: o.Follow, Max: o.Max, Format: o.Format, ReadUncommitted: o.ReadUncommitted})
	return ConsumeResult{Records: r.Records, Short: r.Short}, err
}

// ListTopics writes the cluster's topics as a table (name, partitions,
// replicas); the broker's internal topics only with internal.
func (t *TopicTool) ListTopics(ctx context.Context, w io.Writer, internal bool) error {
	topics, err := t.c.List(ctx, internal)
	if err != nil {
		return err
	}
	return topictool.PrintList(w, topics)
}

// CreateTopicOptions is a topic to create.
type CreateTopicOptions struct {
	Topic string
	// Partitions; 0: the config's kafka.topic_partitions (default 3), as
	// the host creates topics.
	Partitions int32
	// Replicas is the replication factor; 0: the broker's default.
	Replicas int16
	// Configs are topic configs, such as cleanup.policy: compact.
	Configs map[string]string
}

// CreateTopic creates a topic and returns its partitions and replication
// factor. An existing topic is an error.
func (t *TopicTool) CreateTopic(ctx context.Context, o CreateTopicOptions) (partitions int32, replicas int16, err error) {
	co := topictool.CreateOptions{Topic: o.Topic, Partitions: o.Partitions, Replicas: o.Replicas, Configs: o.Configs}
	if co.Partitions == 0 {
		co.Partitions = t.partitions
	}
	if co.Replicas == 0 {
		co.Replicas = -1
	}
	c, err := t.c.Create(ctx, co)
	return c.Partitions, c.Replicas, err
}

// DescribeTopic writes a topic's partitions (leader, replicas, offsets)
// and the configs set on it.
func (t *TopicTool) DescribeTopic(ctx context.Context, w io.Writer, topic string) error {
	return t.c.Describe(ctx, w, topic)
}
