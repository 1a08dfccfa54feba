package copartition_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/host/internal/copartition"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// stableWait bounds the wait for a group to settle after a member joins or
// leaves. With 100 ms heartbeats a cooperative rebalance's two rounds take
// well under a second on kfake.
const stableWait = 30 * time.Second

// owners is what each client of the test owns, by its assign and revoke
// callbacks, and every violation a callback saw. KIP-429 has a member
// revoke (its callback runs) before it rejoins, and a partition moves only
// in the rebalance after that, so a partition given to one client is never
// still held by another.
type owners struct {
	mu       sync.Mutex
	owned    map[string]map[string][]int32 // client => topic => partitions
	problems []string
}

func (o *owners) assigned(client string, got map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range got {
		for _, p := range parts {
			for other, has := range o.owned {
				if other != client && slices.Contains(has[topic], p) {
					o.problems = append(o.problems, fmt.Sprintf("%s-%d assigned to %s while %s owns it", topic, p, client, other))
				}
			}
			o.owned[client][topic] = append(o.owned[client][topic], p)
		}
	}
	o.checkCopartitioned(client)
}

func (o *owners) revoked(client string, lost map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range lost {
		o.owned[client][topic] = slices.DeleteFunc(o.owned[client][topic], func(p int32) bool { return slices.Contains(parts, p) })
	}
	o.checkCopartitioned(client)
}

// checkCopartitioned: the test's two topics are one group, so after every
// callback a client owns partition p of both or of neither.
func (o *owners) checkCopartitioned(client string) {
	var per [][]int32
	for _, parts := range o.owned[client] {
		per = append(per, slices.Sorted(slices.Values(parts)))
	}
	for len(per) < 2 {
		per = append(per, nil)
	}
	if !slices.Equal(per[0], per[1]) {
		o.problems = append(o.problems, fmt.Sprintf("%s owns %v: not co-partitioned", client, o.owned[client]))
	}
}

// stable reports whether the live clients own every one of the partitions
// once, each holding floor or ceil of the units; else why not.
func (o *owners) stable(live []string, partitions int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	count := map[string]int{}
	var units []int
	for _, c := range live {
		n := 0
		for topic, parts := range o.owned[c] {
			for _, p := range parts {
				count[fmt.Sprint(topic, p)]++
				n++
			}
		}
		units = append(units, n/2)
	}
	if len(count) != 2*partitions {
		return fmt.Sprintf("%d of %d partitions owned", len(count), 2*partitions)
	}
	for tp, n := range count {
		if n != 1 {
			return fmt.Sprintf("%s owned %d times", tp, n)
		}
	}
	lo, hi := partitions/len(live), (partitions+len(live)-1)/len(live)
	for i, n := range units {
		if n < lo || n > hi {
			return fmt.Sprintf("%s holds %d units, want %d to %d", live[i], n, lo, hi)
		}
	}
	return ""
}

// Clients with the balancer join and leave one group consuming two
// co-partitioned topics, through the classic protocol: at every stable
// point all partitions are owned once, whole units per client, balanced;
// at no point does a client own a partition another one owns, or half a
// unit.
func TestGroupOfClients(t *testing.T) {
	const partitions = 6
	b := testbroker.New(t)
	ta, tb := b.Name(t, "a"), b.Name(t, "b")
	b.CreateTopic(t, ta, partitions, nil)
	b.CreateTopic(t, tb, partitions, nil)
	group := b.Name(t, "g")

	o := &owners{owned: map[string]map[string][]int32{}}
	clients := map[string]*kgo.Client{}
	var polls sync.WaitGroup
	start := func(name string) {
		o.mu.Lock()
		o.owned[name] = map[string][]int32{}
		o.mu.Unlock()
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.Addrs()...),
			kgo.ClientID(name),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(ta, tb),
			kgo.Balancers(copartition.Balancer([][]string{{ta, tb}})),
			kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.assigned(name, m) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.revoked(name, m) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.revoked(name, m) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = cl
		polls.Add(1)
		go func() {
			defer polls.Done()
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}
	stop := func(name string) {
		clients[name].Close() // leaves the group; the revoke callback runs first
		delete(clients, name)
	}
	t.Cleanup(func() {
		for name := range clients {
			stop(name)
		}
		polls.Wait()
	})
	waitStable := func(step string) {
		t.Helper()
		live := slices.Sorted(maps.Keys(clients))
		testutil.Eventually(t, stableWait, func() error {
			if why := o.stable(live, partitions); why != "" {
				return fmt.Errorf("%s: not stable: %s", step, why)
			}
			return nil
		})
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.problems) > 0 {
			t.Fatalf("%s:\n%s", step, strings.Join(o.problems, "\n"))
		}
		var held []string
		for _, c := range live {
			held = append(held, fmt.Sprint(c, o.owned[c][ta]))
		}
		t.Logf("%s: stable, partitions of both topics: %s", step, strings.Join(held, " "))
	}

	for _, step := range []struct{ join, leave string }{
		{join: "c1"}, {join: "c2"}, {join: "c3"},
		{leave: "c2"}, {join: "c4"}, {leave: "c1"}, {join: "c5"},
	} {
		if step.join != "" {
			start(step.join)
			waitStable("join " + step.join)
		} else {
			stop(step.leave)
			waitStable("leave " + step.leave)
		}
	}

	// The group runs the classic protocol with this balancer.
	ctx, cancel := context.WithTimeout(context.Background(), stableWait)
	defer cancel()
	described, err := kadm.NewClient(clients["c3"]).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if g := described[group]; g.Protocol != copartition.ProtocolName || g.ProtocolType != "consumer" {
		t.Errorf("group protocol %q of type %q (err %v)", g.Protocol, g.ProtocolType, g.Err)
	}
}
