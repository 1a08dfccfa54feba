package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probe runs when the consumer delivered nothing for IdleProbe while the
// position is short of the target. The consumer cannot tell "slow" from
// "nothing left": franz-go moves its own fetch position past batches that
// yield no record for us (compacted-away records, empty batches the cleaner
// kept) without telling us, and returns nothing at all for an empty range.
// So one Fetch request (read_committed, no wait) is sent at the position to
// the partition leader and decoded with kgo.ProcessFetchPartition, which
// returns the offset after every batch it read:
//
//   - records at or after the position are taken, as from the consumer;
//   - the position moves to that next offset (a gap with no records);
//   - no batch at all while the broker's last stable offset is at or past
//     the target: nothing is left below the target, the restore is done;
//   - OffsetOutOfRange: handled like the consumer's.
//
// A probe that fails (leader moving, connection lost) changes nothing; the
// next idle poll probes again, and StallTimeout bounds the whole. Errors that
// need the log looked at again come back as *fetchFailure, handled once the
// applier has stopped.
func (u *run) probe(ctx context.Context) error {
	u.res.Probes++
	fp, next, err := u.r.fetchOnce(ctx, u.topic, u.partition, u.pos, u.cfg.FetchMaxPartitionBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the caller sees ctx
		}
		u.log.Debug("restore: probe fetch failed", "position", u.pos, "err", err)
		return nil
	}
	if fp.Err != nil {
		switch {
		case needsHandling(fp.Err):
			return &fetchFailure{fp.Err}
		case kerr.IsRetriable(fp.Err):
			u.log.Debug("restore: probe fetch", "position", u.pos, "err", fp.Err)
			return nil
		}
		return fmt.Errorf("%w: task %s store %q: probe at %d: %w", ErrFetch, u.task, u.res.Store, u.pos, fp.Err)
	}
	before := u.pos
	for _, rec := range fp.Records {
		rec.Topic = u.topic
		u.take(rec)
	}
	if next > u.pos {
		u.pos = min(next, u.target)
	}
	if len(fp.Records) == 0 && next <= before {
		if fp.LastStableOffset >= u.target {
			u.log.Debug("restore: nothing left below the target", "position", u.pos, "target", u.target,
				"last_stable_offset", fp.LastStableOffset)
			u.pos = u.target
		} else {
			// The last stable offset went below our fixed target: the log
			// was truncated or recreated. List again and decide.
			return &fetchFailure{fmt.Errorf("%w: %d < %d", errBelowTarget, fp.LastStableOffset, u.target)}
		}
	}
	if u.pos > before {
		u.log.Debug("restore: probe moved the position", "from", before, "to", u.pos, "records", len(fp.Records))
		u.lastMove = time.Now()
	}
	return nil
}

// fetchOnce sends one read_committed Fetch for topic/partition at offset to
// the partition's leader and decodes it. It returns the decoded partition
// (records at or after offset, control records kept) and the offset after
// the last batch the response held (offset itself when it held none).
func (r *Restorer) fetchOnce(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) (kgo.FetchPartition, int64, error) {
	var none kgo.FetchPartition
	meta, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return none, offset, fmt.Errorf("metadata: %w", err)
	}
	td, ok := meta[topic]
	if !ok || td.Err != nil {
		return none, offset, fmt.Errorf("metadata: topic %s: %w (present %v)", topic, td.Err, ok)
	}
	pd, ok := td.Partitions[partition]
	if !ok || pd.Err != nil || pd.Leader < 0 {
		return none, offset, fmt.Errorf("metadata: partition %d: leader %d, %w (present %v)", partition, pd.Leader, pd.Err, ok)
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = 1 // read_committed
	req.SessionEpoch = -1  // a one-off fetch, no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic   // fetch versions below 13
	rt.TopicID = td.ID // 13 and above
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	resp, err := req.RequestWith(ctx, r.admin.Broker(int(pd.Leader)))
	if err != nil {
		return none, offset, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return none, offset, err
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic && t.TopicID != td.ID {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != partition {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: true,
				Offset:             offset,
				IsolationLevel:     kgo.ReadCommitted(),
				Topic:              topic,
				Partition:          partition,
			}, p, kgo.DefaultDecompressor(), nil)
			return fp, next, nil
		}
	}
	return none, offset, fmt.Errorf("fetch response without %s/%d", topic, partition)
}
