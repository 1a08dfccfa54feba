package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// A record the broker refuses fails only that record (Kafka Streams'
// production exception handler, inside the transaction).
//
// Emit checks what it can in advance (limits.go). What it cannot know — a
// limit an operator changed since the runner read it, a broker's own reason
// — comes back as a produce error, after the call that staged the record
// ended. Such a refusal is a property of the record (refusalError), so
// retrying the window as it was would be refused again, forever. Instead:
//
//  1. Every produced record carries its origin in its Context: the input
//     record whose call emitted it (or whose failure it dead-letters), or
//     the timer firing or commit call that did.
//  2. The commit point aborts the window (under at_least_once too: the
//     offsets do not move, the outputs already acknowledged are produced
//     again, as after any rewind).
//  3. It reads the limits again: a record they now refuse is caught by
//     Emit on the second pass, as that record's failure.
//  4. The refused records the limits do not explain are probed: produced
//     again, in a transaction of a producer of their own that is always
//     aborted, so nothing of it is ever read committed. A failed produce
//     fails its whole batch, and under a transaction every record buffered
//     after it too, so the first pass cannot tell the record the broker
//     refused from its neighbours; probing halves of the suspects until a
//     probe fails with one record in it can. At most maxProbes probes per
//     abort; a suspect they did not clear or convict is processed as before.
//  5. The convicted origins go into the refused set; on the second pass
//     their calls fail with the broker's error, through the processor's
//     on_error (skip counts it, dead_letter writes it with the error in the
//     headers, fail stops the task naming the record).
//
// A changelog record has no call behind it: it is the last write of a key
// in the window, whoever made it (changelogOrigin). One the limits do not
// explain is probed like an output, and convicted as the write itself: the
// changelog partition, the key and a digest of the plugin's value
// (Refused.entries). On the next pass a call whose writes include exactly
// that write fails the same way (task.refusedWrite). A plugin that writes
// another value on each pass (a clock, a random number) cannot be caught
// by its value: a key refused again before the pass after its conviction
// wrote the value refused fails every write of the key for one window.
//
// So a record costs at most one abort (two for a key whose refused values
// change between passes): the pass after it fails the record before its
// outputs are produced. A limit lowered below the client's batch
// size restarts the runner (the client's batch size is fixed), which reads
// the limits again; the refused set outlives the runner (Options.Refused).

// origin is what staged a produced record. It rides in the record's
// Context, which franz-go hands back to the produce promise untouched; as a
// context it is Background's (no deadline, never done: franz-go cancels
// nothing through it).
type origin struct {
	context.Context
	key originKey
	// deadLetter says the record is the dead letter of key's failure.
	deadLetter bool
	// changelog marks changelogOrigin (key unset).
	changelog bool
}

// changelogOrigin is the origin of every changelog record: the last write
// of a key in the window, whoever made it, so no call to convict. Its
// refusal still aborts the window and reads the limits again, after which
// the store refuses an entry they do not take at the write that makes it
// (setEntryLimits): that call fails on the next pass, and the record
// costs one abort, as an output does. A refusal the limits do not explain
// convicts the write (entryKey) instead.
var changelogOrigin = &origin{Context: context.Background(), changelog: true}

// originKey names a call of a processor across passes: an input record by
// its position, or a callback by its trigger.
type originKey struct {
	processor string
	// An input record (topic set).
	topic     string
	partition int32
	offset    int64
	// A callback (topic empty): the trigger's kind, time and key, and the
	// task's partition.
	trigger abi.TimerKind
	ts      int64
	key     string
}

func (k originKey) String() string {
	if k.topic != "" {
		return fmt.Sprintf("record %s/%d@%d of processor %s", k.topic, k.partition, k.offset, k.processor)
	}
	what := "timer"
	if k.trigger == abi.TriggerCommit {
		what = "commit call"
	}
	return fmt.Sprintf("%s (%s, %d, key %q) of processor %s, partition %d", what, k.trigger, k.ts, k.key, k.processor, k.partition)
}

// recordOrigin is the key of input record kr of processor p.
func recordOrigin(p string, kr *kgo.Record) originKey {
	return originKey{processor: p, topic: kr.Topic, partition: kr.Partition, offset: kr.Offset}
}

// triggerOrigin is the key of a callback of processor p's task on
// partition.
func triggerOrigin(p string, partition int32, trig *abi.Trigger) originKey {
	return originKey{processor: p, partition: partition, offset: -1, trigger: trig.Kind, ts: trig.Timestamp, key: string(trig.Key)}
}

// origins hands out a task's origins from chunks, one per call that
// produced records. A chunk is never reused (records in flight point into
// it), like the emit arena's.
type origins struct{ chunk []origin }

const originChunk = 64

func (o *origins) new(key originKey, deadLetter bool) *origin {
	if len(o.chunk) == 0 {
		o.chunk = make([]origin, originChunk)
	}
	g := &o.chunk[0]
	o.chunk = o.chunk[1:]
	*g = origin{Context: context.Background(), key: key, deadLetter: deadLetter}
	return g
}

// originOf is rec's origin, or nil for a record without one (the probe's
// own).
func originOf(rec *kgo.Record) *origin {
	o, _ := rec.Context.(*origin)
	return o
}

// refusalError reports whether err is the broker's (or the client's)
// refusal of a record for what it is — its size, timestamp or content —
// rather than a failure of the broker, the topic or the producer: the same
// record produced again is refused again.
func refusalError(err error) bool {
	for _, e := range []error{
		kerr.MessageTooLarge,  // over max.message.bytes, or the client's batch size
		kerr.InvalidTimestamp, // outside message.timestamp.after/before.max.ms
		kerr.InvalidRecord,    // a broker-side validation (a compacted topic without a key, a broker's own policy)
		kerr.CorruptMessage,   // the broker could not read it
		kerr.RecordListTooLarge,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// refusal is a produced record the broker refused, and why.
type refusal struct {
	rec *kgo.Record
	o   *origin
	err error
}

// refusals collects the window's refusals from produce promises (franz-go
// goroutines); the commit point takes them.
type refusals struct {
	mu   sync.Mutex
	list []refusal
	// other is set when a produce failed for another reason (or without
	// an origin): the window cannot be mended by failing records.
	other bool
}

// maxRefusals bounds what one window keeps of its refusals: a window can
// produce millions of records, every one of which can fail with the one
// that was refused (a transaction fails everything buffered after it).
const maxRefusals = 4096

func (f *refusals) add(rec *kgo.Record, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := originOf(rec)
	switch {
	case errors.Is(err, kgo.ErrAborting):
		// Failed because the window is being aborted: says nothing.
	case !refusalError(err) || o == nil:
		f.other = true
	case len(f.list) < maxRefusals:
		f.list = append(f.list, refusal{rec: rec, o: o, err: err})
	default:
		// The ones kept are enough to find the refused record when it
		// is among them; otherwise the next pass finds it.
	}
}

// only reports whether every produce failure so far was a refusal.
func (f *refusals) only() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.other && len(f.list) > 0
}

// take returns the refusals and whether every produce failure was one, and
// forgets them.
func (f *refusals) take() (list []refusal, onlyRefusals bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, onlyRefusals = f.list, !f.other && len(f.list) > 0
	f.list, f.other = nil, false
	return list, onlyRefusals
}

// Refused is the set of calls the broker refused something of: on their
// next passes their outputs fail them, and their dead letters are stamped
// anew or not written; and of the state writes whose changelog records it
// refused: a call that makes one again fails. It outlives a runner (Options.Refused): a runner
// restarted to read smaller limits must not redo the aborts that found
// them. A nil *Refused is an empty set that convicts nothing. A call's entry stays until a window that used it commits: a window
// aborted again (for another record) must fail it again. Written by the
// commit point; read by task goroutines while they process.
type Refused struct {
	// n is len(m) + len(entries): the record path reads nothing else
	// while the set is empty.
	n       atomic.Int32
	mu      sync.Mutex
	m       map[originKey]*refusedCall
	entries map[entryKey]*refusedEntry
}

// refusedCall is what the broker refused of one call.
type refusedCall struct {
	// output is the failure of the call when it succeeds: the broker
	// refused a record it produced.
	output error
	// deadLetter is why its dead letter cannot be written: the broker
	// refused it, and not (only) for a timestamp that stamping it anew
	// mends.
	deadLetter error
	// restamp says the broker refused the dead letter's timestamp: it is
	// stamped when written instead (HeaderSourceTime).
	restamp bool
	// used says a call of the open window read the entry.
	used bool
}

// NewRefused returns an empty set.
func NewRefused() *Refused {
	return &Refused{m: map[originKey]*refusedCall{}, entries: map[entryKey]*refusedEntry{}}
}

// maxRefused bounds the set (calls and writes together): a processor whose
// every record the broker refuses must not grow it without end. Past the
// bound an arbitrary entry is dropped (a map has no order), and its call
// costs one more abort.
const maxRefused = 10000

// makeRoom drops an arbitrary entry when the set is full. Under s.mu.
func (s *Refused) makeRoom() {
	if len(s.m)+len(s.entries) < maxRefused {
		return
	}
	for old := range s.m {
		delete(s.m, old)
		return
	}
	for old := range s.entries {
		delete(s.entries, old)
		return
	}
}

// entryKey names a key of a changelog partition: where the broker refused
// the last write of the key in a window.
type entryKey struct {
	topic     string // the changelog
	partition int32
	key       string
}

// valueSum identifies a write's value (the plugin's, without a stamp: see
// state.Task.PluginValue) without keeping it: a refused value can be most
// of a megabyte. 64 bits of maphash: two values of one key that collide,
// in the window after one's refusal, are not a concern.
type valueSum struct {
	h   uint64
	del bool // a tombstone
}

// sumSeed seeds valueSum: the set lives no longer than the process.
var sumSeed = maphash.MakeSeed()

func sumOf(value []byte, del bool) valueSum {
	if del {
		return valueSum{del: true}
	}
	return valueSum{h: maphash.Bytes(sumSeed, value)}
}

// refusedEntry is what the broker refused of one changelog key.
type refusedEntry struct {
	// err is the failure of a call that writes a refused value.
	err error
	// sums are the refused values, at most maxEntrySums.
	sums []valueSum
	// any says every write of the key fails: a value was convicted again
	// before a pass wrote the one convicted before it (the plugin's
	// values differ between passes), or too many were.
	any bool
	// matched says a call failed on the entry since its last
	// conviction: a committed window forgets it then.
	matched bool
}

// maxEntrySums bounds the values one key keeps; past it, every write of
// the key fails.
const maxEntrySums = 8

// convictEntry records the broker's refusal err of the changelog record
// that held v under k: the write of the store named store.
func (s *Refused) convictEntry(k entryKey, store string, v valueSum, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil {
		s.makeRoom()
		e = &refusedEntry{}
		s.entries[k] = e
	} else if !e.matched || len(e.sums) >= maxEntrySums {
		// Refused again, and no pass since wrote what was: the values
		// change between passes.
		e.any = true
	}
	e.matched = false
	e.sums = append(e.sums, v)
	e.err = &KindError{Kind: FailureRefused, Err: &RefusedError{Topic: k.topic, Store: store, Err: err}}
	s.n.Store(int32(len(s.m) + len(s.entries)))
}

// write returns the failure of a call that writes v under k, nil unless
// the broker refused that write (or, under any, that key) on a former
// pass. A match is marked.
func (s *Refused) write(k entryKey, v valueSum) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil || !e.any && !slices.Contains(e.sums, v) {
		return nil
	}
	e.matched = true
	return e.err
}

// hasEntries reports whether any changelog write is in the set (the
// record path's check, without the lock).
func (s *Refused) hasEntries() bool {
	if s == nil || s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries) > 0
}

// convict records the broker's refusal err of a record call k produced:
// its output, or its dead letter (restamped says the dead letter was
// already stamped anew).
func (s *Refused) convict(k originKey, topic string, err error, deadLetter, restamped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[k]
	if c == nil {
		s.makeRoom()
		c = &refusedCall{}
		s.m[k] = c
	}
	switch {
	case !deadLetter:
		c.output = &KindError{Kind: FailureRefused, Err: &RefusedError{Topic: topic, Err: err}}
	case errors.Is(err, kerr.InvalidTimestamp) && !restamped:
		c.restamp = true
	default:
		c.deadLetter = &RefusedError{Topic: topic, Err: err, DeadLetter: true}
	}
	s.n.Store(int32(len(s.m) + len(s.entries)))
}

// get returns k's entry (a copy) and marks it used by the open window.
func (s *Refused) get(k originKey) (refusedCall, bool) {
	if s == nil || s.n.Load() == 0 {
		return refusedCall{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[k]
	if c == nil {
		return refusedCall{}, false
	}
	c.used = true
	return *c, true
}

// committed forgets the entries a committed window used: their calls are
// behind the committed position.
func (s *Refused) committed() {
	if s == nil || s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.m {
		if c.used {
			delete(s.m, k)
		}
	}
	for k, e := range s.entries {
		if e.matched {
			delete(s.entries, k)
		}
	}
	s.n.Store(int32(len(s.m) + len(s.entries)))
}

// Len is how many calls and changelog writes the set holds.
func (s *Refused) Len() int {
	if s == nil {
		return 0
	}
	return int(s.n.Load())
}

// RefusedError is the failure of a call whose output (or state write) the
// broker refused.
type RefusedError struct {
	Topic string
	// Store is set when the refused record was the changelog record of
	// the call's write to that store (Topic is its changelog).
	Store string
	Err   error
	// DeadLetter says the refused record was the call's dead letter: it
	// cannot be dead-lettered, so on_error: dead_letter stops the task.
	DeadLetter bool
}

func (e *RefusedError) Error() string {
	switch {
	case e.DeadLetter:
		return fmt.Sprintf("the broker refused its dead letter to topic %s: %v", e.Topic, e.Err)
	case e.Store != "":
		return fmt.Sprintf("the broker refused the changelog record (topic %s) of its write to store %q: %v", e.Topic, e.Store, e.Err)
	}
	return fmt.Sprintf("the broker refused its output to topic %s: %v", e.Topic, e.Err)
}
func (e *RefusedError) Unwrap() error { return e.Err }

// prober produces records in a transaction that is always aborted and
// reports the refusal, if any. The runner's is a client of its own
// (kafkaProber); tests give others.
type prober interface {
	probe(ctx context.Context, recs []*kgo.Record) (refused error, err error)
	close()
}

// maxProbes bounds the probes one abort makes: a window whose every record
// was refused alongside a few culprits needs about two per culprit and
// halving.
const maxProbes = 32

// probeTimeout bounds all of one abort's probing.
const probeTimeout = 20 * time.Second

// resolveRefusals finds, after an aborted window, which origins' records
// the broker refused for what they are (see the file comment) and adds
// them to the refused set. It reports how many origins it convicted, and a
// topic whose limit shrank below the client's batch size for it (the
// runner must restart), if any.
func (cp *commitPoint) resolveRefusals(ctx context.Context, list []refusal) (convicted int, shrunk *LimitsChangedError) {
	r := cp.r
	byTopic, err := r.readLimits(ctx)
	if err != nil {
		r.log.Warn("reading the topics' limits again after a refused record", "err", err)
	}
	batch := batchSizes(byTopic)
	if err == nil {
		shrunk = batchChange(r.lims.batch, batch)
	}
	// Records the limits now refuse are Emit's, or for changelog records
	// the store's, to fail on the next pass.
	var suspects []suspect
	for _, f := range list {
		lim := r.lims.byTopic[f.rec.Topic]
		if f.o.changelog {
			// Checked as the store checks an entry: the producer's limit
			// applies to a topic the limits do not know too.
			if len(f.rec.Key)+len(f.rec.Value) > lim.maxEntry() {
				continue
			}
			if w, ok := r.changelogWrite(f.rec); ok {
				suspects = append(suspects, suspect{refusal: f, write: w})
			}
			continue
		}
		if _, ok := r.lims.byTopic[f.rec.Topic]; ok && lim.check(f.rec, time.Now().UnixMilli()) != nil {
			continue
		}
		suspects = append(suspects, suspect{refusal: f, call: f.o.key})
	}
	if len(suspects) > 0 {
		convicted = cp.probeSuspects(ctx, suspects, batch)
	}
	return convicted, shrunk
}

// batchChange is the first topic (by name) whose batch size differs
// between was, the client's, and now, or nil.
func batchChange(was, now map[string]int32) *LimitsChangedError {
	var names []string
	for name := range was {
		names = append(names, name)
	}
	for name := range now {
		names = append(names, name)
	}
	slices.Sort(names)
	names = slices.Compact(names) // a topic in both
	wasFn, nowFn := (&limits{batch: was}).batchBytes(), (&limits{batch: now}).batchBytes()
	for _, name := range names {
		if w, n := wasFn(name), nowFn(name); w != n {
			return &LimitsChangedError{Topic: name, Batch: n, Was: w}
		}
	}
	return nil
}

// LimitsChangedError stops a runner whose client makes record batches of
// another size than a topic it produces to now takes (an operator changed
// its max.message.bytes): larger, and the topic refuses batches of records
// it takes one by one; smaller, and the client refuses records the topic
// takes. The client keeps a topic's batch size, so a new runner starts
// with the new one.
type LimitsChangedError struct {
	Topic      string
	Batch, Was int32
}

func (e *LimitsChangedError) Error() string {
	return fmt.Sprintf("topic %s now takes record batches of at most %d bytes, where the runner's client makes them up to %d; restarting the runner with the new limit", e.Topic, e.Batch, e.Was)
}

// suspect is a refused record the limits do not explain, and what would
// be convicted of it: the call that produced it, or for a changelog record
// the write it holds.
type suspect struct {
	refusal
	call  originKey
	write changelogWrite
}

// culprit is what one conviction names: a call (its records are probed
// together) or a changelog write.
type culprit struct {
	call  originKey
	write changelogWrite
}

// changelogWrite is the write a changelog record holds: its key in the
// changelog's partition, and the plugin's value.
type changelogWrite struct {
	entry entryKey
	sum   valueSum
	store string // the store's name, for the error
}

// changelogWrite finds the task store whose changelog record rec is and
// returns the write it holds; false if no task of the runner has it (the
// task was closed since): nothing to convict.
func (r *Runner) changelogWrite(rec *kgo.Record) (changelogWrite, bool) {
	for id, t := range r.tasks {
		if id.Partition != rec.Partition || t.st == nil {
			continue
		}
		for i, topic := range t.proc.spec.Changelogs {
			if topic == rec.Topic && !t.isTable(i) {
				// PluginValue reads the store's fixed configuration:
				// safe while the task's goroutine waits on the commit
				// point.
				v := t.st.PluginValue(i, rec.Value)
				return changelogWrite{
					entry: entryKey{topic: rec.Topic, partition: rec.Partition, key: string(rec.Key)},
					sum:   sumOf(v, rec.Value == nil),
					store: t.proc.spec.Stores[i],
				}, true
			}
		}
	}
	return changelogWrite{}, false
}

// probeSuspects probes suspects by culprit, halving the groups that are
// refused, and convicts the culprits of groups of one.
func (cp *commitPoint) probeSuspects(ctx context.Context, suspects []suspect, batch map[string]int32) int {
	r := cp.r
	byOrigin := map[culprit][]refusal{}
	var keys []culprit
	for _, f := range suspects {
		c := culprit{call: f.call, write: f.write}
		if _, ok := byOrigin[c]; !ok {
			keys = append(keys, c)
		}
		byOrigin[c] = append(byOrigin[c], f.refusal)
	}
	p := r.prober
	if p == nil {
		kp, err := newKafkaProber(r.opts, batch)
		if err != nil {
			r.log.Warn("cannot probe the refused records; their window is processed again as it was", "err", err)
			return 0
		}
		defer kp.close()
		p = kp
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	probes, convicted := 0, 0
	// probe produces group's records; stop is set when probing must end
	// (its budget spent, or the probe failed for another reason).
	probe := func(group []culprit) (refused error, stop bool) {
		if probes >= maxProbes {
			return nil, true
		}
		var recs []*kgo.Record
		for _, k := range group {
			for _, f := range byOrigin[k] {
				recs = append(recs, probeCopy(f.rec))
			}
		}
		probes++
		refused, err := p.probe(pctx, recs)
		if err != nil {
			r.log.Warn("probing refused records failed; the rest are processed again as they were", "err", err)
			return nil, true
		}
		return refused, false
	}
	// find halves group, which holds a refused record, down to the
	// culprits that hold one; probed says refused came from a probe of
	// group itself. A half probed clean leaves the other holding it, which
	// is not probed whole; but a culprit is convicted only by a probe of
	// its records alone, since a set can be refused for what its records
	// are together (a batch over the topic's limit, when the limits could
	// not be read again) rather than for one of them. (Without that last
	// probe the search convicted innocent records, dead-lettering them.)
	var find func(group []culprit, refused error, probed bool) bool
	find = func(group []culprit, refused error, probed bool) bool {
		if len(group) == 1 {
			if !probed {
				alone, stop := probe(group)
				if stop {
					return false
				}
				if alone == nil {
					return true // refused only with others
				}
				refused = alone
			}
			cp.convict(group[0], byOrigin[group[0]][0], refused)
			convicted++
			return true
		}
		left, right := group[:len(group)/2], group[len(group)/2:]
		lerr, stop := probe(left)
		if stop || lerr != nil && !find(left, lerr, true) {
			return false
		}
		if lerr == nil {
			return find(right, refused, false)
		}
		rerr, stop := probe(right)
		if stop {
			return false
		}
		return rerr == nil || find(right, rerr, true)
	}
	if refused, stop := probe(keys); !stop && refused != nil {
		find(keys, refused, true)
	}
	r.log.Info("probed the records the broker refused", "suspects", len(keys), "probes", probes, "refused", convicted)
	return convicted
}

// convict puts a culprit into the refused set: its call, or a call that
// makes its write again, fails with err on its next pass.
func (cp *commitPoint) convict(c culprit, f refusal, err error) {
	r := cp.r
	if f.o.changelog {
		w := c.write
		r.refused.convictEntry(w.entry, w.store, w.sum, err)
		r.log.Warn("the broker refuses the changelog record of a state write; a call that makes the write again fails on its next pass",
			"topic", w.entry.topic, "partition", w.entry.partition, "store", w.store, "key_bytes", len(w.entry.key), "err", err)
		return
	}
	k := c.call
	restamped := slices.ContainsFunc(f.rec.Headers, func(h kgo.RecordHeader) bool { return h.Key == HeaderSourceTime })
	r.refused.convict(k, f.rec.Topic, err, f.o.deadLetter, restamped)
	r.log.Warn("the broker refuses what a call produced; it fails on its next pass", "call", k.String(), "topic", f.rec.Topic, "err", err)
}

// probeCopy is the part of rec a probe produces: the same partition,
// key, value, headers and timestamp.
func probeCopy(rec *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
		Headers: rec.Headers, Timestamp: rec.Timestamp}
}

// kafkaProber probes with a transactional producer of its own (the
// runner's transactional id plus "-probe"; under at_least_once the app
// id's), one transaction per probe, always aborted: its records are never
// read committed. Under at_least_once a read_uncommitted reader downstream
// can see a probe's accepted records, which the window's second pass
// produces again anyway (at-least-once).
type kafkaProber struct {
	opts  Options
	batch limits // the batch sizes of the limits just read
}

func newKafkaProber(opts Options, batch map[string]int32) (*kafkaProber, error) {
	return &kafkaProber{opts: opts, batch: limits{batch: batch}}, nil
}

func (p *kafkaProber) close() {}

func (p *kafkaProber) probe(ctx context.Context, recs []*kgo.Record) (error, error) {
	id := p.opts.TransactionalID
	if id == "" {
		id = p.opts.AppID
	}
	// A client per probe: a refusal inside a transaction fails the
	// producer id, which leaves the client unusable for the next one.
	cl, err := p.opts.Kafka.NewClient(
		kgo.TransactionalID(id+"-probe"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytesFn(p.batch.batchBytes()),
		kgo.RecordRetries(3),
	)
	if err != nil {
		return nil, fmt.Errorf("probe client: %w", err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("probe transaction: %w", err)
	}
	var (
		mu      sync.Mutex
		refused error
		other   error
	)
	for _, rec := range recs {
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
			case refusalError(err) && refused == nil:
				refused = err
			case !refusalError(err) && other == nil:
				other = err
			}
		})
	}
	ferr := cl.Flush(ctx)
	_ = cl.EndTransaction(ctx, kgo.TryAbort) // a failed transaction cannot end otherwise; nothing of it is kept
	mu.Lock()
	defer mu.Unlock()
	switch {
	case refused != nil:
		return refused, nil
	case other != nil:
		return nil, fmt.Errorf("probe produce: %w", other)
	case ferr != nil:
		return nil, fmt.Errorf("probe flush: %w", ferr)
	}
	return nil, nil
}

// failRefusedCall is the check a call makes before its outputs are
// produced and its writes join the window: the error it fails with when
// the broker refused what it produced on a former pass, or a changelog
// record holding one of its writes, or nil. A call that failed by itself
// produced and wrote nothing: its dead letter is produceDeadLetter's.
func (t *task) failRefusedCall(k originKey, failed bool) error {
	c, ok := t.r.refused.get(k)
	if failed {
		return nil
	}
	if ok && c.output != nil {
		return c.output
	}
	return t.refusedWrite()
}

// refusedWrite is the failure of the call in progress if one of its state
// writes is one whose changelog record the broker refused on a former pass
// (Refused.write), or nil. Free while no write is in the set.
func (t *task) refusedWrite() error {
	if t.st == nil || !t.r.refused.hasEntries() {
		return nil
	}
	var err error
	t.st.RecordWrites(func(store int, key, stored []byte, del bool) bool {
		if t.isTable(store) {
			return true // a task table's topic is not its changelog
		}
		k := entryKey{topic: t.proc.spec.Changelogs[store], partition: t.id.Partition, key: string(key)}
		err = t.r.refused.write(k, sumOf(t.st.PluginValue(store, stored), del))
		return err == nil
	})
	return err
}
