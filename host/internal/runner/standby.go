package runner

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/copartition"
	"github.com/wasmstream/wasmstream/host/internal/restore"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Standby replicas (Options.StandbyReplicas): a member keeps
// warm copies of stateful tasks other members run, so that when one of
// those tasks moves here its restore reads only the changelog's tail.
//
// A standby is the restore of an ordinary task that never starts: its
// store is applied from the changelog read_committed, in batches written
// atomically with their checkpoint (restore's invariant), so a standby's
// checkpoint is never ahead of its data and a task that starts on it
// restores from that checkpoint like any other. Rounds: every
// StandbyInterval the member describes its group, works out which tasks it
// should keep (placement below), and brings each up to the changelog's end
// as it was when the round reached it, one task at a time on one
// goroutine, while no restore of an active task runs here (those come
// first). The copies live in the member's state databases like active
// stores: disk costs a copy of each store kept, memory only the one
// restore client of the round in progress.
//
// Placement: for each stateful task, the members of the group other than
// its owner are ranked by copartition.StandbyRank (rendezvous hashing on
// the task's first input topic in byte order, its partition and the
// member id), and the first StandbyReplicas keep it. Every member computes
// the same ranking from the same description, without talking to the
// others; a member joining or leaving moves only the standbys it ranks
// first for. A standby is never on the task's own member. Under the
// classic protocol the group's balancer (copartition.StandbyBalancer)
// gives a task whose owner left to the member ranked first with room for
// it: where its first copy is. Under KIP-848 the broker assigns, knowing
// nothing of the copies. RATIONALE.md says what this costs.
//
// Processors with task tables keep no standbys: their table stores are
// restored only up to the group's committed offset of their source topic,
// which only the owner knows when it starts.
type standbys struct {
	r        *Runner
	replicas int
	interval time.Duration
	restorer *restore.Restorer // its own: a standby's progress is no restore's

	// mu guards active, handles, lag and current (docs/locks.md).
	mu sync.Mutex
	// active are the tasks running on this member: never a standby.
	active map[TaskID]bool
	// handles are the state handles of the standbys kept here.
	handles map[TaskID]*state.Task
	// lag is each standby's latest round: when it began and how many
	// changelog records it was behind then (the standby lag metric).
	lag map[TaskID]StandbyLag
	// current is the round in progress, if any.
	current *standbyRound
}

// standbyRound is one standby's catch-up in progress.
type standbyRound struct {
	id     TaskID
	cancel context.CancelFunc
	done   chan struct{}
}

func newStandbys(r *Runner, replicas int, interval time.Duration, restorer *restore.Restorer) *standbys {
	if interval <= 0 {
		interval = DefaultStandbyInterval
	}
	return &standbys{r: r, replicas: replicas, interval: interval, restorer: restorer,
		active: map[TaskID]bool{}, handles: map[TaskID]*state.Task{}, lag: map[TaskID]StandbyLag{}}
}

// DefaultStandbyInterval is how often a member brings its standbys up to
// date: what a standby can be behind, in time, besides its round's length.
const DefaultStandbyInterval = time.Second

// activate says a task starts on this member: its standby, if it has one,
// stops (the round in progress on it is canceled and waited for: its last
// batch is in, with its checkpoint) and its handle is closed, before the
// task opens its own. Called under Runner.mu; the standby goroutine never
// takes it.
func (s *standbys) activate(id TaskID) {
	s.mu.Lock()
	s.active[id] = true
	cur := s.current
	h := s.handles[id]
	delete(s.handles, id)
	delete(s.lag, id)
	s.mu.Unlock()
	if cur != nil && cur.id == id {
		cur.cancel()
		<-cur.done
	}
	if h != nil {
		_ = h.Close()
	}
}

// deactivate says a task left this member: it may be a standby here from
// the next round (its store is as fresh as it gets).
func (s *standbys) deactivate(id TaskID) {
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
}

// Lags returns the standbys this member keeps and their latest rounds.
func (s *standbys) Lags() map[TaskID]StandbyLag {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.lag)
}

// run keeps the standbys until ctx ends, then closes their handles.
func (s *standbys) run(ctx context.Context) {
	defer s.closeAll()
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		if s.r.progress.active() == 0 {
			want, err := s.plan(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.r.log.Debug("standby: describing the group", "err", err)
				}
			} else {
				s.keep(ctx, want)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keep makes the standbys this member keeps those of want, and brings each
// up to date.
func (s *standbys) keep(ctx context.Context, want []TaskID) {
	s.mu.Lock()
	for id, h := range s.handles {
		if !slices.Contains(want, id) {
			_ = h.Close() // its data stays on disk, with its checkpoint
			delete(s.handles, id)
			delete(s.lag, id)
		}
	}
	s.mu.Unlock()
	for _, id := range want {
		if ctx.Err() != nil || s.r.progress.active() > 0 {
			return
		}
		s.round(ctx, id)
	}
}

// round brings one standby up to its changelogs' end.
func (s *standbys) round(ctx context.Context, id TaskID) {
	ps := s.r.procByName(id.Processor)
	if ps == nil || s.restorer == nil {
		return
	}
	s.mu.Lock()
	if s.active[id] {
		s.mu.Unlock()
		return
	}
	h := s.handles[id]
	if h == nil {
		db := ps.spec.State
		if db == nil {
			db = s.r.opts.State
		}
		h = db.Task(ps.spec.Name, id.Partition, ps.spec.Stores)
		h.SetName(id.String() + " (standby)")
		s.handles[id] = h
	}
	rctx, cancel := context.WithCancel(ctx)
	began := time.Now()
	cur := &standbyRound{id: id, cancel: cancel, done: make(chan struct{})}
	s.current = cur
	s.mu.Unlock()

	res, err := s.restorer.RestoreTask(rctx, h, ps.spec.Changelogs, nil, id.Partition)
	cancel()
	s.ended(cur, h, began, res, err)
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		s.r.log.Warn("standby: catching up failed; retrying next round", "task", id.String(), "err", err)
	}
}

// ended closes the round cur, of handle h, begun at began: it records the
// standby's lag if the round ended well and the task is still a standby
// here, then lets activate, which may be waiting for it, go on.
func (s *standbys) ended(cur *standbyRound, h *state.Task, began time.Time, res []restore.Result, err error) {
	s.mu.Lock()
	s.current = nil
	// activate may have taken the task while the round ran (it deleted
	// the lag, then canceled and waited for this round, which can still
	// have ended well): an active task is no standby and has no lag.
	if err == nil && !s.active[cur.id] && s.handles[cur.id] == h {
		var behind int64
		for _, r := range res {
			behind += max(r.Target-r.Start, 0)
		}
		s.lag[cur.id] = StandbyLag{Behind: behind, Round: began}
	}
	s.mu.Unlock()
	close(cur.done)
}

func (s *standbys) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, h := range s.handles {
		_ = h.Close()
		delete(s.handles, id)
	}
	s.lag = map[TaskID]StandbyLag{}
}

// plan returns the standbys this member should keep now, in a stable
// order: the stateful tasks the group's members run, ranked as the type's
// comment says.
func (s *standbys) plan(ctx context.Context) ([]TaskID, error) {
	me, _ := s.r.cl.GroupMetadata()
	if me == "" {
		return nil, nil // not in the group yet
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.r.cl)
	owners := map[topicPartition]string{}
	subscribed := map[string][]string{} // member -> the topics it consumes
	if s.r.protocol == ProtocolConsumer {
		// KIP-848's describe names a member's assigned topics by id (the
		// broker may leave their names out): the inputs' ids name them.
		var inputs []string
		for _, ps := range s.r.procs {
			inputs = append(inputs, ps.spec.Inputs...)
		}
		details, err := adm.ListTopics(dctx, inputs...)
		if err != nil {
			return nil, err
		}
		names := map[[16]byte]string{}
		for _, d := range details {
			names[d.ID] = d.Topic
		}
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{s.r.opts.AppID}
		resp, err := req.RequestWith(dctx, s.r.cl)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				return nil, err
			}
			for _, m := range g.Members {
				subscribed[m.MemberID] = m.SubscribedTopics
				for _, tp := range m.Assignment.TopicPartitions {
					topic := tp.Topic
					if topic == "" {
						topic = names[tp.TopicID]
					}
					for _, p := range tp.Partitions {
						owners[topicPartition{topic, p}] = m.MemberID
					}
				}
			}
		}
	} else {
		gs, err := adm.DescribeGroups(dctx, s.r.opts.AppID)
		if err != nil {
			return nil, err
		}
		g, ok := gs[s.r.opts.AppID]
		if !ok || g.Err != nil {
			return nil, errors.Join(errors.New("the group is not described"), g.Err)
		}
		for _, m := range g.Members {
			if j, ok := m.Join.AsConsumer(); ok {
				subscribed[m.MemberID] = j.Topics
			}
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					for _, p := range t.Partitions {
						owners[topicPartition{t.Topic, p}] = m.MemberID
					}
				}
			}
		}
	}
	return standbyPlan(s.r.procs, owners, subscribed, me, s.replicas), nil
}

type topicPartition struct {
	topic     string
	partition int32
}

// standbyPlan is plan's choice, given who owns which input partition and
// what each member consumes: for every stateful task (partition p of a
// stateful processor's first input, owned by some member), the replicas
// members that consume that input (members of other processors share the
// group under members: per_processor) other than its owner, ranked first
// by hash(task, member); the tasks me is among them for, sorted.
func standbyPlan(procs []*procState, owners map[topicPartition]string, subscribed map[string][]string, me string, replicas int) []TaskID {
	var out []TaskID
	for _, ps := range procs {
		if len(ps.spec.Stores) == 0 || len(ps.tableStore) > 0 {
			continue
		}
		in := ps.spec.Inputs[0]
		for tp, owner := range owners {
			if tp.topic != in || owner == me {
				continue
			}
			id := TaskID{Processor: ps.spec.Name, Topic: in, Partition: tp.partition}
			var others []string
			for m, topics := range subscribed {
				if m != owner && slices.Contains(topics, in) {
					others = append(others, m)
				}
			}
			key := slices.Min(ps.spec.Inputs) // the balancer's name for the unit
			slices.SortFunc(others, func(a, b string) int {
				ha, hb := copartition.StandbyRank(key, tp.partition, a), copartition.StandbyRank(key, tp.partition, b)
				switch {
				case ha > hb:
					return -1
				case ha < hb:
					return 1
				}
				return cmp.Compare(a, b)
			})
			if i := slices.Index(others, me); i >= 0 && i < replicas {
				out = append(out, id)
			}
		}
	}
	slices.SortFunc(out, func(a, b TaskID) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// procByName returns the processor called name, or nil.
func (r *Runner) procByName(name string) *procState {
	for _, ps := range r.procs {
		if ps.spec.Name == name {
			return ps
		}
	}
	return nil
}

// StandbyLag is a standby's latest catch-up round: when it began, and how
// many changelog records the standby was behind then (the round brought it
// up to where the changelog ended when it began).
type StandbyLag struct {
	Behind int64
	Round  time.Time
}

// StandbyLags returns the standbys this member keeps (standby.go) and
// their latest rounds; nil without standbys. Safe for concurrent use.
func (r *Runner) StandbyLags() map[TaskID]StandbyLag {
	if r.standby == nil {
		return nil
	}
	return r.standby.Lags()
}
