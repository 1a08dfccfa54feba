package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/replay"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
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

// replayDiffOnce is ReplayDiff of the counter (the config's plugin)
// against against, failing the test on an error.
func replayDiffOnce(t *testing.T, p *pipeline, o ReplayOptions, against []byte, samples int) ReplayDiffResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := ReplayDiff(ctx, p.cfg, o, against, samples, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// counterInput produces ids 0..n-1 over keys k0..k29, one second apart,
// then one record of value "trap" (which every counter variant fails).
func counterInput(t *testing.T, p *pipeline, n int) {
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	recs := make([]*kgo.Record, 0, n+1)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte("id" + strconv.Itoa(i)),
			Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte("k0"), Value: []byte("trap"), Timestamp: base.Add(time.Duration(n) * time.Second)})
	p.b.Produce(t, recs...)
}

// --diff-against a variant that changes its output for keys k7, k17 and
// k27 finds exactly those keys' records, with both sides' emits and the
// input's place; a record both fail is not a difference; a version diffed
// against itself is identical.
func TestReplayDiffFindsPlantedDifference(t *testing.T) {
	p := counterPipeline(t)
	const n = 90 // each key three times
	counterInput(t, p, n)
	variant, err := os.ReadFile(wasmbuild.Build(t, "./internal/testplugins/counterdiff"))
	if err != nil {
		t.Fatal(err)
	}

	res := replayDiffOnce(t, p, ReplayOptions{Processor: "proc", To: -1}, variant, 1000)
	want := ReplayDiffTask{Partition: -1, Records: n + 1, Matching: n - 9, Differing: 9, Failed: 1, AgainstFailed: 1, FailedBoth: 1}
	if res.Total != want || res.Identical() || len(res.Tasks) != 3 {
		t.Fatalf("diff: total %+v over %d tasks; want %+v over 3", res.Total, len(res.Tasks), want)
	}
	sum := 0
	for _, c := range res.Tasks {
		sum += c.Differing
	}
	if sum != 9 {
		t.Fatalf("tasks' differing records sum to %d, want 9: %+v", sum, res.Tasks)
	}
	if len(res.Samples) != 9 {
		t.Fatalf("%d samples, want the 9 differing records: %+v", len(res.Samples), res.Samples)
	}
	seen := map[string]int{}
	for _, s := range res.Samples {
		if len(s.Version.Emits) != 1 || len(s.Against.Emits) != 1 || s.Version.Error != "" || s.Against.Error != "" {
			t.Fatalf("sample %+v: want one emit on each side", s)
		}
		a, b := s.Version.Emits[0], s.Against.Emits[0]
		key, _, _ := strings.Cut(string(a.Value), ":")
		if !strings.HasSuffix(key, "7") || string(b.Value) != string(a.Value)+"!" || string(a.Key) != string(b.Key) {
			t.Errorf("sample of %s: %q vs %q; want a key ending in 7 and the variant's value with a '!'", a.Key, a.Value, b.Value)
		}
		if s.In.Topic != p.in || a.Output != "out" || a.Topic != p.out || b.Topic != p.out {
			t.Errorf("sample's input %+v, emits %+v and %+v: want %s in, output out to %s", s.In, a, b, p.in, p.out)
		}
		seen[key]++
	}
	if len(seen) != 3 || seen["k7"] != 3 || seen["k17"] != 3 || seen["k27"] != 3 {
		t.Fatalf("differing keys %v, want k7, k17 and k27 three times each", seen)
	}

	// The sample is bounded; the counts are not.
	capped := replayDiffOnce(t, p, ReplayOptions{Processor: "proc", To: -1}, variant, 4)
	if len(capped.Samples) != 4 || capped.Total != want {
		t.Fatalf("with 4 samples: %d samples, total %+v", len(capped.Samples), capped.Total)
	}
	for i, s := range capped.Samples {
		if s.In != res.Samples[i].In {
			t.Fatalf("sample %d is of %+v, want the first ones (%+v)", i, s.In, res.Samples[i].In)
		}
	}

	same := replayDiffOnce(t, p, ReplayOptions{Processor: "proc", To: -1}, nil, 20)
	if !same.Identical() || same.Total.Matching != n || same.Total.FailedBoth != 1 || len(same.Samples) != 0 {
		t.Fatalf("the counter against itself: %+v, %d samples; want identical", same.Total, len(same.Samples))
	}
}

// --state current starts each task from the app's stores: after the app
// counted every key to 2, a replay of the same 60 records counts them on
// to 3 and 4 (from empty state: 1 and 2). It refuses while the app runs and when there is
// no state, and writes nothing to the directory.
func TestReplayFromCurrentState(t *testing.T) {
	p := counterPipeline(t)
	const n = 60 // each key twice
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte("id" + strconv.Itoa(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if _, err := Replay(ctx, p.cfg, ReplayOptions{Processor: "proc", To: -1, State: ReplayStateCurrent}, io.Discard, testLogger(t)); !errors.Is(err, ErrNoState) ||
		!strings.Contains(err.Error(), "no state database in "+p.cfg.StateDir()) {
		t.Fatalf("replay --state current before the app ever ran: %v; want ErrNoState naming the directory", err)
	}

	p.b.Produce(t, recs...)
	_, stop := p.run(t)
	p.waitProcessed(t)
	_, err := Replay(ctx, p.cfg, ReplayOptions{Processor: "proc", To: -1, State: ReplayStateCurrent}, io.Discard, testLogger(t))
	if !errors.Is(err, ErrStateInUse) || !strings.Contains(err.Error(), "held by a running process") {
		t.Fatalf("replay --state current while the app runs: %v; want ErrStateInUse", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	before := dirDigest(t, p.cfg.StateDir())

	values := func(st ReplayState) map[string]bool {
		var buf bytes.Buffer
		res, err := Replay(ctx, p.cfg, ReplayOptions{Processor: "proc", To: -1, State: st}, &buf, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if res.Records != n {
			t.Fatalf("replay: %+v, want %d records", res, n)
		}
		out := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var line replay.Line
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			out[string(line.Value)] = true
		}
		return out
	}
	empty, current := values(ReplayStateEmpty), values(ReplayStateCurrent)
	for k := 0; k < 30; k++ {
		for c := 1; c <= 2; c++ {
			if !empty[fmt.Sprintf("k%d:%d", k, c)] {
				t.Errorf("from empty state, no k%d:%d", k, c)
			}
			if !current[fmt.Sprintf("k%d:%d", k, c+2)] {
				t.Errorf("from the app's state (each key at 2), no k%d:%d", k, c+2)
			}
		}
	}
	if t.Failed() {
		t.Fatalf("empty: %v\ncurrent: %v", empty, current)
	}
	if after := dirDigest(t, p.cfg.StateDir()); after != before {
		t.Fatalf("replay --state current changed the state directory:\n%s\n---\n%s", before, after)
	}

	// A partition the directory holds no state of (added after the app
	// ran) is refused, naming the ones it holds; --partitions picks those.
	if _, err := p.b.Admin(t).CreatePartitions(ctx, 1, p.in); err != nil {
		t.Fatal(err)
	}
	_, err = Replay(ctx, p.cfg, ReplayOptions{Processor: "proc", To: -1, State: ReplayStateCurrent}, io.Discard, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "partition(s) [3]") || !strings.Contains(err.Error(), "[0 1 2], with --partitions") {
		t.Fatalf("replay --state current with a partition of no local state: %v", err)
	}
	if res, err := Replay(ctx, p.cfg, ReplayOptions{Processor: "proc", To: -1, State: ReplayStateCurrent, Partitions: []int32{0, 1, 2}}, io.Discard, testLogger(t)); err != nil || res.Records != n {
		t.Fatalf("replay --state current of the local partitions: %+v, %v", res, err)
	}
}

// dirDigest lists every file under dir with its size and content hash.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %x\n", strings.TrimPrefix(path, dir), len(data), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
