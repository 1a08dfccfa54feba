// Package copartition is a consumer group balancer for franz-go's classic
// group protocol (JoinGroup/SyncGroup) that keeps co-partitioned topics
// together: partition p of every input of one processor goes to one member,
// so a task that joins or aggregates across those inputs sees all of its
// keys in one process.
//
// A co-partition group is a set of topics with equal partition counts (the
// inputs of one processor); the unit (G, p) is partition p of every topic of
// group G. A topic in no group is a group of its own. Every member declares
// its processors' groups in the UserData of its JoinGroup metadata (see
// userdata.go); the leader merges the declarations of all members, so groups
// that share a topic become one.
//
// The balancer is cooperative (KIP-429): members keep consuming what they
// keep, and a unit that moves is first revoked by its old owner and
// assigned in the rebalance that follows. It is sticky: a unit stays with
// its owner while the owner is subscribed to the unit's topics and within
// its quota. And it is balanced per group: each member subscribed to every
// topic of a group holds floor(U/M) or ceil(U/M) of its U units.
//
// The balancer runs only on the classic protocol: under KIP-848 the broker
// assigns, and it knows no co-partition groups.
package copartition

import (
	"hash/fnv"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProtocolName is the balancer's name in JoinGroup. The suffix changes when
// two versions of the balancer could not share a group: every member of a
// group must agree on it, or the broker refuses the member that does not.
const ProtocolName = "wasmstream-copartition-v1"

// Balancer returns the balancer for a member whose processors read the
// given co-partition groups, each a list of topic names. Groups of one topic
// may be given and mean nothing; order and duplicates do not matter. The
// groups must pass Validate: Balancer panics otherwise (the host validates
// its configuration before it builds a client).
func Balancer(groups [][]string) kgo.GroupBalancer {
	return newBalancer(groups, false)
}

// StandbyBalancer is Balancer for an app whose tasks have standby
// replicas (the runner's standby.go): a unit that needs a new owner goes,
// among the members with room for it, to the one ranked first for it by
// StandbyRank, which is where the runner keeps its first standby; a task
// whose owner left then starts on a warm copy. Every other rule is
// Balancer's.
func StandbyBalancer(groups [][]string) kgo.GroupBalancer {
	return newBalancer(groups, true)
}

func newBalancer(groups [][]string, standbys bool) kgo.GroupBalancer {
	groups = normalize(groups)
	if err := validate(groups); err != nil {
		panic(err)
	}
	return &balancer{userData: encodeGroups(groups), standbys: standbys}
}

// StandbyRank is member's rendezvous score for unit (topic, partition),
// topic being the first, in byte order, of the unit's co-partitioned
// topics: the runner keeps a task's standbys on the members that score
// highest for it (its owner aside), and StandbyBalancer gives a unit that
// needs an owner to the highest scoring member with room.
func StandbyRank(topic string, partition int32, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0, byte(partition >> 24), byte(partition >> 16), byte(partition >> 8), byte(partition), 0})
	h.Write([]byte(member))
	// FNV-1a alone barely moves its high bits with the last bytes (member
	// ids that differ at their end would rank the same for every unit):
	// splitmix64's finalizer spreads every input bit over the result.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Validate reports whether groups fit the limits of the UserData encoding
// (at most 1024 groups of at most 1024 topics, topic names of 1 to 249
// bytes, 1 MiB in all), the same limits the leader applies when it decodes
// another member's declaration.
func Validate(groups [][]string) error {
	return validate(normalize(groups))
}

// balancer is immutable after Balancer: kgo calls it from the group
// management goroutine and from the leader's balance.
type balancer struct {
	userData []byte // this member's groups, encoded once
	standbys bool   // place new owners where the standbys are (StandbyBalancer)
}

func (*balancer) ProtocolName() string { return ProtocolName }

func (*balancer) IsCooperative() bool { return true }

// JoinGroupMetadata is what franz-go's cooperative-sticky balancer sends
// (ConsumerMemberMetadata v3: the partitions this member owns and the
// generation it owned them in, which the leader needs for stickiness and
// for KIP-429's revoke-before-reassign), with the groups in UserData.
func (b *balancer) JoinGroupMetadata(interests []string, currentAssignment map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	meta.UserData = b.userData
	for topic, partitions := range currentAssignment {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = topic
		owned.Partitions = partitions
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	// The broker compares metadata to decide whether a rejoin changes
	// anything; a map's order would make equal metadata differ.
	sort.Slice(meta.OwnedPartitions, func(i, j int) bool {
		return meta.OwnedPartitions[i].Topic < meta.OwnedPartitions[j].Topic
	})
	return meta.AppendTo(nil)
}

func (*balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	return cb, cb.MemberTopics(), err
}

// Balance implements kgo.ConsumerBalancerBalance: it plans the target
// assignment (plan.go), then withholds every partition that would move
// straight from one member to another, which the members' revoke and
// rejoin then free for the next round.
func (b *balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := cb.NewPlan()
	p := newPlanner(cb, topics)
	p.standbys = b.standbys
	p.assign(plan)
	plan.AdjustCooperative(cb)
	return plan
}
