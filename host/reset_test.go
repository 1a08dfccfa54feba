package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/reset"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// resetCtx bounds one Reset.
func resetCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A reset is refused while the app runs, naming its members, and changes
// nothing; after the app stopped it moves the offsets back and wipes the
// state and the changelog, and a rerun counts every key from 1 again: the
// counts of the rerun equal the first run's, not doubled. Under both group
// protocols: their members are described by different requests.
func TestResetReprocessesWithEmptyState(t *testing.T) {
	for _, proto := range []GroupProtocol{ProtocolConsumer, ProtocolClassic} {
		t.Run(string(proto), func(t *testing.T) { testReset(t, proto) })
	}
}

func testReset(t *testing.T, proto GroupProtocol) {
	p := counterPipeline(t)
	p.cfg.Kafka.GroupProtocol = proto
	const n = 60 // ids 0..59 over keys k0..k29: each key twice
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte("id" + strconv.Itoa(i))}
	}
	p.b.Produce(t, recs...)
	_, stop := p.run(t)
	p.waitProcessed(t)
	changelog := p.cfg.ChangelogTopic("counts")
	log := testLogger(t)

	_, err := Reset(resetCtx(t), p.cfg, ResetOptions{Earliest: true}, log)
	var active *reset.ActiveError
	if !errors.As(err, &active) || len(active.Members) == 0 || !strings.Contains(err.Error(), "stop every process of the app") {
		t.Fatalf("reset of a running app: %v; want it refused naming the members", err)
	}
	t.Logf("refused: %v", err)
	if _, err := os.Stat(p.cfg.StateDir()); err != nil {
		t.Fatalf("a refused reset touched the state directory: %v", err)
	}
	if end := p.endOffset(t, changelog); end == 0 {
		t.Fatal("the changelog is empty after the first run")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A dry run says what it would do and does nothing.
	res, err := resetWhenStopped(t, p, ResetOptions{Earliest: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offsets[p.in]) != 3 || len(res.DeletedChangelogs) != 2 || res.StateDir != p.cfg.StateDir() {
		t.Fatalf("dry run: %+v; want 3 input partitions, the counts and time changelogs, the state directory", res)
	}
	for part, at := range res.Offsets[p.in] {
		if at != 0 {
			t.Errorf("dry run: partition %d to %d, want 0", part, at)
		}
	}
	if _, err := os.Stat(p.cfg.StateDir()); err != nil {
		t.Fatalf("a dry run removed the state directory: %v", err)
	}
	if end := p.endOffset(t, changelog); end == 0 {
		t.Fatal("a dry run emptied the changelog")
	}
	// --to-offset is clamped to each partition's end; a time after every
	// record is the end.
	ends := map[int32]int64{}
	for part, at := range committed(t, p) {
		ends[part] = at
	}
	for _, o := range []ResetOptions{{AtOffset: true, Offset: 1 << 40, DryRun: true}, {Time: time.Now().Add(time.Hour), DryRun: true}} {
		res, err := resetWhenStopped(t, p, o)
		if err != nil {
			t.Fatal(err)
		}
		for part, at := range res.Offsets[p.in] {
			if at != ends[part] {
				t.Errorf("%+v: partition %d to %d, want its end %d", o, part, at, ends[part])
			}
		}
	}

	if _, err := resetWhenStopped(t, p, ResetOptions{Earliest: true}); err != nil {
		t.Fatal(err)
	}
	for part, at := range committed(t, p) {
		if at != 0 {
			t.Errorf("after reset, partition %d is committed at %d, want 0", part, at)
		}
	}
	if _, err := os.Stat(p.cfg.StateDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory is still there: %v", err)
	}
	listed, err := p.b.Admin(t).ListTopics(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := listed[changelog]; ok && d.Err == nil {
		t.Errorf("the changelog %s still exists", changelog)
	}

	_, stop = p.run(t)
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Each id came out twice (once per run), and each run counted each
	// key 1, 2: counts 3 or 4 would be the first run's state carried over.
	out := p.b.ReadCommitted(t, p.out, 60*time.Second)
	ids, counts := map[string]int{}, map[string]int{}
	for _, o := range out {
		ids[string(o.Key)]++
		counts[string(o.Value)]++
	}
	if len(out) != 2*n {
		t.Fatalf("%d outputs, want %d (each input once per run)", len(out), 2*n)
	}
	for i := 0; i < n; i++ {
		if c := ids["id"+strconv.Itoa(i)]; c != 2 {
			t.Errorf("id%d came out %d times, want 2", i, c)
		}
	}
	for k := 0; k < 30; k++ {
		for c := 1; c <= 2; c++ {
			if got := counts[fmt.Sprintf("k%d:%d", k, c)]; got != 2 {
				t.Errorf("k%d:%d came out %d times, want 2 (once per run): counts %v", k, c, got, counts)
			}
		}
	}
}

// resetWhenStopped resets p's app once its stopped members have left the
// group (a member's leave reaches the coordinator a moment after Run
// returns on a real broker).
func resetWhenStopped(t *testing.T, p *pipeline, o ResetOptions) (ResetResult, error) {
	t.Helper()
	var res ResetResult
	var err error
	testutil.Eventually(t, 60*time.Second, func() error {
		res, err = Reset(resetCtx(t), p.cfg, o, testLogger(t))
		var active *reset.ActiveError
		if errors.As(err, &active) {
			return err
		}
		return nil
	})
	return res, err
}

// committed is the group's committed offsets of p's input.
func committed(t *testing.T, p *pipeline) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := p.b.Admin(t).FetchOffsets(ctx, p.cfg.AppID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for part, o := range offs[p.in] {
		out[part] = o.At
	}
	return out
}

// A reset of a two-hop app (split re-keys through a repartition topic,
// count counts): the repartition topic's offsets go to its end, so the
// rerun counts each word occurrence once more from 1, neither the old
// re-keyed records again (doubled) nor nothing.
func TestResetRepartitionedWordCount(t *testing.T) {
	c := newChain(t)
	c.produce(t, 100)
	stop := c.run(t)
	c.waitExact(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	p := &pipeline{b: c.b, cfg: c.cfg}
	res, err := resetWhenStopped(t, p, ResetOptions{Earliest: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offsets[c.lines]) != 3 || len(res.Offsets[c.repartitionTopic()]) != 3 {
		t.Fatalf("reset set %v; want the lines' and the repartition topic's 3 partitions", res.Offsets)
	}
	ends, err := c.b.Admin(t).ListEndOffsets(context.Background(), c.repartitionTopic())
	if err != nil {
		t.Fatal(err)
	}
	for part, at := range res.Offsets[c.repartitionTopic()] {
		if e, _ := ends.Lookup(c.repartitionTopic(), part); at != e.Offset || at == 0 {
			t.Errorf("repartition partition %d reset to %d, want its end %d", part, at, e.Offset)
		}
	}
	stop = c.run(t)
	testutil.Eventually(t, 60*time.Second, func() error {
		if _, n := c.counts(t); n < 2*c.total {
			return fmt.Errorf("%d counts out, want %d", n, 2*c.total)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, n := c.counts(t)
	if n != 2*c.total {
		t.Fatalf("%d counts out, want %d (each occurrence once per run)", n, 2*c.total)
	}
	for w, want := range c.want {
		var seq []int
		for run := 0; run < 2; run++ {
			for i := 1; i <= want; i++ {
				seq = append(seq, i)
			}
		}
		if fmt.Sprint(got[w]) != fmt.Sprint(seq) {
			t.Errorf("%s: counts %v, want 1..%d twice", w, got[w], want)
		}
	}
}
