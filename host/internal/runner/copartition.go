package runner

import "sort"

// A processor with stores and several inputs is co-partitioned: its task p
// reads partition p of every input, with one store set and one commit
// window, so a join or an aggregate over several topics sees every record
// of a key in one place. The inputs have equal partition counts (the host
// checks) and the group's assignor keeps partition p of all of them on one
// member (copartition.Balancer for the classic protocol, the server's
// range assignor for KIP-848). The runner does not rely on that alone: a
// task runs only while this member holds partition p of every input. Until
// then its partitions are held paused, so two members can never run the
// same task's state (as they could, briefly, during a rolling upgrade from
// a version whose assignor did not co-partition).

// Copartitioned reports whether the processor's tasks read every input:
// it has stores and several inputs.
func (s *ProcessorSpec) Copartitioned() bool {
	return len(s.Inputs) > 1 && len(s.Stores) > 0
}

// copartitioned reports whether the processor's tasks read every input.
func (ps *procState) copartitioned() bool { return ps.spec.Copartitioned() }

// taskTopics are the topics a task of the processor whose id names topic
// reads: every input of a co-partitioned processor, topic otherwise.
func (ps *procState) taskTopics(topic string) []string {
	if ps.copartitioned() {
		return ps.spec.Inputs
	}
	return []string{topic}
}

// holdsAll reports whether the member holds partition p of every input of
// a co-partitioned processor (always true for another processor).
func (ps *procState) holdsAll(p int32) bool {
	if !ps.copartitioned() {
		return true
	}
	for _, in := range ps.spec.Inputs {
		if !ps.held[in][p] {
			return false
		}
	}
	return true
}

// inputOf is the index of topic among the task's topics, -1 if it is not
// one of them.
func (t *task) inputOf(topic string) int {
	for i, tp := range t.topics {
		if tp == topic {
			return i
		}
	}
	return -1
}

// hold records newly assigned partitions of co-partitioned processors and
// pauses those whose task is not complete yet: no record of them is fetched
// until the member holds the task's every partition (and its restore has
// run). The caller holds r.mu.
func (r *Runner) hold(assigned map[string][]int32) {
	waiting := map[string][]int32{}
	for topic, parts := range assigned {
		ps := r.byTopic[topic]
		if ps == nil || !ps.copartitioned() {
			continue
		}
		if ps.held[topic] == nil {
			ps.held[topic] = map[int32]bool{}
		}
		for _, p := range parts {
			ps.held[topic][p] = true
		}
	}
	for topic, parts := range assigned {
		ps := r.byTopic[topic]
		if ps == nil || !ps.copartitioned() {
			continue
		}
		for _, p := range parts {
			if !ps.holdsAll(p) {
				waiting[topic] = append(waiting[topic], p)
			}
		}
	}
	if len(waiting) == 0 {
		return
	}
	for _, parts := range waiting {
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	}
	r.cl.PauseFetchPartitions(waiting)
	r.log.Warn("co-partitioned tasks wait for the rest of their partitions; these stay paused", "partitions", waiting)
}

// release forgets partitions that left the member. The caller holds r.mu.
func (r *Runner) release(parts map[string][]int32) {
	for topic, ps := range parts {
		proc := r.byTopic[topic]
		if proc == nil || !proc.copartitioned() {
			continue
		}
		for _, p := range ps {
			delete(proc.held[topic], p)
		}
	}
}
