package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// The load counts exactly what the broker holds: every acknowledged line
// is in the word count's input, in the partition of its words, and the
// words counted are the words there; every acknowledged record is in the
// passthrough's input. It stops when told.
func TestLoadCountsWhatTheBrokerHolds(t *testing.T) {
	b := testbroker.New(t)
	lines, recs := b.Name(t, "soak-lines"), b.Name(t, "soak-records")
	b.CreateTopic(t, lines, 4, nil)
	b.CreateTopic(t, recs, 4, nil)
	vocab, err := NewVocab(100, 4)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(time.Minute))
	l := &Load{cl: cl, vocab: vocab, linesTopic: lines, recsTopic: recs, partitions: 4, words: 3, counts: map[string]int64{}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, 400, 100) }()
	testutil.Eventually(t, 30*time.Second, func() error {
		if n, _, r, _, _ := l.Totals(); n < 200 || r < 50 {
			return fmt.Errorf("%d lines and %d records acknowledged, want 200 and 50", n, r)
		}
		return nil
	})
	stop()
	<-done

	nLines, nWords, nRecs, failures, firstErr := l.Totals()
	if failures != 0 {
		t.Fatalf("%d records failed; first: %v", failures, firstErr)
	}
	got := map[string]int64{}
	var words int64
	read := b.ReadCommitted(t, lines, 30*time.Second)
	for _, r := range read {
		for _, w := range strings.Fields(string(r.Value)) {
			if p := wordPartition(w, 4); int32(p) != r.Partition {
				t.Fatalf("word %s in partition %d, belongs to %d", w, r.Partition, p)
			}
			got[w]++
			words++
		}
	}
	if int64(len(read)) != nLines || words != nWords {
		t.Fatalf("the broker holds %d lines of %d words, the load counted %d of %d", len(read), words, nLines, nWords)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for w, n := range l.counts {
		if got[w] != n {
			t.Fatalf("word %s: %d in the topic, %d counted", w, got[w], n)
		}
	}
	if n := int64(len(b.ReadCommitted(t, recs, 30*time.Second))); n != nRecs {
		t.Fatalf("the broker holds %d passthrough records, the load counted %d", n, nRecs)
	}
}
