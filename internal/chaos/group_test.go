//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// groupMember is one member of the app's group as DescribeGroups shows it:
// its client id is the slot name (kafka.client_id), its partitions are the
// input partitions assigned to it (with two co-partitioned inputs, the
// numbers of the partitions it holds of either: its tasks).
type groupMember struct {
	memberID, clientID string
	partitions         []int32
}

// groupView is the app's consumer group at one moment.
type groupView struct {
	state   string
	members []groupMember
}

func (g groupView) String() string {
	var parts []string
	for _, m := range g.members {
		parts = append(parts, fmt.Sprintf("%s(%s…)=%v", m.clientID, prefix(m.memberID, 12), m.partitions))
	}
	return fmt.Sprintf("state %s, %d members [%s]", g.state, len(g.members), strings.Join(parts, " "))
}

func prefix(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (h *harness) describeGroup() (groupView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The hosts use KIP-848 groups where the broker has them (both test
	// brokers do); a classic group is described the classic way.
	if cgs, err := h.adm.DescribeConsumerGroups(ctx, h.appID); err == nil {
		if g, ok := cgs[h.appID]; ok && g.Err == nil && len(g.Members) > 0 {
			v := groupView{state: g.State}
			for _, m := range g.Members {
				gm := groupMember{memberID: m.MemberID, clientID: m.ClientID}
				// The app consumes only its input topics. The assignment is
				// keyed by topic name, which kfake leaves empty (it sends
				// topic IDs only, so kadm merges the topics' partitions under
				// ""): every topic's partitions are taken, and a partition
				// number counts once per member.
				target, assigned := 0, 0
				for _, ps := range m.TargetAssignment {
					target += len(ps)
				}
				owned := map[int32]bool{}
				for topic, ps := range m.Assignment {
					for p := range ps {
						assigned++
						owned[p] = true
						if _, ok := m.TargetAssignment[topic][p]; !ok {
							v.state = "Reconciling" // still moving to its target
						}
					}
				}
				if assigned != target {
					v.state = "Reconciling"
				}
				gm.partitions = slices.Sorted(maps.Keys(owned))
				v.members = append(v.members, gm)
			}
			return v, nil
		}
	}
	gs, err := h.adm.DescribeGroups(ctx, h.appID)
	if err != nil {
		return groupView{}, err
	}
	g, ok := gs[h.appID]
	if !ok {
		return groupView{}, errors.New("group not described")
	}
	if g.Err != nil {
		return groupView{}, g.Err
	}
	v := groupView{state: g.State}
	for _, m := range g.Members {
		gm := groupMember{memberID: m.MemberID, clientID: m.ClientID}
		if c, ok := m.Assigned.AsConsumer(); ok {
			owned := map[int32]bool{}
			for _, tp := range c.Topics {
				if slices.Contains(h.inTopics(), tp.Topic) {
					for _, p := range tp.Partitions {
						owned[p] = true
					}
				}
			}
			gm.partitions = slices.Sorted(maps.Keys(owned))
		}
		v.members = append(v.members, gm)
	}
	return v, nil
}

// waitGroup waits until the group is stable with want members that share
// every input partition, each owning some (with two inputs: each partition
// number on one member, the co-partitioned tasks whole).
func (h *harness) waitGroup(want int, bound time.Duration) groupView {
	h.t.Helper()
	start := time.Now()
	var last groupView
	var lastErr error
	for {
		h.checkDeadline("waiting for the group")
		h.restartDead()
		v, err := h.describeGroup()
		last, lastErr = v, err
		if err == nil && v.state == "Stable" && len(v.members) == want {
			owned := 0
			ok := true
			for _, m := range v.members {
				owned += len(m.partitions)
				ok = ok && len(m.partitions) > 0
			}
			if ok && owned == inputPartitions {
				h.t.Logf("group stable with %d members after %v: %s", want, time.Since(start).Round(time.Millisecond), v)
				return v
			}
		}
		if time.Since(start) > bound {
			h.t.Fatalf("group not stable with %d members within %v: last seen %s (err %v)%s", want, bound, last, lastErr, h.splitTasks(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// splitTasks names the partition numbers that several members hold: with
// co-partitioned inputs, tasks the assignment split between members.
func (h *harness) splitTasks(g groupView) string {
	holders := map[int32][]string{}
	for _, m := range g.members {
		for _, p := range m.partitions {
			holders[p] = append(holders[p], m.clientID)
		}
	}
	var split []string
	for _, p := range slices.Sorted(maps.Keys(holders)) {
		if len(holders[p]) > 1 {
			split = append(split, fmt.Sprintf("%d on %s", p, strings.Join(holders[p], "+")))
		}
	}
	if len(split) == 0 {
		return ""
	}
	what := "; partitions held by several members: "
	if h.in2 != "" {
		what = "; partitions held by several members (the inputs are not co-partitioned): "
	}
	return what + strings.Join(split, ", ")
}

// waitStableBeforeKill, on kfake, waits (up to bound) until no rebalance
// is in progress, and reports whether that happened; on the real broker it
// returns true at once.
//
// kfake's classic group expires a member that is waiting in JoinGroup when
// its session timeout passes, and drops its JoinGroup unanswered (Kafka
// keeps a member that awaits a join alive). A member killed during a
// rebalance, after it renewed its session there but before it joined,
// holds the join open past the sessions of the members already waiting in
// it: kfake then expires those, their JoinGroup requests hang until the
// client's own timeout (rebalance timeout + 10 s = 70 s) and the group
// stalls (seen in 4 of 5 runs of repeated kills on kfake's classic
// protocol; RATIONALE.md, "Kafka I/O"). So on kfake a SIGKILL only lands on a
// stable group; on the real broker it lands whenever it falls.
func (h *harness) waitStableBeforeKill(bound time.Duration) bool {
	h.t.Helper()
	if h.b.Real() {
		return true
	}
	start := time.Now()
	for {
		h.checkDeadline("waiting for a stable group before a SIGKILL")
		if g, err := h.describeGroup(); err == nil && g.state == "Stable" {
			return true
		}
		if time.Since(start) > bound {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stableNow reports whether the group is stable at this moment.
func (h *harness) stableNow() bool {
	g, err := h.describeGroup()
	return err == nil && g.state == "Stable"
}

// lag returns, per input partition, end offset minus the group's committed
// offset (the whole partition when nothing is committed), summed over the
// input topics.
func (h *harness) lag() (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lag := map[int32]int64{}
	for _, topic := range h.inTopics() {
		ends, err := h.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		committed, err := h.committedOf(topic)
		if err != nil {
			return nil, err
		}
		for p, e := range ends[topic] {
			c := committed[p]
			if c < 0 {
				c = 0
			}
			lag[p] += e.Offset - c
		}
	}
	return lag, nil
}

// committed returns the group's committed offset per partition of input 0
// (-1 for none).
func (h *harness) committed() (map[int32]int64, error) { return h.committedOf(h.in) }

// committedOf returns the group's committed offset per partition of one
// input topic (-1 for none).
func (h *harness) committedOf(topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := h.adm.FetchOffsets(ctx, h.appID)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	out := map[int32]int64{}
	for p := range int32(inputPartitions) {
		out[p] = -1
		if o, ok := offs.Lookup(topic, p); ok {
			out[p] = o.At
		}
	}
	return out, nil
}

// waitDrained waits until the group has committed every input record.
func (h *harness) waitDrained(bound time.Duration) {
	h.t.Helper()
	start := time.Now()
	var last map[int32]int64
	var lastErr error
	for {
		h.checkDeadline("waiting for the input to drain")
		h.failOnUnexpectedExits()
		lag, err := h.lag()
		last, lastErr = lag, err
		if err == nil {
			var total int64
			for _, l := range lag {
				total += l
			}
			if total == 0 {
				h.t.Logf("drained: every input record committed %v after the input stopped", time.Since(start).Round(time.Millisecond))
				return
			}
		}
		alive := 0
		for _, m := range h.members {
			if m.running() {
				alive++
			}
		}
		if alive == 0 {
			h.t.Fatalf("no wasmstream process is alive to drain the input (lag %v)", last)
		}
		if time.Since(start) > bound {
			g, gerr := h.describeGroup()
			h.t.Fatalf("input not drained within %v: lag per partition %v (err %v); group: %s (err %v); open transactions on our output: %s",
				bound, last, lastErr, g, gerr, h.openTxnsString())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitSettled waits until no transaction is open on the output topic or
// the changelog: every process has stopped, but a killed process's last
// transaction stays open until the broker aborts it at its timeout, and
// until then the last stable offset hides everything committed after its
// first record.
func (h *harness) waitSettled() {
	h.t.Helper()
	bound := h.txnTimeout + 30*time.Second
	start := time.Now()
	var open []string
	for {
		h.checkDeadline("waiting for the last transactions to end")
		open = open[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, topic := range append([]string{h.out}, h.changelogs()...) {
			ends, err := h.adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			stable, err2 := h.adm.ListCommittedOffsets(ctx, topic)
			if err2 == nil {
				err2 = stable.Error()
			}
			if err != nil || err2 != nil {
				open = append(open, fmt.Sprintf("%s: %v %v", topic, err, err2))
				continue
			}
			for p, e := range ends[topic] {
				if lso := stable[topic][p].Offset; lso != e.Offset {
					open = append(open, fmt.Sprintf("%s/%d: last stable %d < end %d", prefix(topic, 24), p, lso, e.Offset))
				}
			}
		}
		cancel()
		if len(open) == 0 {
			h.t.Logf("settled: no transaction open on the output or the changelog %v after the stop", time.Since(start).Round(time.Millisecond))
			h.checkInputsRecorded()
			return
		}
		if time.Since(start) > bound {
			sort.Strings(open)
			h.t.Fatalf("transactions still open %v after every process stopped (transaction timeout %v): %s; open transactions on the output: %s",
				bound, h.txnTimeout, strings.Join(open, ", "), h.openTxnsString())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// openTxns returns the ongoing transactions that write to this app's
// output topic, by transactional id.
func (h *harness) openTxns() (map[string]kadmTxn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := h.adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		return nil, err
	}
	var ids []string
	for id, lt := range list {
		if lt.State == "Ongoing" {
			ids = append(ids, id)
		}
	}
	out := map[string]kadmTxn{}
	if len(ids) == 0 {
		return out, nil
	}
	ds, err := h.adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(ds) == 0 {
		return nil, err
	}
	for id, d := range ds {
		if d.Err == nil && d.State == "Ongoing" {
			if _, ours := d.Topics[h.out]; ours {
				out[id] = d
			}
		}
	}
	return out, nil
}

func (h *harness) openTxnsString() string {
	txns, err := h.openTxns()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(txns) == 0 {
		return "none"
	}
	var parts []string
	for id, d := range txns {
		parts = append(parts, fmt.Sprintf("%s (pid %d epoch %d, open %v)", id, d.ProducerID, d.ProducerEpoch,
			time.Since(time.UnixMilli(d.StartTimestamp)).Round(time.Millisecond)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// kadmTxn is an open transaction as the broker describes it.
type kadmTxn = kadm.DescribedTransaction
