package copartition

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newMembers(n int, topics []string, groups [][]string) []*simMember {
	out := make([]*simMember, n)
	for i := range out {
		out[i] = &simMember{id: fmt.Sprintf("m%02d", i), topics: topics, groups: groups, gen: -1}
	}
	return out
}

func TestProtocol(t *testing.T) {
	b := Balancer([][]string{{"b", "a"}})
	if b.ProtocolName() != ProtocolName || !b.IsCooperative() {
		t.Fatalf("ProtocolName %q, IsCooperative %v", b.ProtocolName(), b.IsCooperative())
	}
	raw := b.JoinGroupMetadata([]string{"a", "b", "c"}, map[string][]int32{"c": {1}, "a": {0, 2}, "b": {0, 2}}, 7)
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if meta.Version != 3 || meta.Generation != 7 || !slices.Equal(meta.Topics, []string{"a", "b", "c"}) {
		t.Errorf("metadata version %d, generation %d, topics %v", meta.Version, meta.Generation, meta.Topics)
	}
	var owned []string
	for _, o := range meta.OwnedPartitions {
		owned = append(owned, fmt.Sprint(o.Topic, o.Partitions))
	}
	if want := []string{"a[0 2]", "b[0 2]", "c[1]"}; !slices.Equal(owned, want) {
		t.Errorf("owned partitions %v, want %v (sorted by topic)", owned, want)
	}
	if groups, ok := decodeGroups(meta.UserData); !ok || !reflect.DeepEqual(groups, [][]string{{"a", "b"}}) {
		t.Errorf("user data %x decodes as %v, %v", meta.UserData, groups, ok)
	}
	// The same state gives the same bytes: the broker would otherwise see
	// a changed member on every rejoin.
	again := b.JoinGroupMetadata([]string{"a", "b", "c"}, map[string][]int32{"b": {0, 2}, "a": {0, 2}, "c": {1}}, 7)
	if !bytes.Equal(raw, again) {
		t.Error("equal JoinGroup metadata encodes differently")
	}

	// A sync assignment parses as franz-go's consumer assignment.
	var assn kmsg.ConsumerMemberAssignment
	topic := kmsg.NewConsumerMemberAssignmentTopic()
	topic.Topic, topic.Partitions = "a", []int32{3}
	assn.Topics = append(assn.Topics, topic)
	got, err := b.ParseSyncAssignment(assn.AppendTo(nil))
	if err != nil || !reflect.DeepEqual(got, map[string][]int32{"a": {3}}) {
		t.Errorf("ParseSyncAssignment: %v, %v", got, err)
	}
	if _, _, err := b.MemberBalancer([]kmsg.JoinGroupResponseMember{{MemberID: "x", ProtocolMetadata: []byte{0, 9, 1}}}); err == nil {
		t.Error("MemberBalancer accepted unreadable member metadata")
	}
}

// A first assignment: units go out whole, in order, to the member with the
// fewest units in the group, then the fewest overall, then the smallest id.
func TestFirstAssignment(t *testing.T) {
	members := newMembers(3, []string{"a", "b", "c"}, [][]string{{"a", "b"}})
	counts := map[string]int32{"a": 4, "b": 4, "c": 2}
	plan := balance(t, members, counts)
	want := assignment{
		"m00": {"a": {0, 3}, "b": {0, 3}},
		"m01": {"a": {1}, "b": {1}, "c": {0}}, // m01 and m02 hold one unit each, m00 two
		"m02": {"a": {2}, "b": {2}, "c": {1}},
	}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	var gen int32
	if n := converge(t, members, counts, &gen); n != 1 {
		t.Errorf("a first assignment took %d rounds", n)
	}
	checkStable(t, members, counts)
}

// A stable group gets back exactly what it has, byte for byte, whatever
// order the join lists the members in.
func TestStablePlanIsIdentical(t *testing.T) {
	members := newMembers(4, []string{"a", "b", "c"}, [][]string{{"a", "b"}})
	counts := map[string]int32{"a": 7, "b": 7, "c": 5}
	var gen int32
	converge(t, members, counts, &gen)
	before := balance(t, members, counts)
	for range 3 {
		rand.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		if after := balance(t, members, counts); !reflect.DeepEqual(before, after) {
			t.Fatalf("a stable group was reassigned:\nbefore %v\nafter  %v", before, after)
		}
	}
	for _, m := range members {
		if !reflect.DeepEqual(before[m.id], m.owned) {
			t.Errorf("%s owns %v but is assigned %v", m.id, m.owned, before[m.id])
		}
	}
}

// A member that joins takes only what it needs: every unit that moves goes
// to it, and none moves between the members that stay. A member that
// leaves gives its units away and nobody else's move.
func TestJoinAndLeaveMoveOnlyWhatTheyMust(t *testing.T) {
	groups := [][]string{{"a", "b"}}
	members := newMembers(3, []string{"a", "b"}, groups)
	counts := map[string]int32{"a": 12, "b": 12}
	var gen int32
	converge(t, members, counts, &gen)
	before := unitOwners(members, groups)

	joiner := &simMember{id: "m99", topics: []string{"a", "b"}, groups: groups, gen: -1}
	members = append(members, joiner)
	if n := converge(t, members, counts, &gen); n != 2 {
		t.Errorf("a join took %d rounds; want 2 (revoke, then assign)", n)
	}
	checkStable(t, members, counts)
	after := unitOwners(members, groups)
	moved := 0
	for unit, was := range before {
		if now := after[unit]; now != was {
			moved++
			if now != joiner.id {
				t.Errorf("unit %s moved from %s to %s, not to the joiner", unit, was, now)
			}
		}
	}
	if moved != 3 {
		t.Errorf("%d units moved to the joiner, want 3 (12 units over 4 members)", moved)
	}

	members = slices.Delete(members, 1, 2) // m01 leaves
	before = after
	if n := converge(t, members, counts, &gen); n != 1 {
		t.Errorf("a leave took %d rounds; the leaver's units are free at once", n)
	}
	checkStable(t, members, counts)
	after = unitOwners(members, groups)
	for unit, was := range before {
		if now := after[unit]; was != "m01" && now != was {
			t.Errorf("unit %s moved from %s to %s, though %s stayed", unit, was, now, was)
		}
	}
}

// A member that missed rebalances rejoins claiming what has since moved;
// the later generation's claim wins, and the stale claimant is not told it
// keeps the unit.
func TestStaleClaimLoses(t *testing.T) {
	members := newMembers(2, []string{"a", "b"}, [][]string{{"a", "b"}})
	counts := map[string]int32{"a": 2, "b": 2}
	members[0].owned, members[0].gen = map[string][]int32{"a": {0, 1}, "b": {0, 1}}, 5
	members[1].owned, members[1].gen = map[string][]int32{"a": {0}, "b": {0}}, 7
	plan := balance(t, members, counts)
	want := assignment{"m00": {"a": {1}, "b": {1}}, "m01": {"a": {0}, "b": {0}}}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
}

// A unit whose partitions two members hold (the groups were just merged)
// goes to the member with the most of them; the other revokes its part
// first.
func TestSplitUnitGathers(t *testing.T) {
	members := newMembers(2, []string{"a", "b", "c"}, [][]string{{"a", "b", "c"}})
	counts := map[string]int32{"a": 1, "b": 1, "c": 1}
	members[0].owned, members[0].gen = map[string][]int32{"a": {0}}, 3
	members[1].owned, members[1].gen = map[string][]int32{"b": {0}, "c": {0}}, 3
	var gen int32 = 3
	if n := converge(t, members, counts, &gen); n != 2 {
		t.Errorf("took %d rounds, want 2", n)
	}
	checkStable(t, members, counts)
	if got := members[1].owned; !reflect.DeepEqual(got, map[string][]int32{"a": {0}, "b": {0}, "c": {0}}) {
		t.Errorf("m01 owns %v; it held two of the unit's three partitions", got)
	}
}

// Owned partitions that cannot be (beyond the topic, of a topic nobody
// subscribes to, listed twice, or claimed by two members in one generation)
// neither panic nor yield a partition twice.
func TestNonsenseClaims(t *testing.T) {
	members := newMembers(2, []string{"a"}, nil)
	members[0].owned, members[0].gen = map[string][]int32{"a": {0, 0, 7, -1}, "z": {0}}, 4
	members[1].owned, members[1].gen = map[string][]int32{"a": {0}}, 4
	plan := balance(t, members, map[string]int32{"a": 2})
	if want := (assignment{"m00": {"a": {0}}, "m01": {"a": {1}}}); !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
}

// Members that subscribe to part of a group get none of its units; with no
// member subscribed to all of it, each topic is balanced by itself.
func TestPartialSubscription(t *testing.T) {
	counts := map[string]int32{"a": 4, "b": 4}
	members := []*simMember{
		{id: "whole", topics: []string{"a", "b"}, groups: [][]string{{"a", "b"}}, gen: -1},
		{id: "part", topics: []string{"a"}, gen: -1},
	}
	var gen int32
	converge(t, members, counts, &gen)
	checkStable(t, members, counts)
	if len(members[1].owned) != 0 {
		t.Errorf("a member subscribed to a only owns %v", members[1].owned)
	}

	// Nobody subscribes to both a and b.
	members = []*simMember{
		{id: "x", topics: []string{"a"}, groups: [][]string{{"a", "b"}}, gen: -1},
		{id: "y", topics: []string{"a"}, gen: -1},
		{id: "z", topics: []string{"b"}, gen: -1},
	}
	converge(t, members, counts, &gen)
	checkStable(t, members, counts)
	want := []map[string][]int32{{"a": {0, 2}}, {"a": {1, 3}}, {"b": {0, 1, 2, 3}}}
	for i, m := range members {
		if !reflect.DeepEqual(m.owned, want[i]) {
			t.Errorf("%s owns %v, want %v", m.id, m.owned, want[i])
		}
	}
}

// Topics of one group with different partition counts (the host refuses
// such a configuration; the balancer must still assign everything): unit p
// holds the topics that have partition p.
func TestUnequalPartitionCounts(t *testing.T) {
	members := newMembers(3, []string{"a", "b"}, [][]string{{"a", "b"}})
	counts := map[string]int32{"a": 6, "b": 4}
	var gen int32
	converge(t, members, counts, &gen)
	checkStable(t, members, counts)
}

// Groups that share a topic are one group; a topic nobody subscribes to
// does not join anything.
func TestOverlappingGroupsMerge(t *testing.T) {
	counts := map[string]int32{"a": 3, "b": 3, "c": 3, "d": 3}
	members := []*simMember{
		{id: "m1", topics: []string{"a", "b", "c", "d"}, groups: [][]string{{"a", "b"}, {"x", "d"}}, gen: -1},
		{id: "m2", topics: []string{"a", "b", "c", "d"}, groups: [][]string{{"b", "c"}}, gen: -1},
	}
	var gen int32
	converge(t, members, counts, &gen)
	checkStable(t, members, counts)
	if got := expectedGroups(members, counts); !reflect.DeepEqual(got, [][]string{{"a", "b", "c"}, {"d"}}) {
		t.Fatalf("test's groups %v", got)
	}
}

// Members whose UserData is bad are balanced as if they declared no
// groups; the group still gets a complete plan.
func TestCorruptUserData(t *testing.T) {
	counts := map[string]int32{"a": 4, "b": 4, "c": 4}
	valid := encodeGroups([][]string{{"b", "c"}})
	for _, bad := range [][]byte{
		{9, 1, 2, 3},              // unknown version
		{1, 0xff, 0xff, 0xff},     // truncated count
		{1, 1, 2, 1, 'a', 5, 'b'}, // topic beyond the bytes
		append(append([]byte{}, valid...), make([]byte, maxUserData)...), // oversized
	} {
		members := []*simMember{
			{id: "m1", topics: []string{"a", "b", "c"}, userData: bad, gen: -1},
			{id: "m2", topics: []string{"a", "b", "c"}, userData: bad, gen: -1},
			{id: "m3", topics: []string{"a", "b", "c"}, groups: [][]string{{"a", "b"}}, gen: -1},
		}
		var gen int32
		converge(t, members, counts, &gen)
		checkStable(t, members, counts) // with {a, b} and {c}: m1's and m2's groups count for nothing
		members[2].groups = nil
		converge(t, members, counts, &gen)
		checkStable(t, members, counts)
	}
}

// Groups declared only by some members, and members joining with new
// declarations, move partitions safely: a restart that adds a group to
// every member merges a, b from singletons into one group.
func TestGroupsChangeSafely(t *testing.T) {
	counts := map[string]int32{"a": 6, "b": 6}
	members := newMembers(3, []string{"a", "b"}, nil)
	var gen int32
	converge(t, members, counts, &gen)
	checkStable(t, members, counts)
	for _, m := range members {
		m.groups = [][]string{{"a", "b"}}
		converge(t, members, counts, &gen)
		checkStable(t, members, counts)
	}
}

// The randomized simulation: members join and leave with per-processor
// subscriptions, and after every change the group converges, safely, to a
// co-partitioned, balanced assignment.
func TestRandomRebalances(t *testing.T) {
	type kind struct {
		topics []string
		groups [][]string
	}
	kinds := []kind{
		{[]string{"a", "b"}, [][]string{{"a", "b"}}},                       // the join processor only
		{[]string{"c"}, nil},                                               // the counter only
		{[]string{"a", "b", "c", "d"}, [][]string{{"a", "b"}}},             // every processor
		{[]string{"a"}, nil},                                               // an old version reading a alone
		{[]string{"c", "d", "e"}, [][]string{{"d", "e"}, {"c", "e", "e"}}}, // merges c, d, e
	}
	counts := map[string]int32{"a": 8, "b": 8, "c": 5, "d": 3, "e": 3}
	start := time.Now()
	var where string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("failed at", where)
		}
	})
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var members []*simMember
		var gen int32
		next := 0
		for step := range 40 {
			if len(members) > 0 && (len(members) >= 8 || rng.IntN(3) == 0) {
				i := rng.IntN(len(members))
				members = slices.Delete(members, i, i+1)
			} else {
				k := kinds[rng.IntN(len(kinds))]
				members = append(members, &simMember{id: fmt.Sprintf("m%03d", next), topics: k.topics, groups: k.groups, gen: -1})
				next++
				// Members join in any order; the balancer must not care.
				rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
			}
			if len(members) == 0 {
				continue
			}
			where = fmt.Sprintf("seed %d, step %d", seed, step)
			converge(t, members, counts, &gen)
			checkStable(t, members, counts)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the simulation took %v", d)
	}
}

// Every plan satisfies kgo: a ConsumerBalancer is what MemberBalancer
// returns, and it balances without an error.
func TestMemberBalancerType(t *testing.T) {
	join := []kmsg.JoinGroupResponseMember{{MemberID: "m", ProtocolMetadata: Balancer(nil).JoinGroupMetadata([]string{"a"}, nil, -1)}}
	mb, topics, err := Balancer(nil).MemberBalancer(join)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mb.(*kgo.ConsumerBalancer); !ok {
		t.Errorf("MemberBalancer returned %T", mb)
	}
	if _, ok := topics["a"]; !ok || len(topics) != 1 {
		t.Errorf("MemberBalancer topics %v", topics)
	}
}

// StandbyBalancer: a unit whose owner left goes to the member with room
// that StandbyRank ranks first for it, where the runner keeps the unit's
// standby, rather than to the least loaded member (Balancer's choice);
// what stays with its owner stays.
func TestStandbyBalancerPlacesMovedUnitsOnTheirStandby(t *testing.T) {
	ranked := 0
	for i := range 20 {
		topic := fmt.Sprintf("in%d", i)
		members := newMembers(2, []string{topic}, nil)
		members[0].owned, members[0].gen = map[string][]int32{topic: {0}}, 1
		members[1].owned, members[1].gen = map[string][]int32{topic: {1}}, 1
		// The third member, which owned partition 2, is gone.
		counts := map[string]int32{topic: 3}
		want := "m00"
		if StandbyRank(topic, 2, "m01") > StandbyRank(topic, 2, "m00") {
			want = "m01"
			ranked++
		}
		got := balanceWith(t, StandbyBalancer(nil), members, counts)
		if !slices.Contains(got[want][topic], 2) {
			t.Fatalf("%s: partition 2 went %v, want to %s (ranked first)", topic, got, want)
		}
		if !slices.Contains(got["m00"][topic], 0) || !slices.Contains(got["m01"][topic], 1) {
			t.Fatalf("%s: the owners lost what they had: %v", topic, got)
		}
		// Balancer gives it to the least loaded, smallest id: m00.
		if plain := balance(t, members, counts); !slices.Contains(plain["m00"][topic], 2) {
			t.Fatalf("%s: Balancer put partition 2 at %v", topic, plain)
		}
	}
	if ranked == 0 {
		t.Fatal("no case where the rank and the default disagree: the test shows nothing")
	}
}
