package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// RepartitionTopic is the internal topic of a processor's repartition
// output (ProcessorConfig.Repartition): created, owned and purged by the
// host.
func (c *Config) RepartitionTopic(processor, output string) string {
	return c.AppID + "-" + processor + "-" + output + "-repartition"
}

// maxTopicName is the longest topic name Kafka accepts.
const maxTopicName = 249

// repartitionRef resolves an input naming "<processor>.<output>". writer is
// the processor of the app whose name prefixes input before a dot, or nil
// when there is none (input is then a plain topic); declared reports
// whether output is one of writer's repartition outputs. Processor names
// may contain dots: the longest matching name wins.
func (c *Config) repartitionRef(input string) (writer *ProcessorConfig, output string, declared bool) {
	for i := range c.Processors {
		w := &c.Processors[i]
		rest, ok := strings.CutPrefix(input, w.Name+".")
		if !ok || w.Name == "" || rest == "" || (writer != nil && len(w.Name) < len(writer.Name)) {
			continue
		}
		writer, output, declared = w, rest, slices.Contains(w.Repartition, rest)
	}
	return writer, output, declared
}

// inputTopic is the topic an input names: the internal topic of a
// repartition output it refers to, or the input itself.
func (c *Config) inputTopic(input string) string {
	if w, out, ok := c.repartitionRef(input); ok {
		return c.RepartitionTopic(w.Name, out)
	}
	return input
}

// inputTopics are the topics p reads, in the order of its inputs (the
// record's input index).
func (c *Config) inputTopics(p *ProcessorConfig) []string {
	out := make([]string, len(p.Inputs))
	for i, in := range p.Inputs {
		out[i] = c.inputTopic(in)
	}
	return out
}

// repartitionInputs are the internal topics among p's inputs.
func (c *Config) repartitionInputs(p *ProcessorConfig) []string {
	var out []string
	for _, in := range p.Inputs {
		if w, o, ok := c.repartitionRef(in); ok {
			out = append(out, c.RepartitionTopic(w.Name, o))
		}
	}
	return out
}

// outputTopics maps every output p's plugin may emit to, its outputs and
// its repartition outputs, to its topic.
func (c *Config) outputTopics(p *ProcessorConfig) map[string]string {
	out := make(map[string]string, len(p.Outputs)+len(p.Repartition))
	for name, o := range p.Outputs {
		out[name] = o.Topic
	}
	for _, name := range p.Repartition {
		out[name] = c.RepartitionTopic(p.Name, name)
	}
	return out
}

// latestOutputs reports, for each of names (p's outputs by output index),
// whether it takes the latest record per key (emit: latest_per_key); nil
// when none does.
func (c *Config) latestOutputs(p *ProcessorConfig, names []string) []bool {
	var latest []bool
	for i, name := range names {
		if p.Outputs[name].Emit == EmitLatestPerKey {
			if latest == nil {
				latest = make([]bool, len(names))
			}
			latest[i] = true
		}
	}
	return latest
}

// internalOutputs reports, for each of topics (p's output topics by output
// index), whether it is one of p's repartition topics; nil when p has none.
func (c *Config) internalOutputs(p *ProcessorConfig, topics []string) []bool {
	if len(p.Repartition) == 0 {
		return nil
	}
	internal := make([]bool, len(topics))
	for i, t := range topics {
		for _, name := range p.Repartition {
			internal[i] = internal[i] || t == c.RepartitionTopic(p.Name, name)
		}
	}
	return internal
}

// repartitionTopics maps each of p's repartition outputs to its topic;
// nil when p has none.
func (c *Config) repartitionTopics(p *ProcessorConfig) map[string]string {
	if len(p.Repartition) == 0 {
		return nil
	}
	out := make(map[string]string, len(p.Repartition))
	for _, name := range p.Repartition {
		out[name] = c.RepartitionTopic(p.Name, name)
	}
	return out
}

// purgeTimeout bounds one purge round's requests.
const purgeTimeout = 10 * time.Second

// purgeRepartitions deletes, every kafka.repartition_purge_interval until
// ctx ends, the records of the app's repartition topics below the offsets
// the app's consumer group has committed on them: those records are
// processed and their effects committed (under exactly_once in the
// reader's transaction), so no task of the app reads them again. Every
// process of the app does this; DeleteRecords is idempotent and never
// moves a log start back, so concurrent rounds are harmless. Failures are
// logged and retried at the next round.
func (h *Host) purgeRepartitions(ctx context.Context) {
	want := map[string]bool{}
	for i := range h.cfg.Processors {
		for _, t := range h.cfg.repartitionTopics(&h.cfg.Processors[i]) {
			want[t] = true
		}
	}
	if len(want) == 0 {
		return
	}
	cl, err := h.kafka.NewClient()
	if err != nil {
		h.log.Warn("repartition purge: no Kafka client; repartition topics are not purged by this process", "err", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// purged[topic][partition] is the offset this process last deleted
	// below: a partition is asked again only when its commit moved past it.
	purged := map[string]map[int32]int64{}
	tick := time.NewTicker(h.cfg.Kafka.RepartitionPurgeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, purgeTimeout)
		h.purgeRound(rctx, adm, want, purged)
		cancel()
	}
}

// purgeRound is one round of purgeRepartitions.
func (h *Host) purgeRound(ctx context.Context, adm *kadm.Client, want map[string]bool, purged map[string]map[int32]int64) {
	committed, err := adm.FetchOffsets(ctx, h.cfg.AppID)
	if err != nil {
		if !errors.Is(err, context.Canceled) { // canceled: Run is ending
			h.log.Warn("repartition purge: fetching the group's committed offsets", "group", h.cfg.AppID, "err", err)
		}
		return
	}
	below := kadm.Offsets{}
	committed.Each(func(o kadm.OffsetResponse) {
		if !want[o.Topic] || o.Err != nil || o.At <= 0 || o.At <= purged[o.Topic][o.Partition] {
			return
		}
		below.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.At, LeaderEpoch: -1})
	})
	if len(below) == 0 {
		return
	}
	resps, err := adm.DeleteRecords(ctx, below)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			h.log.Warn("repartition purge: deleting processed records", "err", err)
		}
		return
	}
	for _, ps := range resps {
		for _, r := range ps {
			if r.Err != nil {
				h.log.Warn("repartition purge: deleting processed records", "topic", r.Topic, "partition", r.Partition, "err", r.Err)
				continue
			}
			if purged[r.Topic] == nil {
				purged[r.Topic] = map[int32]int64{}
			}
			o, _ := below.Lookup(r.Topic, r.Partition)
			purged[r.Topic][r.Partition] = o.At
		}
	}
}
