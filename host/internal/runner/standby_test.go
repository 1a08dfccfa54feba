package runner

import (
	"fmt"
	"testing"
)

// Standby placement: every stateful task of a member's processors gets
// its replicas on members that consume its input, never on its owner,
// each member keeping about as many as the others; the same description
// gives every member the same plan, and members of other processors keep
// none.
func TestStandbyPlacement(t *testing.T) {
	procs := []*procState{
		{spec: ProcessorSpec{Name: "counter", Inputs: []string{"in"}, Stores: []string{"s"}}},
		{spec: ProcessorSpec{Name: "stateless", Inputs: []string{"raw"}}},
		{spec: ProcessorSpec{Name: "tabled", Inputs: []string{"orders"}, Stores: []string{"t"}}, tableStore: map[string]int{"customers": 0}},
	}
	const partitions, members = 24, 4
	for _, replicas := range []int{1, 2, 3, 5} {
		subscribed := map[string][]string{"other-proc-member": {"raw"}}
		owners := map[topicPartition]string{}
		var ids []string
		for m := range members {
			id := fmt.Sprintf("m%d", m)
			ids = append(ids, id)
			subscribed[id] = []string{"in", "raw", "orders"}
		}
		for p := range int32(partitions) {
			owners[topicPartition{"in", p}] = ids[int(p)%members]
			owners[topicPartition{"raw", p}] = "other-proc-member"
			owners[topicPartition{"orders", p}] = ids[int(p)%members]
		}
		holders := map[TaskID][]string{}
		perMember := map[string]int{}
		for _, me := range append(ids, "other-proc-member") {
			plan := standbyPlan(procs, owners, subscribed, me, replicas)
			if again := standbyPlan(procs, owners, subscribed, me, replicas); fmt.Sprint(again) != fmt.Sprint(plan) {
				t.Fatalf("the plan of %s changed between two calls: %v, %v", me, plan, again)
			}
			for _, id := range plan {
				if id.Processor != "counter" {
					t.Fatalf("%s keeps a standby of %s: only stateful processors without task tables have them", me, id)
				}
				if owners[topicPartition{"in", id.Partition}] == me {
					t.Fatalf("%s keeps a standby of its own task %s", me, id)
				}
				holders[id] = append(holders[id], me)
				perMember[me]++
			}
		}
		want := min(replicas, members-1)
		for p := range int32(partitions) {
			id := TaskID{Processor: "counter", Topic: "in", Partition: p}
			if len(holders[id]) != want {
				t.Fatalf("replicas %d: task %s has standbys on %v, want %d", replicas, id, holders[id], want)
			}
		}
		// Even enough: rendezvous hashing over 24 tasks, every member
		// within half of the mean.
		mean := float64(partitions*want) / members
		for _, m := range ids {
			if n := float64(perMember[m]); n < mean/2 || n > mean*1.5 {
				t.Errorf("replicas %d: %s keeps %v standbys, mean %.1f: %v", replicas, m, n, mean, perMember)
			}
		}
		if perMember["other-proc-member"] != 0 {
			t.Errorf("a member of another processor keeps %d standbys", perMember["other-proc-member"])
		}
	}
}
