//go:build unix

package chaos

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The join of TestJoinExactlyOnceSIGKILL: plugins/clickjoin, a left join
// of impressions (input 0) and clicks (input 1) by impression id. A click
// joins the impression of its key at most joinWindow ms before it (ends
// included); a record more than joinGrace ms behind its task's stream time
// is late. The grace is far above the skew the test expects between the
// two inputs of a task (records are stamped within about 3 s of when they
// are written), so that no record but the deliberately stale ones is late
// whatever order the host interleaves the inputs in; and small enough that
// impressions' windows close (timers fire) all through the kills.
const (
	joinWindow = 2000
	joinGrace  = 8000
	// staleAge is how far behind the wall clock a stale impression is
	// stamped: late on any partition that saw a record before it.
	staleAge = 10 * 60 * 1000
)

var joinApp = app{
	processor:   "clickjoin",
	pkg:         "./plugins/clickjoin",
	store:       "clickjoin",
	output:      "joined",
	config:      map[string]string{"window": "2s", "grace": "8s", "join": "left"},
	timeStore:   true,
	secondInput: "clicks",
}

// TestJoinExactlyOnceSIGKILL: a stream-stream join exactly once. Three
// processes of one exactly_once app run plugins/clickjoin on two
// co-partitioned inputs, impressions and clicks keyed by impression id
// (each id lands on the same partition number of both), while ads are
// produced steadily: each id gets one impression and most ids one click a
// little later in event time — in the window, on its ends, just after it
// or before the impression — some clicks written before their impression,
// and a few ids stamped ten minutes back (late). Every 2-4 s one process is
// SIGKILLed and restarted on its state directory, as in TestCrashSIGKILL,
// so joins are emitted, and windows close (event-time timers fire), in
// transactions that are aborted, on tasks that move between processes and
// are restored. After six kills the input stops and drains; then each
// partition of the clicks topic gets one record a minute past every other,
// which moves its task's stream time past every impression's window.
//
// The committed output must hold, for every impression in time, exactly
// one result: joined with its click if the click is in its window,
// unclicked otherwise (joinReference); nothing for late records. The
// store's committed state must hold only the closing clicks and each
// task's late count, and the local stores must equal their changelogs.
func TestJoinExactlyOnceSIGKILL(t *testing.T) {
	traffic := &adTraffic{}
	h := newHarness(t, exactlyOnce, 3, 150*time.Second, withApp(joinApp), withRecords(traffic.next))
	h.startGroup(3)

	// About 110 records a second: one impression per id, clicks for most.
	const ids, kills = 60, 6
	prod := h.produceSteadily(0, 0, ids)
	h.killChurn(kills)
	h.sleep(time.Second) // the last restart too sees input
	prod.finish(h, true, 30*time.Second)
	h.producerMu.Lock()
	rest := traffic.rest()
	h.producerMu.Unlock()
	if len(rest) > 0 {
		if err := h.send(context.Background(), rest); err != nil {
			t.Fatal(err)
		}
	}
	// Drained before the closing records are written: the host interleaves
	// a task's inputs by timestamp only within what one poll fetched, so a
	// closing click processed ahead of impressions still in the backlog
	// would make them late.
	h.waitDrained(90 * time.Second)
	c := h.closeEveryJoin(60 * time.Second)
	h.waitDrained(30 * time.Second)
	h.waitJoinsClosed(c.keys, 30*time.Second)
	h.stopAll()
	h.failOnUnexpectedExits()
	h.checkJoins(c)
	h.summary()
	h.checkLocalStores()
}

// adTraffic makes the impressions and clicks: records for new ids, and the
// ones held back until their time comes. Used with producerMu held.
type adTraffic struct {
	rng     *rand.Rand
	start   time.Time
	pending []heldRecord
}

type heldRecord struct {
	due time.Time
	rec *kgo.Record
}

// next makes n new ids and returns every record due now. An impression is
// stamped up to 200 ms before the wall clock; its click, if any, is
// written when the wall clock reaches the click's timestamp. Of the ids
// (after the first 3 s, one in 40 is stale: impression and click ten
// minutes back):
//   - 15% have no click;
//   - 5% a click 1-500 ms after the window (no join);
//   - 5% a click 1-500 ms before the impression (no join: the window only
//     looks forward);
//   - 5% a click at the impression's time, 5% at the window's end, 65%
//     in between.
//
// For one clicked id in seven the click is written first and the
// impression 50-300 ms after it.
func (a *adTraffic) next(h *harness, n int) []*kgo.Record {
	now := time.Now()
	if a.rng == nil {
		a.rng = rand.New(rand.NewPCG(h.rng.Uint64(), h.rng.Uint64()))
		a.start = now
	}
	ms := now.UnixMilli()
	hold := func(at int64, r *kgo.Record) {
		a.pending = append(a.pending, heldRecord{due: time.UnixMilli(max(at, ms)), rec: r})
	}
	for range n {
		id := fmt.Sprintf("ad%06d", h.nextID)
		h.nextID++
		imp := &kgo.Record{Topic: h.in, Key: []byte(id), Value: []byte("imp:" + id), Timestamp: time.UnixMilli(ms - a.rng.Int64N(200))}
		click := &kgo.Record{Topic: h.in2, Key: []byte(id), Value: []byte("click:" + id)}
		impAt := imp.Timestamp.UnixMilli()
		if now.Sub(a.start) > 3*time.Second && a.rng.IntN(40) == 0 {
			imp.Timestamp = time.UnixMilli(ms - staleAge)
			click.Timestamp = imp.Timestamp.Add(time.Duration(a.rng.Int64N(joinWindow)) * time.Millisecond)
			hold(ms, imp)
			hold(ms, click)
			continue
		}
		var d int64
		switch r := a.rng.IntN(100); {
		case r < 15:
			hold(ms, imp)
			continue
		case r < 20:
			d = joinWindow + 1 + a.rng.Int64N(500)
		case r < 25:
			d = -1 - a.rng.Int64N(500)
		case r < 30:
			d = 0
		case r < 35:
			d = joinWindow
		default:
			d = a.rng.Int64N(joinWindow + 1)
		}
		click.Timestamp = time.UnixMilli(impAt + d)
		clickDue := max(impAt+d, ms)
		hold(clickDue, click)
		if a.rng.IntN(7) == 0 {
			hold(clickDue+50+a.rng.Int64N(250), imp)
		} else {
			hold(ms, imp)
		}
	}
	var due []*kgo.Record
	kept := a.pending[:0]
	for _, p := range a.pending {
		if p.due.After(now) {
			kept = append(kept, p)
		} else {
			due = append(due, p.rec)
		}
	}
	a.pending = kept
	return due
}

// rest returns every record still held back, for the end of the input.
func (a *adTraffic) rest() []*kgo.Record {
	var out []*kgo.Record
	for _, p := range a.pending {
		out = append(out, p.rec)
	}
	a.pending = nil
	return out
}

// closing are the closing clicks' keys, by partition, and the output's
// end offsets before them.
type closing struct {
	keys   map[int32]string
	outEnd map[int32]int64
}

// closeEveryJoin writes one click to each partition of the clicks topic,
// later past the latest input timestamp, under a key no impression has: it
// moves every task's stream time past every impression's window and grace
// (so every buffered record's timer fires), joins nothing and, a click,
// is never reported.
func (h *harness) closeEveryJoin(later time.Duration) closing {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := h.adm.ListEndOffsets(ctx, h.out)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		h.t.Fatalf("end offsets of the output: %v", err)
	}
	c := closing{outEnd: map[int32]int64{}}
	for p, o := range ends[h.out] {
		c.outEnd[p] = o.Offset
	}
	var maxTS int64
	for _, in := range h.acked() {
		maxTS = max(maxTS, in.ts)
	}
	ts := time.UnixMilli(maxTS + later.Milliseconds())
	// The producer's default partitioner hashes keys as this one does
	// (murmur2, Kafka's): a key for each partition, checked where it lands.
	part := kgo.StickyKeyPartitioner(nil).ForTopic(h.in2)
	keys := map[int32]string{}
	for i := 0; len(keys) < inputPartitions; i++ {
		k := fmt.Sprintf("close%d", i)
		p := int32(part.Partition(&kgo.Record{Key: []byte(k)}, inputPartitions))
		if _, ok := keys[p]; !ok {
			keys[p] = k
		}
	}
	var recs []*kgo.Record
	for p := range int32(inputPartitions) {
		recs = append(recs, &kgo.Record{Topic: h.in2, Key: []byte(keys[p]), Value: []byte(fmt.Sprintf("close-%d", p)), Timestamp: ts})
	}
	if err := h.send(context.Background(), recs); err != nil {
		h.t.Fatal(err)
	}
	for _, r := range recs {
		if want := strings.TrimPrefix(string(r.Value), "close-"); fmt.Sprint(r.Partition) != want {
			h.t.Fatalf("the closing click %s with key %s landed on partition %d", r.Value, r.Key, r.Partition)
		}
	}
	h.t.Logf("closing clicks: one per partition at %s (%v past the latest input)", ts.Format("15:04:05.000"), later)
	c.keys = keys
	return c
}

// The store's keys, as sdk/join writes them for the join named "cj":
// "cj\x00", then 'L' or 'R', a 4-byte key length, the key, 8 bytes of
// timestamp and 8 of offset for a buffered record; "cj\x00clate" for the
// task's late count (8 bytes, big-endian).
const (
	joinPrefix  = "cj\x00"
	joinLateKey = joinPrefix + "clate"
)

// parseJoinKey splits a buffered record's key: its side ('L' impression,
// 'R' click) and record key; ok is false for any other key.
func parseJoinKey(k string) (side byte, key string, ok bool) {
	rest, found := strings.CutPrefix(k, joinPrefix)
	if !found || len(rest) < 1+4+16 || (rest[0] != 'L' && rest[0] != 'R') {
		return 0, "", false
	}
	n := int(binary.BigEndian.Uint32([]byte(rest[1:5])))
	if len(rest) != 1+4+n+16 {
		return 0, "", false
	}
	return rest[0], rest[5 : 5+n], true
}

// joinState is the store's committed state per partition, from its
// changelog.
func (h *harness) joinState() map[int32]map[string][]byte {
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
	return state
}

// buffered counts the committed state's buffered records other than the
// closing clicks: impressions and clicks whose timers have not fired.
func buffered(state map[int32]map[string][]byte, closing map[int32]string) (imps, clicks int) {
	for p, kv := range state {
		for k := range kv {
			side, key, ok := parseJoinKey(k)
			switch {
			case !ok:
			case side == 'L':
				imps++
			case key != closing[p]:
				clicks++
			}
		}
	}
	return imps, clicks
}

// waitJoinsClosed waits up to bound until the store's committed state
// buffers nothing but the closing clicks: every timer the closing records
// made due has fired and committed. (A timer that never fires is reported
// by checkJoins.)
func (h *harness) waitJoinsClosed(closing map[int32]string, bound time.Duration) {
	h.t.Helper()
	start := time.Now()
	for {
		h.checkDeadline("waiting for the joins' timers to fire")
		imps, clicks := buffered(h.joinState(), closing)
		if imps+clicks == 0 {
			h.t.Logf("closed: nothing buffered in the committed state but the closing clicks %v after they were drained", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > bound {
			h.t.Logf("after %v the committed state still buffers %d impressions and %d clicks: their timers did not fire", bound, imps, clicks)
			return
		}
		h.sleep(500 * time.Millisecond)
	}
}

// joinResult is one result of the join: an impression with its click, or
// unclicked; ts is the output record's timestamp (the click's for a joined
// result, the impression's otherwise).
type joinResult struct {
	impAt   int64
	imp     string
	clicked bool
	clickAt int64
	click   string
	ts      int64
}

func (r joinResult) String() string {
	if !r.clicked {
		return fmt.Sprintf("unclicked %s@%d (ts %d)", r.imp, r.impAt, r.ts)
	}
	return fmt.Sprintf("%s@%d joined %s@%d (ts %d)", r.imp, r.impAt, r.click, r.clickAt, r.ts)
}

// joinRef is the reference of one run.
type joinRef struct {
	want map[string][]joinResult // by impression id, the results expected
	// late are the records certainly late, per partition (both inputs):
	// behind the latest timestamp of an earlier record of their own input
	// partition by more than the grace.
	late map[int32]int
	// maybeLate are the records that are not certainly late but are more
	// than the grace behind a record of their partition (either input)
	// written before them: whether they are late depends on the order the
	// host took the inputs in. Their ids are not checked.
	maybeLate map[int32]int
	unsure    map[string]bool
	byID      map[string][]input // every input record, by key
	stale     int                // ids whose records are late or maybe late
}

// joinReference computes the expected results from the acknowledged input
// (inputs in the order they were acknowledged). Every record that is not
// late is taken to be in time: the inputs are stamped close to when they
// are written, so only a skew between a task's inputs of more than the
// grace could make one late, which checkJoins reports through the late
// counts. A click in time joins an impression in time of its key when
// impression <= click <= impression + window, whatever order they come
// in; an impression in time that joins no click is reported unclicked; a
// late record joins nothing and is not reported.
func joinReference(inputs []input, impTopic, clickTopic string) joinRef {
	ref := joinRef{want: map[string][]joinResult{}, late: map[int32]int{}, maybeLate: map[int32]int{},
		unsure: map[string]bool{}, byID: map[string][]input{}}
	type tp struct {
		topic string
		p     int32
	}
	// Certainly late: against the earlier records of its own input
	// partition, which the task processed before it, in offset order.
	byTP := map[tp][]input{}
	for _, in := range inputs {
		byTP[tp{in.topic, in.partition}] = append(byTP[tp{in.topic, in.partition}], in)
		ref.byID[in.key] = append(ref.byID[in.key], in)
	}
	late := map[tp]map[int64]bool{}
	for k, ins := range byTP {
		sort.Slice(ins, func(i, j int) bool { return ins[i].offset < ins[j].offset })
		late[k] = map[int64]bool{}
		for i, in := range ins {
			if i > 0 {
				stream := ins[i-1].ts // the running maximum, kept in place
				if in.ts < stream-joinGrace {
					late[k][in.offset] = true
				}
				ins[i].ts = max(in.ts, stream)
			}
		}
	}
	isLate := func(in input) bool { return late[tp{in.topic, in.partition}][in.offset] }
	// Maybe late: against every record of its partition acknowledged
	// before it, on either input.
	seen := map[int32]int64{}
	for _, in := range inputs {
		if isLate(in) {
			ref.late[in.partition]++
		} else if st, ok := seen[in.partition]; ok && in.ts < st-joinGrace {
			ref.maybeLate[in.partition]++
			ref.unsure[in.key] = true
		}
		if st, ok := seen[in.partition]; !ok || in.ts > st {
			seen[in.partition] = in.ts
		}
	}
	for id, ins := range ref.byID {
		var imps, clicks []input
		lateOrUnsure := ref.unsure[id]
		for _, in := range ins {
			switch {
			case isLate(in):
				lateOrUnsure = true
			case in.topic == impTopic:
				imps = append(imps, in)
			case in.topic == clickTopic:
				clicks = append(clicks, in)
			}
		}
		if lateOrUnsure {
			ref.stale++
		}
		if ref.unsure[id] {
			continue
		}
		for _, imp := range imps {
			joined := false
			for _, c := range clicks {
				if imp.ts <= c.ts && c.ts <= imp.ts+joinWindow {
					joined = true
					ref.want[id] = append(ref.want[id], joinResult{impAt: imp.ts, imp: imp.id, clicked: true, clickAt: c.ts, click: c.id, ts: c.ts})
				}
			}
			if !joined {
				ref.want[id] = append(ref.want[id], joinResult{impAt: imp.ts, imp: imp.id, ts: imp.ts})
			}
		}
	}
	return ref
}

// joinOut is a result as clickjoin writes it (README.md).
type joinOut struct {
	ImpressionAt int64   `json:"impression_at"`
	Impression   string  `json:"impression"`
	ClickAt      *int64  `json:"click_at"`
	Click        *string `json:"click"`
	LatencyMS    *int64  `json:"latency_ms"`
}

// decodeJoin reads an output record as a result.
func decodeJoin(r *kgo.Record) (joinResult, error) {
	var o joinOut
	if r.Value == nil {
		return joinResult{}, fmt.Errorf("null value")
	}
	if err := json.Unmarshal(r.Value, &o); err != nil {
		return joinResult{}, err
	}
	res := joinResult{impAt: o.ImpressionAt, imp: o.Impression, ts: r.Timestamp.UnixMilli()}
	switch {
	case o.ClickAt == nil && o.Click == nil && o.LatencyMS == nil:
	case o.ClickAt != nil && o.Click != nil && o.LatencyMS != nil && *o.LatencyMS == *o.ClickAt-o.ImpressionAt:
		res.clicked, res.clickAt, res.click = true, *o.ClickAt, *o.Click
	default:
		return joinResult{}, fmt.Errorf("click fields inconsistent")
	}
	return res, nil
}

func where(r *kgo.Record) string {
	return fmt.Sprintf("out %d@%d pid %d epoch %d", r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch)
}

// checkJoins checks the committed output of clickjoin against the
// reference — for every impression in time exactly its expected result,
// once; nothing else — and the store's committed state: each task's late
// count, and nothing buffered but its closing click.
func (h *harness) checkJoins(c closing) {
	h.t.Helper()
	h.waitSettled()
	inputs := h.acked()
	ref := joinReference(inputs, h.in, h.in2)

	kinds := []string{"missing", "repeated", "unexpected", "state"}
	problems := map[string][]string{}
	bad := func(kind, format string, args ...any) {
		problems[kind] = append(problems[kind], fmt.Sprintf(format, args...))
	}
	// Setup: every id's records landed on one partition number.
	for id, ins := range ref.byID {
		for _, in := range ins[1:] {
			if in.partition != ins[0].partition {
				h.t.Fatalf("id %s: its records landed on partitions %d and %d; the test needs them co-partitioned: %v", id, ins[0].partition, in.partition, ins)
			}
		}
	}

	outs := h.b.ReadCommitted(h.t, h.out, 60*time.Second)
	got := map[string][]*kgo.Record{}
	for _, r := range outs {
		got[string(r.Key)] = append(got[string(r.Key)], r)
	}
	problemIDs := map[string]bool{}
	var imps, clickedIDs, joins, unclicked, unsureOuts, timedOut int
	for id, ins := range ref.byID {
		for _, in := range ins {
			if in.topic == h.in {
				imps++
			}
		}
		if ref.unsure[id] {
			unsureOuts += len(got[id])
			continue
		}
		want := map[joinResult]int{}
		for _, w := range ref.want[id] {
			want[w]++
			if w.clicked {
				joins++
			} else {
				unclicked++
			}
		}
		if len(ref.want[id]) > 0 && ref.want[id][0].clicked {
			clickedIDs++
		}
		have := map[joinResult][]*kgo.Record{}
		for _, r := range got[id] {
			res, err := decodeJoin(r)
			if err != nil {
				bad("unexpected", "id %s: output %q at %s is not a result: %v", id, r.Value, where(r), err)
				problemIDs[id] = true
				continue
			}
			have[res] = append(have[res], r)
			if !res.clicked && r.Offset < c.outEnd[r.Partition] {
				timedOut++ // its window closed before the closing clicks
			}
		}
		for w, n := range want {
			switch rs := have[w]; {
			case len(rs) < n:
				bad("missing", "id %s (partition %d): %v committed %d times, want %d", id, ins[0].partition, w, len(rs), n)
				problemIDs[id] = true
			case len(rs) > n:
				var at []string
				for _, r := range rs {
					at = append(at, where(r))
				}
				bad("repeated", "id %s (partition %d): %v committed %d times, want %d: %s", id, ins[0].partition, w, len(rs), n, strings.Join(at, "; "))
				problemIDs[id] = true
			}
		}
		for res, rs := range have {
			if want[res] == 0 {
				bad("unexpected", "id %s (partition %d): %v committed %d times at %s; want only %v", id, ins[0].partition, res, len(rs), where(rs[0]), ref.want[id])
				problemIDs[id] = true
			}
		}
	}
	for id, rs := range got {
		if _, ok := ref.byID[id]; !ok {
			bad("unexpected", "output for key %q, which no input had: %q at %s", id, rs[0].Value, where(rs[0]))
		}
	}

	// The store's committed state: the late count, and only the closing
	// click buffered (its own timer is a minute ahead of every other).
	state := h.joinState()
	for p := range int32(inputPartitions) {
		var gotLate uint64
		if v, ok := state[p][joinLateKey]; ok {
			if len(v) != 8 {
				bad("state", "partition %d: late count of %d bytes, want 8", p, len(v))
			}
			gotLate = beUint64(v)
		}
		switch lo, hi := uint64(ref.late[p]), uint64(ref.late[p]+ref.maybeLate[p]); {
		case gotLate > hi:
			bad("state", "partition %d: the store counted %d late records, the reference %d (and %d maybe late): records in time were taken as late "+
				"(the task's inputs processed more than the grace, %d ms, apart, or its stream time too far ahead)", p, gotLate, lo, hi-lo, joinGrace)
		case gotLate < lo:
			bad("state", "partition %d: the store counted %d late records, the reference %d: late records were not seen as late "+
				"(a stream time lost in a restore), or not seen at all", p, gotLate, lo)
		}
		var left []string
		closed := false
		for k := range state[p] {
			side, key, ok := parseJoinKey(k)
			switch {
			case k == joinLateKey:
			case ok && side == 'R' && key == c.keys[p]:
				closed = true
			case ok:
				left = append(left, fmt.Sprintf("%c %s", side, key))
			default:
				left = append(left, fmt.Sprintf("%q", k))
			}
		}
		if !closed {
			bad("state", "partition %d: the closing click %s is not buffered in the committed state", p, c.keys[p])
		}
		if len(left) > 0 {
			sort.Strings(left)
			bad("state", "partition %d: %d records still buffered after the closing click (their timers did not fire): %v", p, len(left), left[:min(len(left), 5)])
		}
	}

	lateTotal, maybeTotal := 0, 0
	for p := range int32(inputPartitions) {
		lateTotal += ref.late[p]
		maybeTotal += ref.maybeLate[p]
	}
	h.t.Logf("check joins (%s): %d input records (%d impressions, %d late and %d maybe late, %d stale ids); "+
		"reference %d results (%d joined for %d ids, %d unclicked); %d committed results for %d keys (%d unclicked ones before the closing clicks; %d for %d maybe-late ids, not checked)",
		h.guarantee, len(inputs), imps, lateTotal, maybeTotal, ref.stale, joins+unclicked, joins, clickedIDs, unclicked,
		len(outs), len(got), timedOut, unsureOuts, len(ref.unsure))
	if len(problemIDs) > 0 {
		h.explainJoins(ref, slices.Sorted(maps.Keys(problemIDs)), outs)
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
		h.t.Errorf("join results not exactly once (%d expected, %d committed):\n  %s", joins+unclicked, len(outs), strings.Join(report, "\n  "))
	}
}

// explainJoins logs where the ids with a wrong result are: how many per
// input partition, and for some of them their input records and every
// output record under read_uncommitted (aborted and open transactions
// too), each marked committed or not.
func (h *harness) explainJoins(ref joinRef, ids []string, committed []*kgo.Record) {
	h.t.Helper()
	type at struct {
		p   int32
		off int64
	}
	isCommitted := map[at]bool{}
	for _, r := range committed {
		isCommitted[at{r.Partition, r.Offset}] = true
	}
	perPart := map[int32]int{}
	for _, id := range ids {
		perPart[ref.byID[id][0].partition]++
	}
	written := map[string][]*kgo.Record{}
	for _, r := range h.readUncommitted(h.out) {
		written[string(r.Key)] = append(written[string(r.Key)], r)
	}
	var lines []string
	for _, id := range ids[:min(len(ids), 12)] {
		var ins, outs []string
		for _, in := range ref.byID[id] {
			what := "impression"
			if in.topic == h.in2 {
				what = "click"
			}
			ins = append(ins, fmt.Sprintf("%s %d@%d ts %d", what, in.partition, in.offset, in.ts))
		}
		for _, r := range written[id] {
			desc := "?"
			if res, err := decodeJoin(r); err == nil {
				desc = "unclicked"
				if res.clicked {
					desc = fmt.Sprintf("joined click@%d", res.clickAt)
				}
			}
			state := "not committed"
			if isCommitted[at{r.Partition, r.Offset}] {
				state = "committed"
			}
			outs = append(outs, fmt.Sprintf("%s at %s, %s", desc, where(r), state))
		}
		lines = append(lines, fmt.Sprintf("%s: in [%s]; written [%s]", id, strings.Join(ins, ", "), strings.Join(outs, "; ")))
	}
	h.t.Logf("%d ids with wrong results, by input partition: %v; examples, with their outputs under read_uncommitted:\n    %s",
		len(ids), perPart, strings.Join(lines, "\n    "))
}

// TestJoinReference checks the reference on hand-made input: clicks in the
// window, on its ends, outside it, before their impression in offset
// order, and late records.
func TestJoinReference(t *testing.T) {
	const imp, click = "imp", "click"
	off := map[string]int64{}
	rec := func(topic string, p int32, key string, ts int64) input {
		o := off[fmt.Sprint(topic, p)]
		off[fmt.Sprint(topic, p)]++
		return input{id: topic + ":" + key, key: key, topic: topic, partition: p, offset: o, ts: ts}
	}
	inputs := []input{
		rec(imp, 0, "a", 10_000),
		rec(click, 0, "b", 12_000+joinWindow), // before its impression, on the window's end
		rec(imp, 0, "b", 12_000),
		rec(click, 0, "a", 10_500), // in time: 10500 >= 14000 - grace
		rec(imp, 0, "c", 13_000),
		rec(click, 0, "c", 13_000+joinWindow+1), // just past the window
		rec(imp, 0, "d", 15_000),
		rec(click, 0, "d", 14_999), // before the impression
		rec(imp, 1, "f", 5_000),
		rec(click, 1, "f", 5_000), // on the window's start; partition 1's own time
		rec(imp, 2, "x", 20_000),
		rec(imp, 2, "e", 20_000-joinGrace-1),   // late: impressions 2 saw 20000
		rec(click, 2, "e", 20_000-joinGrace-1), // maybe late: behind impressions 2, first of clicks 2
	}
	ref := joinReference(inputs, imp, click)
	want := map[string][]joinResult{
		"a": {{impAt: 10_000, imp: "imp:a", clicked: true, clickAt: 10_500, click: "click:a", ts: 10_500}},
		"b": {{impAt: 12_000, imp: "imp:b", clicked: true, clickAt: 12_000 + joinWindow, click: "click:b", ts: 12_000 + joinWindow}},
		"c": {{impAt: 13_000, imp: "imp:c", ts: 13_000}},
		"d": {{impAt: 15_000, imp: "imp:d", ts: 15_000}},
		"f": {{impAt: 5_000, imp: "imp:f", clicked: true, clickAt: 5_000, click: "click:f", ts: 5_000}},
		"x": {{impAt: 20_000, imp: "imp:x", ts: 20_000}},
	}
	if len(ref.want) != len(want) {
		t.Errorf("results for %v, want for %v", slices.Sorted(maps.Keys(ref.want)), slices.Sorted(maps.Keys(want)))
	}
	for id, w := range want {
		if !slices.Equal(ref.want[id], w) {
			t.Errorf("id %s: %v, want %v", id, ref.want[id], w)
		}
	}
	if ref.late[2] != 1 || ref.maybeLate[2] != 1 || len(ref.late)+len(ref.maybeLate) != 2 || len(ref.unsure) != 1 || !ref.unsure["e"] {
		t.Errorf("late %v, maybe late %v, unsure ids %v; want one of each on partition 2, id e unsure", ref.late, ref.maybeLate, ref.unsure)
	}
}
