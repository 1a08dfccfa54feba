//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The windowed count of TestWindowsExactlyOnceSIGKILL: plugins/windowcount,
// tumbling windows of windowSize ms accepting records up to windowGrace ms
// of stream time after their end, each window emitted once when it closes.
const (
	windowSize  = 1000
	windowGrace = 500
)

var windowApp = app{
	processor: "windowcount",
	pkg:       "./plugins/windowcount",
	store:     "windows",
	output:    "counts",
	config:    map[string]string{"window": "tumbling", "size": "1s", "grace": "500ms", "emit": "final"},
	timeStore: true,
}

// windowEventTime stamps an input record with the wall clock less a delay:
// mostly under 300 ms (in order enough), one in ten 300 ms-1 s (out of
// order, late or not depending on what its partition saw before), one in
// twenty 1-3 s (late, nearly always).
func windowEventTime(rng *rand.Rand) int64 {
	now := time.Now().UnixMilli()
	switch r := rng.IntN(100); {
	case r < 85:
		return now - rng.Int64N(300)
	case r < 95:
		return now - 300 - rng.Int64N(700)
	default:
		return now - 1000 - rng.Int64N(2000)
	}
}

// TestWindowsExactlyOnceSIGKILL: windows results exactly once.
// Three processes of one exactly_once app run plugins/windowcount (1 s
// tumbling windows, 500 ms grace, emit final) while input with event
// timestamps near the wall clock, some out of order and some late, is
// produced steadily; every 2-4 s one of them is SIGKILLed and restarted on
// its state directory, as in TestCrashSIGKILL, so windows close (their
// event-time timers fire) in transactions that are aborted, on tasks that
// move and are restored. After six kills the input stops and each input
// partition gets one record a minute past every other, which closes every
// earlier window of its task. Once drained, the committed output must hold
// every window that closed exactly once, with the count of its records
// that were in time, and nothing else; the late records must be counted in
// the store, and the local stores (the windows and the time store) must
// equal their changelogs.
//
// The reference follows sdk/window: stream time is per task, that is per
// input partition, the largest timestamp seen so far in offset order; a
// record is late when that stream time, before it, is at or past its
// window's end plus the grace; a window [start, end) is closed once its
// partition's stream time reaches end plus the grace.
func TestWindowsExactlyOnceSIGKILL(t *testing.T) {
	h := newHarness(t, exactlyOnce, 3, 150*time.Second, withApp(windowApp), withEventTime(windowEventTime))
	h.startGroup(3)

	const rate, kills = 120, 6
	prod := h.produceSteadily(0, 0, rate)
	h.killChurn(kills)
	h.sleep(time.Second) // the last restart too sees input
	prod.finish(h, true, 30*time.Second)
	h.closeEveryWindow(60 * time.Second)
	h.waitDrained(90 * time.Second)
	h.stopAll()
	h.failOnUnexpectedExits()
	h.checkWindows()
	h.summary()
	h.checkLocalStores()
}

// closeEveryWindow writes one record to each input partition, ahead by
// later past the latest input timestamp: it moves every task's stream time
// past every window of the input so far, and its own window stays open.
func (h *harness) closeEveryWindow(later time.Duration) {
	h.t.Helper()
	keyOf := map[int32]string{}
	var maxTS int64
	for _, in := range h.acked() {
		keyOf[in.partition] = in.key
		maxTS = max(maxTS, in.ts)
	}
	ts := time.UnixMilli(maxTS + later.Milliseconds())
	var recs []*kgo.Record
	for p := range int32(inputPartitions) {
		key, ok := keyOf[p]
		if !ok {
			h.t.Fatalf("no input record landed on partition %d: no key known to go there", p)
		}
		recs = append(recs, &kgo.Record{Topic: h.in, Key: []byte(key), Value: []byte(fmt.Sprintf("final-%d", p)), Timestamp: ts})
	}
	if err := h.send(context.Background(), recs); err != nil {
		h.t.Fatal(err)
	}
	for _, r := range recs {
		if want := strings.TrimPrefix(string(r.Value), "final-"); fmt.Sprint(r.Partition) != want {
			h.t.Fatalf("the closing record %s with key %s landed on partition %d", r.Value, r.Key, r.Partition)
		}
	}
	h.t.Logf("closing records: one per input partition at %s (%v past the latest input)", ts.Format("15:04:05.000"), later)
}

// windowID names one window of one key.
type windowID struct {
	key   string
	start int64
}

func (w windowID) String() string { return fmt.Sprintf("%s@%d", w.key, w.start) }

// windowRef is a window of the reference.
type windowRef struct {
	partition int32 // the input partition (task) of its key
	count     int   // its records in time
	maxTS     int64 // the largest of their timestamps
	closed    bool  // its task's stream time reached end+grace
}

// windowReference computes, from the acknowledged input in offset order
// per partition, every window with the records it accepted, which closed,
// and the late records per partition.
func windowReference(inputs []input) (windows map[windowID]*windowRef, late map[int32]int, stream map[int32]int64) {
	sorted := append([]input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].partition != sorted[j].partition {
			return sorted[i].partition < sorted[j].partition
		}
		return sorted[i].offset < sorted[j].offset
	})
	windows, late, stream = map[windowID]*windowRef{}, map[int32]int{}, map[int32]int64{}
	for _, in := range sorted {
		start := in.ts / windowSize * windowSize
		end := start + windowSize
		st, seen := stream[in.partition]
		stream[in.partition] = max(st, in.ts) // moved before the record is processed
		if seen && st >= end+windowGrace {    // in.ts < end: only the earlier records can make it late
			late[in.partition]++
			continue
		}
		id := windowID{in.key, start}
		w := windows[id]
		if w == nil {
			w = &windowRef{partition: in.partition, maxTS: in.ts}
			windows[id] = w
		}
		w.count++
		w.maxTS = max(w.maxTS, in.ts)
	}
	for id, w := range windows {
		w.closed = stream[w.partition] >= id.start+windowSize+windowGrace
	}
	return windows, late, stream
}

// emitted is one window result in the committed output.
type emitted struct {
	Start, End int64
	Count      int
	ts         int64
	part       int32
	off        int64
	pid        int64
	epoch      int16
}

func (e emitted) String() string {
	return fmt.Sprintf("count %d (end %d, ts %d) at out %d@%d pid %d epoch %d", e.Count, e.End, e.ts, e.part, e.off, e.pid, e.epoch)
}

// checkWindows checks the committed output of windowcount against the
// reference: every closed window exactly once, with its end, count and
// timestamp (the largest of its records'), and no other window; and, in
// the store's committed changelog, each task's late-record count and as
// many open windows as the reference has.
func (h *harness) checkWindows() {
	h.t.Helper()
	h.waitSettled()
	inputs := h.acked()
	ref, late, stream := windowReference(inputs)

	kinds := []string{"missing", "repeated", "unexpected", "count", "state"}
	problems := map[string][]string{}
	bad := func(kind, format string, args ...any) {
		problems[kind] = append(problems[kind], fmt.Sprintf(format, args...))
	}
	outs := h.b.ReadCommitted(h.t, h.out, 60*time.Second)
	got := map[windowID][]emitted{}
	for _, r := range outs {
		var e emitted
		if err := json.Unmarshal(r.Value, &e); err != nil || r.Value == nil {
			bad("unexpected", "output record key %q value %q at %d@%d is not a window result: %v", r.Key, r.Value, r.Partition, r.Offset, err)
			continue
		}
		e.ts, e.part, e.off, e.pid, e.epoch = r.Timestamp.UnixMilli(), r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch
		id := windowID{string(r.Key), e.Start}
		got[id] = append(got[id], e)
	}
	closed, open, lateTotal := 0, 0, 0
	for _, n := range late {
		lateTotal += n
	}
	var repeatedIDs, missingIDs []windowID
	for id, w := range ref {
		es := got[id]
		if !w.closed {
			open++
			if len(es) > 0 {
				bad("unexpected", "window %s (input partition %d, stream time %d) is still open (closes at %d) but was emitted: %v",
					id, w.partition, stream[w.partition], id.start+windowSize+windowGrace, es)
			}
			continue
		}
		closed++
		switch {
		case len(es) == 0:
			missingIDs = append(missingIDs, id)
			bad("missing", "window %s (input partition %d, %d records, closed by stream time %d) has no committed result", id, w.partition, w.count, stream[w.partition])
			continue
		case len(es) > 1:
			repeatedIDs = append(repeatedIDs, id)
			bad("repeated", "window %s (input partition %d, %d records) has %d committed results, want 1: %v", id, w.partition, w.count, len(es), es)
		}
		for _, e := range es {
			if e.Count != w.count || e.End != id.start+windowSize || e.ts != w.maxTS {
				bad("count", "window %s (input partition %d): committed %v, want count %d, end %d, timestamp %d",
					id, w.partition, e, w.count, id.start+windowSize, w.maxTS)
			}
		}
	}
	for id, es := range got {
		if _, ok := ref[id]; !ok {
			bad("unexpected", "window %s was emitted but no record was in time for it: %v", id, es)
		}
	}

	// The store's committed state: each task's late count, and its open
	// windows (a closed window's entry is deleted).
	const prefix = "wc\x00"
	lateKey := prefix + "clate"
	state := map[int32]map[string][]byte{}
	for _, r := range h.b.ReadCommitted(h.t, h.changelog(), 60*time.Second) {
		if state[r.Partition] == nil {
			state[r.Partition] = map[string][]byte{}
		}
		if r.Value == nil {
			delete(state[r.Partition], string(r.Key))
		} else {
			state[r.Partition][string(r.Key)] = r.Value
		}
	}
	openByPart := map[int32]int{}
	for _, w := range ref {
		if !w.closed {
			openByPart[w.partition]++
		}
	}
	for p := range int32(inputPartitions) {
		var gotLate uint64
		if v, ok := state[p][lateKey]; ok {
			if len(v) != 8 {
				bad("state", "partition %d: late count of %d bytes, want 8", p, len(v))
			}
			gotLate = beUint64(v)
		}
		if gotLate != uint64(late[p]) {
			bad("state", "partition %d: the store counted %d late records, the reference %d", p, gotLate, late[p])
		}
		openWindows := 0
		for k := range state[p] {
			if strings.HasPrefix(k, prefix+"w") {
				openWindows++
			}
		}
		if openWindows != openByPart[p] {
			bad("state", "partition %d: %d windows in the store's committed state, the reference has %d open", p, openWindows, openByPart[p])
		}
	}

	h.t.Logf("check windows (%s): %d inputs (%d late), %d windows closed and %d open in the reference, %d committed results for %d windows",
		h.guarantee, len(inputs), lateTotal, closed, open, len(outs), len(got))
	if len(repeatedIDs)+len(missingIDs) > 0 {
		h.explainWindows(repeatedIDs, missingIDs)
	}
	if len(problems) > 0 {
		var report []string
		for _, kind := range kinds {
			ps := problems[kind]
			if len(ps) == 0 {
				continue
			}
			sort.Strings(ps)
			const show = 10
			report = append(report, fmt.Sprintf("%d %s:", len(ps), kind))
			for i, p := range ps {
				if i == show {
					report = append(report, fmt.Sprintf("    ... and %d more", len(ps)-show))
					break
				}
				report = append(report, "    "+p)
			}
		}
		h.t.Errorf("window results not exactly once (%d closed windows, %d committed results):\n  %s", closed, len(outs), strings.Join(report, "\n  "))
	}
}

// explainWindows logs, for missing and repeated windows, every record of
// them in the output log under read_uncommitted (aborted and open
// transactions too).
func (h *harness) explainWindows(repeated, missing []windowID) {
	h.t.Helper()
	written := map[windowID][]emitted{}
	for _, r := range h.readUncommitted(h.out) {
		var e emitted
		if json.Unmarshal(r.Value, &e) != nil {
			continue
		}
		e.ts, e.part, e.off, e.pid, e.epoch = r.Timestamp.UnixMilli(), r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch
		id := windowID{string(r.Key), e.Start}
		written[id] = append(written[id], e)
	}
	var lines []string
	for i, id := range append(append([]windowID(nil), repeated...), missing...) {
		if i == 12 {
			break
		}
		what := "repeated"
		if i >= len(repeated) {
			what = "missing"
		}
		lines = append(lines, fmt.Sprintf("%s %s: %v", what, id, written[id]))
	}
	h.t.Logf("those windows' records in the output log under read_uncommitted:\n    %s", strings.Join(lines, "\n    "))
}

// TestWindowReference checks the reference itself on a hand-made input:
// out of order within the grace, late, closed and open windows, and stream
// time kept per partition.
func TestWindowReference(t *testing.T) {
	in := func(p int32, off int64, key string, ts int64) input {
		return input{id: fmt.Sprintf("%d@%d", p, off), key: key, partition: p, offset: off, ts: ts}
	}
	inputs := []input{
		// Given out of offset order: the reference sorts.
		in(0, 3, "a", 400),  // stream 1200 < 1000+500: in time for a@0
		in(0, 0, "a", 0),    // a@0
		in(0, 1, "a", 999),  // a@0
		in(0, 2, "b", 1200), // b@1000
		in(0, 4, "a", 1600), // stream 1600 >= 1500: a@0 closes
		in(0, 5, "b", 300),  // b@0 is past 1500: late
		in(0, 6, "a", 2100), // a@2000; a@1000 and b@1000 close at 2500: open
		in(1, 0, "c", 5000), // another partition's stream time
		in(1, 1, "c", 1400), // c@1000: partition 1's stream time 5000 >= 1500: late
	}
	windows, late, stream := windowReference(inputs)
	want := map[windowID]windowRef{
		{"a", 0}:    {partition: 0, count: 3, maxTS: 999, closed: true},
		{"b", 1000}: {partition: 0, count: 1, maxTS: 1200},
		{"a", 1000}: {partition: 0, count: 1, maxTS: 1600},
		{"a", 2000}: {partition: 0, count: 1, maxTS: 2100},
		{"c", 5000}: {partition: 1, count: 1, maxTS: 5000},
	}
	if len(windows) != len(want) {
		t.Errorf("%d windows, want %d", len(windows), len(want))
	}
	for id, w := range want {
		if got := windows[id]; got == nil || *got != w {
			t.Errorf("window %s: %+v, want %+v", id, got, w)
		}
	}
	if late[0] != 1 || late[1] != 1 {
		t.Errorf("late %v, want 1 on each partition", late)
	}
	if stream[0] != 2100 || stream[1] != 5000 {
		t.Errorf("stream times %v, want 2100 and 5000", stream)
	}
}
