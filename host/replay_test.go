package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/replay"
)

func replayOnce(t *testing.T, p *pipeline, o ReplayOptions) ([]byte, ReplayResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	res, err := Replay(ctx, p.cfg, o, &buf, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res
}

// Replay of the counter over its whole input, twice, gives byte-identical
// output; each task counts from empty state; the app's group, outputs and
// changelog are untouched; --from/--to and --partitions bound it.
func TestReplayIsDeterministicAndOffline(t *testing.T) {
	p := counterPipeline(t)
	const n = 90 // ids 0..89 over keys k0..k29: each key three times
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte("id" + strconv.Itoa(i)),
			Timestamp: base.Add(time.Duration(i) * time.Second),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}}}
	}
	p.b.Produce(t, recs...)

	first, res := replayOnce(t, p, ReplayOptions{Processor: "proc", To: -1})
	second, _ := replayOnce(t, p, ReplayOptions{Processor: "proc", To: -1})
	if !bytes.Equal(first, second) {
		t.Fatalf("two replays of the same range differ:\n%s\n---\n%s", first, second)
	}
	if res.Tasks != 3 || res.Records != n || res.Emitted != n || res.Failed != 0 {
		t.Fatalf("replay: %+v; want 3 tasks, %d records in and emitted", res, n)
	}
	lines := strings.Split(strings.TrimSpace(string(first)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	counts := map[string]int{}
	lastPart := int32(-1)
	for _, l := range lines {
		var line replay.Line
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if line.In.Partition < lastPart {
			t.Fatalf("task %d after task %d: tasks run in partition order", line.In.Partition, lastPart)
		}
		lastPart = line.In.Partition
		if line.Output != "out" || line.Topic != p.out || line.In.Topic != p.in {
			t.Fatalf("line %q: want output out to %s from %s", l, p.out, p.in)
		}
		counts[string(line.Value)]++
	}
	// Keys hash to one partition each, so each task counts its keys 1, 2, 3.
	for k := 0; k < 30; k++ {
		for c := 1; c <= 3; c++ {
			if got := counts[fmt.Sprintf("k%d:%d", k, c)]; got != 1 {
				t.Errorf("k%d:%d came out %d times, want once: %v", k, c, got, counts)
			}
		}
	}

	// Offline: no group offsets, no output, no changelog records.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if offs, err := p.b.Admin(t).FetchOffsets(ctx, p.cfg.AppID); err == nil && len(offs) > 0 {
		t.Errorf("replay committed offsets for the app's group: %v", offs)
	}
	if e := p.endOffset(t, p.out); e != 0 {
		t.Errorf("replay wrote %d records to the output", e)
	}

	// A time range: ids 30..59 only, in whatever partition.
	byTime, res := replayOnce(t, p, ReplayOptions{Processor: "proc", To: -1, FromTime: base.Add(30 * time.Second), ToTime: base.Add(60 * time.Second)})
	if res.Records != 30 {
		t.Fatalf("replay of a 30 s range: %+v; want 30 records", res)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(byTime)), "\n") {
		var line replay.Line
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(string(line.Key), "id"))
		if id < 30 || id >= 60 {
			t.Errorf("id%d is outside the time range", id)
		}
	}

	// A range of partition 0: offsets 1 and 2 only.
	part, _ := replayOnce(t, p, ReplayOptions{Processor: "proc", From: 1, To: 3, Partitions: []int32{0}})
	got := strings.Split(strings.TrimSpace(string(part)), "\n")
	if len(got) != 2 {
		t.Fatalf("replay of partition 0 [1, 3): %q; want 2 lines", part)
	}
	for i, l := range got {
		var line replay.Line
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		if line.In.Partition != 0 || line.In.Offset != int64(i+1) {
			t.Errorf("line %d is of %+v, want partition 0 offset %d", i, line.In, i+1)
		}
	}
}
