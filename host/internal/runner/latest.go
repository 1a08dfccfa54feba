package runner

import "github.com/twmb/franz-go/pkg/kgo"

// Outputs that take the latest record per key (ProcessorSpec.Latest; the
// host's `emit: latest_per_key`): a task keeps, per such output and key,
// the last record its successful calls emitted in the commit window, and
// produces them at the window's commit point, in the order their keys
// first came, inside its transaction (exactly_once) or before its flush
// (at_least_once). What Kafka Streams' record cache does to the output of
// an aggregate, without plugin code (a plugin that needs more, such as
// emitting derived values once per window, marks keys: ABI.md 8.2).
//
// They belong to the commit window: an abort or a rollback drops them with
// the rest of its work, and the records processed again emit them again.
// A record with a null key has no key to keep the latest of: it is
// produced as it is emitted.

// keepLatest keeps out, a record a successful call emitted to output, as
// its key's latest of the window if output takes the latest per key, and
// reports whether it did.
func (t *task) keepLatest(output int, out *kgo.Record) bool {
	if t.latest == nil || !t.proc.spec.Latest[output] || out.Key == nil {
		return false
	}
	t.latest[output].Set(out.Key, out)
	return true
}

// produceLatest produces the window's latest records, at its commit point.
func (t *task) produceLatest() {
	produced := 0
	for i := range t.latest {
		w := &t.latest[i]
		for _, rec := range w.Values() {
			t.r.cp.produce(rec)
		}
		produced += w.Len()
		w.Reset()
	}
	if produced > 0 {
		t.proc.Stats.RecordsOut.Add(int64(produced))
	}
}

// dropLatest forgets the window's latest records: the window was aborted
// or rolled back, and its records will be processed again.
func (t *task) dropLatest() {
	for i := range t.latest {
		t.latest[i].Reset()
	}
}
