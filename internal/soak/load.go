package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vocab is the word count's input vocabulary, split by partition: every
// word lives in one partition of the input and a line holds words of its
// own partition only, so plugins/wordcount (which counts where records
// arrive, one task per partition) counts each word in one task, and its
// store holds the true count of every word.
type Vocab struct {
	byPartition [][]string
}

// NewVocab makes n words ("w0000", ...) spread over partitions by hash.
// Every partition gets at least one word when n is large enough; it fails
// otherwise.
func NewVocab(n, partitions int) (*Vocab, error) {
	v := &Vocab{byPartition: make([][]string, partitions)}
	for i := 0; i < n; i++ {
		w := fmt.Sprintf("w%04d", i)
		p := wordPartition(w, partitions)
		v.byPartition[p] = append(v.byPartition[p], w)
	}
	for p, ws := range v.byPartition {
		if len(ws) == 0 {
			return nil, fmt.Errorf("vocabulary of %d words leaves partition %d empty", n, p)
		}
	}
	return v, nil
}

func wordPartition(w string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(w))
	return int(h.Sum32() % uint32(partitions))
}

// Line draws a line of words words for partition p.
func (v *Vocab) Line(rng *rand.Rand, p, words int) []string {
	ws := v.byPartition[p]
	line := make([]string, words)
	for i := range line {
		line[i] = ws[rng.IntN(len(ws))]
	}
	return line
}

// Load produces the soak's input at steady rates until stopped: lines of
// words to the word count's input, records to the passthrough's. It counts
// what the brokers acknowledged: the truth the end checks against.
type Load struct {
	cl         *kgo.Client
	vocab      *Vocab
	linesTopic string
	recsTopic  string
	partitions int
	words      int

	mu       sync.Mutex
	counts   map[string]int64 // words acknowledged
	lines    int64
	records  int64 // passthrough records acknowledged
	failures int64
	firstErr error
}

// Run produces linesPerSec lines and recordsPerSec records per second, in
// ticks of 50 ms, until ctx ends, then waits (a minute at most) for the
// acknowledgements. It never blocks on a full buffer: TryProduce fails a
// record the client has no room for (a stalled or lost broker), which
// counts as a failure, so the soak stops on time whatever the broker does.
// The client should have a RecordDeliveryTimeout for the same reason.
func (l *Load) Run(ctx context.Context, linesPerSec, recordsPerSec int) {
	const tick = 50 * time.Millisecond
	perTick := func(rate int) float64 { return float64(rate) * tick.Seconds() }
	rng := rand.New(rand.NewPCG(1, 2))
	t := time.NewTicker(tick)
	defer t.Stop()
	var lineDebt, recDebt float64
	var next int64
	for ctx.Err() == nil {
		lineDebt += perTick(linesPerSec)
		recDebt += perTick(recordsPerSec)
		for ; lineDebt >= 1; lineDebt-- {
			p := rng.IntN(l.partitions)
			line := l.vocab.Line(rng, p, l.words)
			r := &kgo.Record{Topic: l.linesTopic, Partition: int32(p), Value: []byte(strings.Join(line, " "))}
			l.cl.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) { l.ackLine(line, err) })
		}
		for ; recDebt >= 1; recDebt-- {
			key := "p" + strconv.FormatInt(next, 10)
			next++
			r := &kgo.Record{Topic: l.recsTopic, Partition: int32(next % int64(l.partitions)), Key: []byte(key), Value: make([]byte, 100)}
			l.cl.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) { l.ackRecord(err) })
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.cl.Flush(fctx); err != nil {
		l.fail(fmt.Errorf("flushing the input: %w", err))
	}
}

func (l *Load) ackLine(line []string, err error) {
	if err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines++
	for _, w := range line {
		l.counts[w]++
	}
}

func (l *Load) ackRecord(err error) {
	if err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	l.records++
	l.mu.Unlock()
}

func (l *Load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures++
	if l.firstErr == nil {
		l.firstErr = err
	}
}

// Totals returns what was acknowledged so far.
func (l *Load) Totals() (lines, words, records, failures int64, firstErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.counts {
		words += n
	}
	return l.lines, words, l.records, l.failures, l.firstErr
}
