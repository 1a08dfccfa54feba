package copartition

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The planner computes the target assignment from the members' metadata
// alone, so that any leader computes the same plan from the same join:
//
//  1. Groups: the union of every member's declared groups over the topics
//     being balanced (union-find, so groups sharing a topic merge); every
//     other topic is a group of its own.
//  2. Units: (G, p) for p below the largest partition count in G, holding
//     the topics of G that have partition p.
//  3. Per group, in order of its first topic: the eligible members are those
//     subscribed to every topic of G. With none, G is balanced topic by
//     topic instead, among each topic's subscribers, so that no subscribed
//     partition is left unassigned. Each unit's previous owner (the eligible
//     member with the most current claims on its partitions) keeps it up to
//     the quota; then every free unit goes to the eligible member with the
//     fewest units in G, ties to the fewest units over all groups so far,
//     then to the smallest member id.
//
// AdjustCooperative then withholds what would move without a revoke.

// member is one member of the join, as the planner sees it.
type member struct {
	join  *kmsg.JoinGroupResponseMember
	idx   int // in planner.members
	id    string
	subs  []string // subscribed topics, sorted (NewConsumerBalancer sorts them)
	gen   int32    // the generation its owned partitions are from
	total int      // units assigned to it so far, over every group
}

func (m *member) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(m.subs, topic)
	return ok
}

// less orders candidates for a free unit in a group: fewest units there
// (inA, inB), then fewest over all groups, then member id.
func less(a, b *member, inA, inB int) bool {
	if inA != inB {
		return inA < inB
	}
	if a.total != b.total {
		return a.total < b.total
	}
	return a.id < b.id
}

type topicPartition struct {
	topic     string
	partition int32
}

// claim is who owns a partition by the metadata: the members claiming it
// at the highest generation any member claims it at. A claim at a lower
// generation is stale (that member missed the rebalance that moved the
// partition; KIP-792) and is ignored, as AdjustCooperative ignores it.
type claim struct {
	gen     int32
	members []int // indexes into planner.members
}

type planner struct {
	members []*member
	counts  map[string]int32 // partitions per topic being balanced
	claims  map[topicPartition]*claim
	groups  [][]string // declared groups, merged; each sorted
	// standbys: a free unit goes to the member StandbyRank ranks first
	// among those with room (StandbyBalancer), not the least loaded.
	standbys bool
}

func newPlanner(cb *kgo.ConsumerBalancer, counts map[string]int32) *planner {
	p := &planner{counts: counts, claims: map[topicPartition]*claim{}}
	var declared [][]string
	cb.EachMember(func(join *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		i := len(p.members)
		p.members = append(p.members, &member{join: join, idx: i, id: join.MemberID, subs: meta.Topics, gen: meta.Generation})
		groups, _ := decodeGroups(meta.UserData) // a bad declaration declares nothing
		declared = append(declared, groups...)
		for _, owned := range meta.OwnedPartitions {
			n, ok := counts[owned.Topic]
			if !ok {
				continue
			}
			for _, part := range owned.Partitions {
				if part < 0 || part >= n {
					continue
				}
				tp := topicPartition{owned.Topic, part}
				c := p.claims[tp]
				switch {
				case c == nil || meta.Generation > c.gen:
					p.claims[tp] = &claim{gen: meta.Generation, members: []int{i}}
				case meta.Generation == c.gen && !slices.Contains(c.members, i):
					c.members = append(c.members, i)
				}
			}
		}
	})
	p.groups = mergeGroups(declared, counts)
	return p
}

// mergeGroups returns the connected components of the declared groups over
// the topics with partitions in counts, each sorted, ordered by first
// topic; a topic in no declared group is a component of its own.
func mergeGroups(declared [][]string, counts map[string]int32) [][]string {
	parent := map[string]string{}
	var find func(string) string
	find = func(t string) string {
		if parent[t] == t {
			return t
		}
		root := find(parent[t])
		parent[t] = root
		return root
	}
	for t, n := range counts {
		if n > 0 {
			parent[t] = t
		}
	}
	for _, g := range declared {
		prev := ""
		for _, t := range g {
			if _, ok := parent[t]; !ok {
				continue
			}
			if prev != "" {
				a, b := find(prev), find(t)
				if a != b {
					parent[max(a, b)] = min(a, b)
				}
			}
			prev = t
		}
	}
	byRoot := map[string][]string{}
	for t := range parent {
		r := find(t)
		byRoot[r] = append(byRoot[r], t)
	}
	groups := make([][]string, 0, len(byRoot))
	for _, g := range byRoot {
		slices.Sort(g)
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b []string) int { return slices.Compare(a[:1], b[:1]) })
	return groups
}

// assign adds the target assignment to plan.
func (p *planner) assign(plan *kgo.BalancePlan) {
	for _, g := range p.groups {
		if eligible := p.eligible(g); len(eligible) > 0 || len(g) == 1 {
			p.assignGroup(plan, g, eligible)
			continue
		}
		// Nobody can take whole units: give each topic's partitions to its
		// own subscribers rather than leave them unconsumed.
		for _, t := range g {
			p.assignGroup(plan, []string{t}, p.eligible([]string{t}))
		}
	}
}

// eligible returns the members subscribed to every topic of g, in member
// order.
func (p *planner) eligible(g []string) []*member {
	var out []*member
	for _, m := range p.members {
		if !slices.ContainsFunc(g, func(t string) bool { return !m.subscribes(t) }) {
			out = append(out, m)
		}
	}
	return out
}

// assignGroup assigns the units of group g among eligible.
func (p *planner) assignGroup(plan *kgo.BalancePlan, g []string, eligible []*member) {
	if len(eligible) == 0 {
		return
	}
	var nUnits int32
	for _, t := range g {
		nUnits = max(nUnits, p.counts[t])
	}
	units := int(nUnits)

	pos := make([]int, len(p.members)) // member index => index in eligible, or -1
	for i := range pos {
		pos[i] = -1
	}
	for e, m := range eligible {
		pos[m.idx] = e
	}
	held := make([][]int32, len(eligible)) // the units eligible[e] keeps, ascending
	owner := make([]int, units)            // index into eligible, -1 while free
	for u := range owner {
		owner[u] = p.previousOwner(g, int32(u), eligible, pos)
		if owner[u] >= 0 {
			held[owner[u]] = append(held[owner[u]], int32(u))
		}
	}
	free := func(e, keep int) {
		for _, u := range held[e][keep:] {
			owner[u] = -1
		}
		held[e] = held[e][:keep]
	}

	// Quotas: rem members may hold ceil units, the others floor.
	floor, rem := units/len(eligible), units%len(eligible)
	ceil := floor
	if rem > 0 {
		ceil++
	}
	var atCeil []int
	for e := range eligible {
		if len(held[e]) > ceil {
			free(e, ceil)
		}
		if rem > 0 && len(held[e]) == ceil {
			atCeil = append(atCeil, e)
		}
	}
	if len(atCeil) > rem {
		// The extra units stay with the members holding the fewest units
		// elsewhere, so that the extras of several groups spread out.
		slices.SortFunc(atCeil, func(a, b int) int {
			if less(eligible[a], eligible[b], 0, 0) {
				return -1
			}
			return 1 // member ids differ, so never equal
		})
		for _, e := range atCeil[rem:] {
			free(e, floor)
		}
	}

	for e, m := range eligible {
		m.total += len(held[e])
	}
	atCeilNow := 0
	if rem > 0 {
		for e := range eligible {
			if len(held[e]) == ceil {
				atCeilNow++
			}
		}
	}
	for u := range owner {
		if owner[u] >= 0 {
			continue
		}
		best := 0
		for e := 1; e < len(eligible); e++ {
			if less(eligible[e], eligible[best], len(held[e]), len(held[best])) {
				best = e
			}
		}
		if p.standbys {
			// The member with room ranked first for the unit: where its
			// standby is. Room: below floor, or at floor while fewer than
			// rem members hold ceil.
			var top uint64
			found := false
			for e, m := range eligible {
				if room := len(held[e]) < floor || rem > 0 && len(held[e]) == floor && atCeilNow < rem; !room {
					continue
				}
				if r := StandbyRank(g[0], int32(u), m.id); !found || r > top {
					best, top, found = e, r, true
				}
			}
		}
		if rem > 0 && len(held[best]) == floor {
			atCeilNow++
		}
		owner[u] = best
		held[best] = append(held[best], int32(u))
		eligible[best].total++
	}

	for u, e := range owner {
		for _, t := range g {
			if int32(u) < p.counts[t] {
				plan.AddPartition(eligible[e].join, t, int32(u))
			}
		}
	}
}

// previousOwner returns the eligible member (an index into eligible) with
// the most current claims on the partitions of unit (g, u), ties to the
// higher generation, then the smaller member id; -1 if no eligible member
// claims any of them. pos maps a member's index to its index in eligible,
// or -1.
func (p *planner) previousOwner(g []string, u int32, eligible []*member, pos []int) int {
	claims := make(map[int]int) // index into eligible => claims
	for _, t := range g {
		if c := p.claims[topicPartition{t, u}]; c != nil {
			for _, i := range c.members {
				if e := pos[i]; e >= 0 {
					claims[e]++
				}
			}
		}
	}
	best := -1
	for e, n := range claims {
		if best < 0 || n > claims[best] ||
			n == claims[best] && (eligible[e].gen > eligible[best].gen ||
				eligible[e].gen == eligible[best].gen && eligible[e].id < eligible[best].id) {
			best = e
		}
	}
	return best
}
