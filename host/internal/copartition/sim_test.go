package copartition

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file simulates the classic cooperative protocol around the balancer:
// every member joins with the metadata its own balancer writes (what it
// owns and in which generation), the leader balances, every member takes
// its assignment, and a member that lost partitions rejoins, which starts
// the next round.

// simMember is one group member between rounds.
type simMember struct {
	id       string
	topics   []string   // subscription, sorted
	groups   [][]string // its co-partition groups
	userData []byte     // if non-nil, replaces the UserData its balancer writes
	owned    map[string][]int32
	gen      int32
}

// assignment is member => topic => partitions, partitions sorted.
type assignment map[string]map[string][]int32

// metadata is what m sends in JoinGroup.
func (m *simMember) metadata(t testing.TB) []byte {
	b := Balancer(m.groups).JoinGroupMetadata(m.topics, m.owned, m.gen)
	if m.userData == nil {
		return b
	}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	meta.UserData = m.userData
	return meta.AppendTo(nil)
}

// balance runs the leader's side of one join: the balancer's MemberBalancer
// and Balance, and each member's ParseSyncAssignment.
func balance(t testing.TB, members []*simMember, counts map[string]int32) assignment {
	t.Helper()
	return balanceWith(t, Balancer(nil), members, counts) // the leader's own groups play no part
}

// balanceWith is balance with leader as the leader's balancer.
func balanceWith(t testing.TB, leader kgo.GroupBalancer, members []*simMember, counts map[string]int32) assignment {
	t.Helper()
	join := make([]kmsg.JoinGroupResponseMember, len(members))
	for i, m := range members {
		join[i] = kmsg.NewJoinGroupResponseMember()
		join[i].MemberID = m.id
		join[i].ProtocolMetadata = m.metadata(t)
	}
	mb, topics, err := leader.MemberBalancer(join)
	if err != nil {
		t.Fatalf("MemberBalancer: %v", err)
	}
	// The topics to balance are the subscribed ones; kgo looks up their
	// partition counts.
	have := map[string]int32{}
	for topic := range topics {
		if n, ok := counts[topic]; ok {
			have[topic] = n
		}
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(have)
	if err != nil {
		t.Fatalf("Balance: %v", err)
	}
	got := assignment{}
	for _, a := range into.IntoSyncAssignment() {
		parsed, err := leader.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatalf("ParseSyncAssignment(%s): %v", a.MemberID, err)
		}
		if _, dup := got[a.MemberID]; dup {
			t.Fatalf("two assignments for %s", a.MemberID)
		}
		for topic, parts := range parsed {
			if len(parts) == 0 {
				delete(parsed, topic)
			}
		}
		got[a.MemberID] = parsed
	}
	for _, m := range members {
		if _, ok := got[m.id]; !ok {
			t.Fatalf("no assignment for %s", m.id)
		}
	}
	return got
}

// round runs one rebalance of generation gen and applies it. It fails t if
// a partition could be consumed by two members at once: a partition given
// to a member that did not own it must not be owned by any other member,
// because that owner keeps consuming it until it syncs, which may be after
// the new owner starts. It reports whether any member lost a partition,
// which makes that member rejoin.
func round(t testing.TB, members []*simMember, counts map[string]int32, gen int32) (revoked bool) {
	t.Helper()
	plan := balance(t, members, counts)
	owner := map[topicPartition]string{}
	for _, m := range members {
		for topic, parts := range m.owned {
			for _, p := range parts {
				if prev, ok := owner[topicPartition{topic, p}]; ok {
					t.Fatalf("generation %d: %s-%d owned by %s and %s", gen, topic, p, prev, m.id)
				}
				owner[topicPartition{topic, p}] = m.id
			}
		}
	}
	planned := map[topicPartition]string{}
	for _, m := range members {
		for topic, parts := range plan[m.id] {
			if !slices.Contains(m.topics, topic) {
				t.Fatalf("generation %d: %s assigned %s, which it does not subscribe to", gen, m.id, topic)
			}
			for _, p := range parts {
				tp := topicPartition{topic, p}
				if other, ok := planned[tp]; ok {
					t.Fatalf("generation %d: %s-%d assigned to %s and %s", gen, topic, p, other, m.id)
				}
				planned[tp] = m.id
				if prev, ok := owner[tp]; ok && prev != m.id {
					t.Fatalf("generation %d: %s-%d given to %s while %s still owns it", gen, topic, p, m.id, prev)
				}
			}
		}
	}
	for _, m := range members {
		for topic, parts := range m.owned {
			for _, p := range parts {
				if !slices.Contains(plan[m.id][topic], p) {
					revoked = true
				}
			}
		}
		m.owned = plan[m.id]
		m.gen = gen
	}
	return revoked
}

// maxRounds bounds the rounds to a stable assignment after a change: the
// first plans the target and withholds what moves from one member to
// another, whose owners revoke it; the second assigns what was withheld.
// Nothing is revoked in the second: every member then holds a subset of the
// target, within its quota, and only the target's owner claims any
// partition of a unit.
const maxRounds = 2

// converge runs rounds from generation *gen until no member loses anything,
// and fails t if that takes more than maxRounds. It returns the number of
// rounds.
func converge(t testing.TB, members []*simMember, counts map[string]int32, gen *int32) int {
	t.Helper()
	for n := 1; n <= maxRounds; n++ {
		*gen++
		if !round(t, members, counts, *gen) {
			return n
		}
	}
	t.Fatalf("no stable assignment after %d rounds:\n%s", maxRounds, dump(members))
	return 0
}

func dump(members []*simMember) string {
	var sb strings.Builder
	for _, m := range members {
		fmt.Fprintf(&sb, "  %s %v groups %v gen %d owns", m.id, m.topics, m.groups, m.gen)
		for _, topic := range slices.Sorted(maps.Keys(m.owned)) {
			fmt.Fprintf(&sb, " %s%v", topic, m.owned[topic])
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// expectedGroups is the co-partition groups the members declare, merged,
// over the subscribed topics with partitions; computed here without the
// package's union-find, by repeated merging.
func expectedGroups(members []*simMember, counts map[string]int32) [][]string {
	subscribed := map[string]bool{}
	for _, m := range members {
		for _, topic := range m.topics {
			if counts[topic] > 0 {
				subscribed[topic] = true
			}
		}
	}
	var sets []map[string]bool
	add := func(g []string) {
		set := map[string]bool{}
		for _, topic := range g {
			if subscribed[topic] {
				set[topic] = true
			}
		}
		if len(set) == 0 {
			return
		}
		for i := 0; i < len(sets); {
			overlap := false
			for topic := range set {
				overlap = overlap || sets[i][topic]
			}
			if overlap {
				maps.Copy(set, sets[i])
				sets = slices.Delete(sets, i, i+1)
				continue
			}
			i++
		}
		sets = append(sets, set)
	}
	for _, m := range members {
		if m.userData != nil {
			if g, ok := decodeGroups(m.userData); ok {
				for _, g := range g {
					add(g)
				}
			}
			continue
		}
		for _, g := range m.groups {
			add(g)
		}
	}
	for topic := range subscribed {
		add([]string{topic})
	}
	var out [][]string
	for _, set := range sets {
		out = append(out, slices.Sorted(maps.Keys(set)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// checkStable fails t unless the members' assignment is what a stable
// group must have: every subscribed partition owned exactly once by a
// subscriber; every unit of a group owned whole by one member subscribed
// to all of the group's topics; and each such member holding floor or
// ceil of the group's units. A group nobody subscribes to whole is checked
// topic by topic instead.
func checkStable(t testing.TB, members []*simMember, counts map[string]int32) {
	t.Helper()
	owner := map[topicPartition]*simMember{}
	for _, m := range members {
		for topic, parts := range m.owned {
			for _, p := range parts {
				owner[topicPartition{topic, p}] = m
			}
		}
	}
	subscribes := func(m *simMember, g []string) bool {
		for _, topic := range g {
			if !slices.Contains(m.topics, topic) {
				return false
			}
		}
		return true
	}
	// checkGroup checks the units of g among the members subscribed to all of g.
	checkGroup := func(g []string) {
		var eligible []*simMember
		for _, m := range members {
			if subscribes(m, g) {
				eligible = append(eligible, m)
			}
		}
		var units int32
		for _, topic := range g {
			units = max(units, counts[topic])
		}
		held := map[*simMember]int{}
		for p := range units {
			var first *simMember
			for _, topic := range g {
				if p >= counts[topic] {
					continue
				}
				o := owner[topicPartition{topic, p}]
				switch {
				case o == nil:
					t.Fatalf("%s-%d is owned by nobody:\n%s", topic, p, dump(members))
				case !subscribes(o, g):
					t.Fatalf("%s-%d is owned by %s, which does not subscribe to all of %v:\n%s", topic, p, o.id, g, dump(members))
				case first == nil:
					first = o
				case o != first:
					t.Fatalf("unit %v-%d is split between %s and %s:\n%s", g, p, first.id, o.id, dump(members))
				}
			}
			held[first]++
		}
		lo, hi := int(units)/len(eligible), (int(units)+len(eligible)-1)/len(eligible)
		for _, m := range eligible {
			if n := held[m]; n < lo || n > hi {
				t.Fatalf("%s holds %d of the %d units of %v; each of the %d members should hold %d to %d:\n%s",
					m.id, n, units, g, len(eligible), lo, hi, dump(members))
			}
		}
	}
	checked := map[string]bool{}
	for _, g := range expectedGroups(members, counts) {
		whole := slices.ContainsFunc(members, func(m *simMember) bool { return subscribes(m, g) })
		if whole {
			checkGroup(g)
		} else {
			for _, topic := range g {
				checkGroup([]string{topic})
			}
		}
		for _, topic := range g {
			checked[topic] = true
		}
	}
	for tp := range owner {
		if !checked[tp.topic] {
			t.Fatalf("%s-%d is owned but nobody subscribes to %s", tp.topic, tp.partition, tp.topic)
		}
	}
}

// unitOwners returns unit key => owner for the units of the groups given.
func unitOwners(members []*simMember, groups [][]string) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		for topic, parts := range m.owned {
			for _, g := range groups {
				if slices.Contains(g, topic) {
					for _, p := range parts {
						out[fmt.Sprintf("%v-%d", g, p)] = m.id
					}
				}
			}
		}
	}
	return out
}
