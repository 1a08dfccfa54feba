package runner

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
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

// A task starting here while its standby's round ends well: activate
// deletes the standby's lag, then cancels the round and waits for it; the
// round, already past its restore, ends after that. It must not record
// its lag again: the task is active here, no standby, and a lag entry
// would show it as a standby stuck at that round (StandbyLags, the
// standby lag metric). A round that ends with its task still a standby
// records its lag.
func TestStandbyRoundEndingAsItsTaskStartsRecordsNoLag(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newStandbys(nil, 1, time.Second, nil)
	id := TaskID{Processor: "counter", Topic: "in", Partition: 3}
	res := []restore.Result{{Progress: restore.Progress{Start: 10, Target: 227}}}

	begin := func() (*standbyRound, *state.Task) {
		h := db.Task("counter", id.Partition, []string{"counts"})
		s.mu.Lock()
		s.handles[id] = h
		cur := &standbyRound{id: id, cancel: func() {}, done: make(chan struct{})}
		s.current = cur
		s.mu.Unlock()
		return cur, h
	}

	// Still a standby when its round ends: the lag is recorded.
	cur, h := begin()
	s.ended(cur, h, time.Now(), res, nil)
	if l, ok := s.Lags()[id]; !ok || l.Behind != 217 {
		t.Fatalf("a round ending with its task a standby: lag %+v, %v; want 217 behind", l, ok)
	}

	// The task starts here while the next round is past its restore.
	cur, h = begin()
	activated := make(chan struct{})
	go func() {
		s.activate(id)
		close(activated)
	}()
	// activate has deleted the lag and waits for the round.
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := s.Lags()[id]; ok {
			return errors.New("activate has not begun")
		}
		return nil
	})
	select {
	case <-activated:
		t.Fatal("activate returned before the round in progress ended")
	default:
	}
	s.ended(cur, h, time.Now(), res, nil)
	<-activated
	if l, ok := s.Lags()[id]; ok {
		t.Fatalf("the task runs here, yet a standby lag was recorded for it: %+v", l)
	}
}
