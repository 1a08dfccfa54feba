//go:build unix

package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
)

// result summarizes a check.
type result struct {
	inputs, outputs, distinct, duplicates, missing int
}

// check reads the committed output and the store's changelog and checks
// them against the acknowledged inputs.
//
// The reference: a key lives in one input partition and a task processes
// its partition in offset order, so the count the counter plugin emits for
// an input id must be that record's rank among the records of its key in
// the partition (1 for the first, 2 for the second, ...), and the final
// state of a key is the number of its records.
//
// exactly_once: every id exactly once, each with exactly its rank (so per
// key the counts are 1..n with no gap and no repeat, and the state the
// processes built equals the reference at every record), and the last
// committed changelog value of each key is n.
//
// at_least_once: every id at least once, and never a count below its rank
// nor a final state below n (a repeat may count a record twice; nothing may
// be lost from the state).
func (h *harness) check(exactlyOnce bool) result {
	h.t.Helper()
	h.waitSettled()
	inputs := h.acked()
	rank := map[string]int{}     // id -> expected count
	keyOf := map[string]string{} // id -> key
	final := map[string]int{}    // key -> number of records
	sorted := append([]input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].partition != sorted[j].partition {
			return sorted[i].partition < sorted[j].partition
		}
		return sorted[i].offset < sorted[j].offset
	})
	for _, in := range sorted {
		final[in.key]++
		rank[in.id] = final[in.key]
		keyOf[in.id] = in.key
	}

	outs := h.b.ReadCommitted(h.t, h.out, 60*time.Second)
	res := result{inputs: len(inputs), outputs: len(outs)}
	// Problems by kind, reported kind by kind so that the few that explain
	// the rest (a missing or repeated id) are not buried.
	kinds := []string{"missing", "repeated", "unknown", "count", "state"}
	problems := map[string][]string{}
	bad := func(kind, format string, args ...any) {
		problems[kind] = append(problems[kind], fmt.Sprintf(format, args...))
	}
	seen := map[string]int{}
	countsByKey := map[string]map[int]int{} // key -> count -> times emitted
	maxCount := map[string]int{}
	for _, r := range outs {
		id := string(r.Key)
		seen[id]++
		want, known := rank[id]
		if !known {
			bad("unknown", "output for id %q that was never produced (value %q)", id, r.Value)
			continue
		}
		key, countStr, ok := strings.Cut(string(r.Value), ":")
		count, err := strconv.Atoi(countStr)
		if !ok || err != nil {
			bad("unknown", "output for %s has value %q, want <key>:<count>", id, r.Value)
			continue
		}
		if key != keyOf[id] {
			bad("unknown", "output for %s names key %q, the input had key %q", id, key, keyOf[id])
			continue
		}
		if countsByKey[key] == nil {
			countsByKey[key] = map[int]int{}
		}
		countsByKey[key][count]++
		maxCount[key] = max(maxCount[key], count)
		switch {
		case exactlyOnce && count != want:
			bad("count", "%s (key %s, input partition %d) emitted count %d, want %d: the state was not the reference when it was processed", id, key, partitionOf(inputs, id), count, want)
		case !exactlyOnce && count < want:
			bad("count", "%s (key %s) emitted count %d, below its rank %d: state lost an increment", id, key, count, want)
		}
	}
	res.distinct = len(seen)
	for _, in := range inputs {
		switch n := seen[in.id]; {
		case n == 0:
			res.missing++
			bad("missing", "input %s (key %s, partition %d, offset %d) has no committed output", in.id, in.key, in.partition, in.offset)
		case n > 1:
			res.duplicates += n - 1
			if exactlyOnce {
				bad("repeated", "input %s (key %s, partition %d, offset %d) has %d committed outputs, want 1", in.id, in.key, in.partition, in.offset, n)
			}
		}
	}
	if res.missing > 0 || (exactlyOnce && res.duplicates > 0) {
		h.explain(inputs, seen)
	}
	if exactlyOnce {
		for key, n := range final {
			for c := 1; c <= n; c++ {
				if countsByKey[key][c] != 1 {
					bad("count", "key %s: count %d emitted %d times, want once (counts must be exactly 1..%d)", key, c, countsByKey[key][c], n)
				}
			}
			if maxCount[key] != n {
				bad("count", "key %s: last emitted count %d, want %d (its number of input records)", key, maxCount[key], n)
			}
		}
	}

	// The durable state: the last committed changelog value of every key.
	state := map[string]uint64{}
	for _, r := range h.b.ReadCommitted(h.t, h.changelog(), 60*time.Second) {
		if r.Value == nil {
			delete(state, string(r.Key))
			continue
		}
		if len(r.Value) != 8 {
			bad("state", "changelog record for key %q has a %d-byte value, want 8", r.Key, len(r.Value))
			continue
		}
		state[string(r.Key)] = beUint64(r.Value)
	}
	for key, n := range final {
		got, ok := state[key]
		switch {
		case !ok:
			bad("state", "key %s: no state in the changelog, want %d", key, n)
		case exactlyOnce && got != uint64(n):
			bad("state", "key %s: final state %d in the changelog, want %d", key, got, n)
		case !exactlyOnce && got < uint64(n):
			bad("state", "key %s: final state %d in the changelog, below its %d records", key, got, n)
		}
	}

	h.t.Logf("check (%s): %d inputs, %d committed outputs, %d distinct ids, %d duplicates, %d missing; %d keys in the changelog",
		h.guarantee, res.inputs, res.outputs, res.distinct, res.duplicates, res.missing, len(state))
	if len(problems) > 0 {
		var report []string
		for _, kind := range kinds {
			ps := problems[kind]
			if len(ps) == 0 {
				continue
			}
			const show = 8
			report = append(report, fmt.Sprintf("%d %s:", len(ps), kind))
			for i, p := range ps {
				if i == show {
					report = append(report, fmt.Sprintf("    ... and %d more", len(ps)-show))
					break
				}
				report = append(report, "    "+p)
			}
		}
		h.t.Errorf("%s violated (%d inputs, %d outputs, %d duplicates, %d missing):\n  %s",
			h.guarantee, res.inputs, res.outputs, res.duplicates, res.missing, strings.Join(report, "\n  "))
	}
	return res
}

// explain logs, for a failed check, where the missing and repeated ids
// are: the missing ones as offset ranges per input partition, and whether
// their outputs are in the output log at all (aborted or still open
// transactions) or were never written, with the producer that wrote them.
func (h *harness) explain(inputs []input, seen map[string]int) {
	h.t.Helper()
	ranges := map[int32][]string{}
	missing := map[string]bool{}
	sorted := append([]input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].partition != sorted[j].partition {
			return sorted[i].partition < sorted[j].partition
		}
		return sorted[i].offset < sorted[j].offset
	})
	var from, to int64 = -1, -1
	var fromP int32 = -1
	flush := func() {
		if from >= 0 {
			ranges[fromP] = append(ranges[fromP], fmt.Sprintf("%d-%d", from, to))
		}
		from = -1
	}
	for _, in := range sorted {
		if seen[in.id] != 0 {
			continue
		}
		missing[in.id] = true
		if from >= 0 && in.partition == fromP && in.offset <= to+3 {
			to = in.offset
			continue
		}
		flush()
		from, to, fromP = in.offset, in.offset, in.partition
	}
	flush()
	if len(ranges) > 0 {
		h.t.Logf("missing ids by input partition (offset ranges, gaps of up to 2 joined): %v", ranges)
	}

	// Every output record as written, aborted and open transactions too.
	type where struct {
		part  int32
		off   int64
		pid   int64
		epoch int16
		ts    time.Time
	}
	written := map[string][]where{}
	for _, r := range h.readUncommitted(h.out) {
		written[string(r.Key)] = append(written[string(r.Key)], where{r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp})
	}
	neverWritten, shown := 0, 0
	var lines []string
	for _, in := range sorted {
		n := seen[in.id]
		if n == 1 {
			continue
		}
		ws := written[in.id]
		if n == 0 && len(ws) == 0 {
			neverWritten++
			continue
		}
		if shown < 12 {
			shown++
			var parts []string
			for _, w := range ws {
				parts = append(parts, fmt.Sprintf("out %d@%d pid %d epoch %d at %s", w.part, w.off, w.pid, w.epoch, w.ts.Format("15:04:05.000")))
			}
			lines = append(lines, fmt.Sprintf("%s (in %d@%d, %d committed): %s", in.id, in.partition, in.offset, n, strings.Join(parts, "; ")))
		}
	}
	h.t.Logf("in the output log under read_uncommitted: %d of the missing ids were never written; examples of ids written but missing or repeated under read_committed:\n    %s",
		neverWritten, strings.Join(lines, "\n    "))
}

// readUncommitted returns every record of topic up to its high watermark,
// aborted and open transactional records included.
func (h *harness) readUncommitted(topic string) []*kgo.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := h.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		h.t.Logf("read %s uncommitted: %v", topic, err)
		return nil
	}
	end := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	for p, o := range ends[topic] {
		if o.Offset > 0 {
			end[p] = o.Offset
			from[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(end) == 0 {
		return nil
	}
	cl := h.b.Client(h.t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond))
	defer cl.Close()
	var out []*kgo.Record
	for len(end) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok || r.Offset >= e {
				return
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= e {
				delete(end, r.Partition)
			}
		})
	}
	if len(end) > 0 {
		h.t.Logf("read %s uncommitted: partitions %v not read to the end in 30s", topic, end)
	}
	return out
}

func partitionOf(inputs []input, id string) int32 {
	for _, in := range inputs {
		if in.id == id {
			return in.partition
		}
	}
	return -1
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// summary logs what happened to the processes, for the report.
func (h *harness) summary() {
	h.t.Helper()
	c := h.logCounts("transaction aborted", "partitions lost", "partitions revoked", "level=ERROR", "restore: starting", "checkpoint=none")
	var exits []string
	for _, p := range h.procs {
		if p.exited() {
			exits = append(exits, fmt.Sprintf("%s:%s", strings.Join([]string{p.m.name, strconv.Itoa(p.run)}, "#"), p.status()))
		}
	}
	h.t.Logf("%v: %d processes started (%d restarts), %d SIGKILLs, %d SIGTERMs; log lines: %d 'transaction aborted', %d 'partitions lost', %d 'partitions revoked', %d ERROR; %d restores, %d of them from a local checkpoint; exits: %s",
		time.Since(h.started).Round(time.Second), len(h.procs), h.restarts, h.kills, h.terms,
		c["transaction aborted"], c["partitions lost"], c["partitions revoked"], c["level=ERROR"],
		c["restore: starting"], c["restore: starting"]-c["checkpoint=none"], strings.Join(exits, " "))
}

// checkLocalStores checks invariant I3 on every member's state directory
// after the processes stopped: each task's store holds exactly the effect
// of the committed changelog records below its checkpoint — no more (a
// write applied without its transaction committing), no less (a checkpoint
// claiming records the store lacks, the Kafka Streams seed) — and a store
// without a checkpoint holds nothing. SIGKILLed processes leave their
// stores wherever the kill found them, so this is the crash-consistency
// check of the local state.
func (h *harness) checkLocalStores() {
	h.t.Helper()
	// The committed changelog records of each checked store, by partition
	// in offset order.
	logs := map[string]map[int32][]*kgo.Record{}
	stores := []string{h.app.store}
	if h.app.timeStore {
		stores = append(stores, h.timeStore())
	}
	for _, store := range stores {
		byPartition := map[int32][]*kgo.Record{}
		for _, r := range h.b.ReadCommitted(h.t, h.storeChangelog(store), 60*time.Second) {
			byPartition[r.Partition] = append(byPartition[r.Partition], r)
		}
		for _, rs := range byPartition {
			sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		}
		logs[store] = byPartition
	}
	checked, keys := 0, 0
	for _, m := range h.members {
		dir := filepath.Join(m.stateDir, h.appID)
		rd, err := host.OpenStateReadOnly(dir, nil)
		if err != nil {
			h.t.Errorf("%s: opening its state directory %s: %v", m.name, dir, err)
			continue
		}
		stores, err := rd.Stores()
		if err != nil {
			h.t.Errorf("%s: listing stores: %v", m.name, err)
		}
		for _, st := range stores {
			byPartition, ok := logs[st.Store]
			if !ok {
				continue // the processor's time store (stream time only), unless the app checks it
			}
			want := map[string]string{}
			if st.HasCheckpoint {
				for _, r := range byPartition[st.Partition] {
					if r.Offset >= st.Checkpoint {
						break
					}
					if r.Value == nil {
						delete(want, string(r.Key))
					} else {
						want[string(r.Key)] = string(r.Value)
					}
				}
			}
			got := map[string]string{}
			err := rd.Scan(st.Processor, st.Partition, st.Store, func(k, v []byte) error {
				got[string(k)] = string(v)
				return nil
			})
			if err != nil {
				h.t.Errorf("%s: scanning %s/%d/%s: %v", m.name, st.Processor, st.Partition, st.Store, err)
				continue
			}
			checked++
			keys += len(got)
			if len(got) != len(want) {
				h.t.Errorf("%s: store %s/%d/%s (checkpoint %d, has %v) holds %d keys, the changelog below the checkpoint %d",
					m.name, st.Processor, st.Partition, st.Store, st.Checkpoint, st.HasCheckpoint, len(got), len(want))
				continue
			}
			for k, v := range want {
				if got[k] != v {
					h.t.Errorf("%s: store %s/%d/%s key %q = %x, the changelog below checkpoint %d says %x",
						m.name, st.Processor, st.Partition, st.Store, k, got[k], st.Checkpoint, v)
				}
			}
		}
		if err := rd.Close(); err != nil {
			h.t.Errorf("%s: closing its state: %v", m.name, err)
		}
	}
	h.t.Logf("local stores: %d task stores, %d keys, each equal to its changelog below its checkpoint", checked, keys)
}
