package testdriver

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// ends reads the pipeline's inputs and tables as a task does (committed
// records only) to learn, for each partition, the offset after its last
// record: what a task must have fetched to have run everything. A
// partition's last stable offset does not say it, since transaction
// markers take offsets and are never fetched as records; this reader keeps
// them (KeepControlRecords) to know when it has read up to that offset.
type ends struct {
	cl *kgo.Client
	// seen is the offset after the last record or marker read; data the
	// offset after the last record, by topic and partition.
	seen, data map[string]map[int32]int64
}

func newEnds(k kclient.Config, topics []string) (*ends, error) {
	cl, err := k.NewClient(kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		// A poll is made only for a partition known to have more: its
		// fetch need not wait long for records.
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &ends{cl: cl, seen: map[string]map[int32]int64{}, data: map[string]map[int32]int64{}}, nil
}

// upTo reads until every partition is read to its offset in stable (last
// stable offsets listed now) and returns the offsets after the last
// records, by topic and partition.
func (e *ends) upTo(ctx context.Context, stable map[string]map[int32]int64) (map[string]map[int32]int64, error) {
	for !e.reached(stable) {
		fs := e.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s/%d: %w", t, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if e.seen[r.Topic] == nil {
				e.seen[r.Topic], e.data[r.Topic] = map[int32]int64{}, map[int32]int64{}
			}
			e.seen[r.Topic][r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				e.data[r.Topic][r.Partition] = r.Offset + 1
			}
		})
	}
	return e.data, nil
}

func (e *ends) reached(stable map[string]map[int32]int64) bool {
	for t, ps := range stable {
		for p, o := range ps {
			if e.seen[t][p] < o {
				return false
			}
		}
	}
	return true
}

func (e *ends) close() { e.cl.Close() }
