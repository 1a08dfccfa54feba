//go:build unix

package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// input is one acknowledged input record: a unique id (the value), its key,
// and where it landed.
type input struct {
	id, key   string
	topic     string
	partition int32
	offset    int64
	ts        int64 // its timestamp, ms
}

// produce writes n records (unique ids, keys from numKeys) synchronously
// and remembers where they landed.
func (h *harness) produce(ctx context.Context, n int) error {
	h.producerMu.Lock()
	if h.records != nil {
		recs := h.records(h, n)
		h.producerMu.Unlock()
		if len(recs) == 0 {
			return nil
		}
		return h.send(ctx, recs)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := fmt.Sprintf("id-%07d", h.nextID)
		h.nextID++
		key := fmt.Sprintf("k%02d", h.rng.IntN(numKeys))
		recs[i] = &kgo.Record{Topic: h.in, Key: []byte(key), Value: []byte(id)}
		if h.eventTime != nil {
			recs[i].Timestamp = time.UnixMilli(h.eventTime(h.rng))
		}
	}
	h.producerMu.Unlock()
	return h.send(ctx, recs)
}

// send writes recs (ids as values) synchronously and remembers where they
// landed.
//
// Every record acknowledged is remembered, also when others of the same
// call failed: a steady producer stopped by canceling its context fails
// the records of the partitions whose batches were not sent yet, while
// the other partitions' records of the call are written and must be
// processed. The failed ones were not written: the producer is
// idempotent, and franz-go fails a record on a canceled context only
// before its batch was sent (kgo.Client.Produce's documentation).
func (h *harness) send(ctx context.Context, recs []*kgo.Record) error {
	n := len(recs)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := h.prod.ProduceSync(ctx, recs...)
	h.producerMu.Lock()
	for _, r := range res {
		if r.Err != nil {
			continue
		}
		h.inputs = append(h.inputs, input{id: string(r.Record.Value), key: string(r.Record.Key), topic: r.Record.Topic, partition: r.Record.Partition, offset: r.Record.Offset,
			ts: r.Record.Timestamp.UnixMilli()})
	}
	h.producerMu.Unlock()
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("producing %d input records: %w", n, err)
	}
	return nil
}

// produceNow writes a burst of n records from the test goroutine.
func (h *harness) produceNow(n int) {
	h.t.Helper()
	if err := h.produce(context.Background(), n); err != nil {
		h.t.Fatal(err)
	}
}

// checkInputsRecorded fails the test unless the input topics hold exactly
// the records the harness remembers as acknowledged: the reference every
// check computes is only as good as that list, and an input written but
// not remembered reads as an output "never produced".
func (h *harness) checkInputsRecorded() {
	h.t.Helper()
	want := map[string]bool{}
	for _, in := range h.acked() {
		want[in.id] = true
	}
	var extra []string
	n := 0
	for _, topic := range h.inTopics() {
		for _, r := range h.b.ReadCommitted(h.t, topic, 60*time.Second) {
			n++
			if id := string(r.Value); !want[id] {
				extra = append(extra, fmt.Sprintf("%s (%s/%d@%d)", id, topic, r.Partition, r.Offset))
			}
		}
	}
	if len(extra) > 0 || n != len(want) {
		if len(extra) > 10 {
			extra = append(extra[:10], "...")
		}
		h.t.Fatalf("harness: the input topics hold %d records, the harness remembers %d acknowledged; not remembered: %v", n, len(want), extra)
	}
}

func (h *harness) acked() []input {
	h.producerMu.Lock()
	defer h.producerMu.Unlock()
	return append([]input(nil), h.inputs...)
}

// steady is a background producer writing at a constant rate.
type steady struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	n      int // records written
}

// produceSteadily writes total records evenly over d (in a batch every
// 20 ms) in the background; total <= 0 means until stopped, at rate per
// second.
func (h *harness) produceSteadily(total int, d time.Duration, rate int) *steady {
	ctx, cancel := context.WithCancel(context.Background())
	s := &steady{cancel: cancel, done: make(chan struct{})}
	if total > 0 {
		rate = int(float64(total) / d.Seconds())
	}
	go func() {
		defer close(s.done)
		start := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			want := int(time.Since(start).Seconds() * float64(rate))
			if total > 0 && want > total {
				want = total
			}
			if n := want - s.n; n > 0 {
				if err := h.produce(ctx, n); err != nil {
					if ctx.Err() == nil {
						s.err = err
					}
					return
				}
				s.n += n
			}
			if total > 0 && s.n >= total {
				return
			}
		}
	}()
	return s
}

// finish waits up to bound for the producer to write everything (stop
// ends an endless one first) and fails the test on a produce error.
func (s *steady) finish(h *harness, stop bool, bound time.Duration) {
	h.t.Helper()
	if stop {
		s.cancel()
	}
	select {
	case <-s.done:
	case <-time.After(bound):
		s.cancel()
		<-s.done
		h.t.Fatalf("the input producer did not finish within %v (%d records written)", bound, s.n)
	}
	s.cancel()
	if s.err != nil {
		h.t.Fatal(s.err)
	}
}
