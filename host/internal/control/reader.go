package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// maxUnreferenced bounds how many contents a reader keeps the bytes of
// without a manifest referencing them: chunks read since the latest
// manifest record, which belong to deploys in flight (a manifest follows
// its chunks). Older ones are deploys that died before their manifest, or,
// in a compacted topic read from its start, versions whose manifests
// compaction removed; their bytes are dropped (the least recently written
// first), as every manifest record drops them all.
const maxUnreferenced = 4

// maxUnreferencedKnown bounds how many unreferenced contents a reader
// remembers where the chunks are, bytes dropped: a compacted topic read
// from its start shows every version's chunks before the one manifest
// that references the latest of them, and those in its history are read
// again when needed. Beyond it the oldest are forgotten.
const maxUnreferencedKnown = 64

// Config says where the control topic is.
type Config struct {
	// Kafka is what the client starts from (brokers, client id, logger,
	// security); Kafka.Brokers is required. The options that decide how
	// the topic is read and written (partitions, offsets, isolation, acks,
	// partitioner) come after and win.
	Kafka kclient.Config
	// Topic is the control topic, TopicName(app_id). Required.
	Topic string
}

// Reader reads the control topic from its start: Load to its current end,
// then Follow to tail it. It consumes the single partition with explicit
// offsets (no consumer group), read_committed. Load and Follow must not run
// at the same time on one Reader (the second returns an error).
//
// A Reader keeps in memory the latest manifest of every processor, the
// bytes of the chunks read since the latest manifest record (a deploy in
// flight, at most maxUnreferenced contents, handed to Follow's callback
// with their manifest), and, for every version, where its chunks are in
// the topic and whether they were complete and matched its hash: other
// bytes are read again from the topic when asked for (a process starting,
// a rollback, a deploy of old bytes). So what it holds does not grow with
// the versions deployed, and between deploys it holds no module.
type Reader struct {
	topic string
	cl    *kgo.Client
	adm   *kadm.Client
	busy  atomic.Bool
	st    store
}

// NewReader returns a Reader positioned at the start of the topic; Close it
// when done.
func NewReader(cfg Config) (*Reader, error) { return newReader(cfg, nil) }

// newReader builds the Reader's client with extra options after the
// reading ones (the Publisher adds its producing options).
func newReader(cfg Config, extra []kgo.Opt) (*Reader, error) {
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("control: no brokers configured")
	}
	if cfg.Topic == "" {
		return nil, errors.New("control: no topic configured")
	}
	opts := cfg.Kafka.Opts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtStart()}}),
		// Never jump by itself: an out-of-range position (topic deleted
		// and recreated, records deleted below us) is an error to report,
		// not a reason to skip or replay manifests.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers of other writers move the position too, so
		// a log that ends with one is read to its end.
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(4<<20),
		kgo.FetchMaxBytes(8<<20),
	)
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("control topic %s: client: %w", cfg.Topic, err)
	}
	r := &Reader{topic: cfg.Topic, cl: cl, adm: kadm.NewClient(cl), st: newStore(cfg.Topic)}
	r.st.fetch = func(ctx context.Context, hash string, offsets map[int]int64) (map[int][]byte, error) {
		return fetchChunks(ctx, cfg, hash, offsets)
	}
	return r, nil
}

// Close closes the Reader's client.
func (r *Reader) Close() { r.cl.Close() }

// Load reads the topic up to its end as listed when the call starts (the
// last stable offset, which is the high watermark unless another writer has
// a transaction open) and returns the state there: records read beyond it in
// the same fetch are included. The first call reads from the start of the
// topic; later calls continue where the last Load or Follow stopped. An
// empty topic returns at once. ctx bounds the call; a topic that does not
// exist is an error (EnsureTopic creates it).
//
// The State is a snapshot: later calls do not change it.
func (r *Reader) Load(ctx context.Context) (*State, error) {
	if !r.busy.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("control topic %s: Load while a Load or Follow runs on the same Reader", r.topic)
	}
	defer r.busy.Store(false)
	if err := r.catchUp(ctx); err != nil {
		return nil, err
	}
	return r.st.snapshot(), nil
}

// Load returns the bytes of a version: reassembled from the chunks a
// Reader holds, or read again from the topic for a version it keeps only
// the place of, and verified against the version's hash and size (an
// error wrapping ErrCorrupt when they are missing or do not match). It may
// be called at any time, on any goroutine, and more than once (each call
// of a version read again reads it again): a caller that has what it needs
// (a version it holds compiled) does not call it at all.
type Load func(ctx context.Context) ([]byte, error)

// Follow tails the topic from where the last Load stopped (from the start
// if Load was never called) until ctx ends, calling fn on this goroutine
// for every manifest record, in topic order:
//
//   - fn(m, load, nil): a manifest that decodes; load returns its
//     version's bytes (see Load), or an error wrapping ErrCorrupt if they
//     are missing or do not match its hash and size.
//   - fn(m, nil, err): with only m.Processor and m.Offset set, a manifest
//     record that does not decode (ErrCorrupt, or ErrFormat for a format
//     this build does not know).
//
// A manifest tombstone (the processor removed from the topic) is not
// reported. fn must return for reading to go on. Follow returns ctx.Err()
// when ctx ends, or an error if the topic cannot be read (deleted,
// truncated below the position, authorization).
func (r *Reader) Follow(ctx context.Context, fn func(m Manifest, load Load, err error)) error {
	return r.FollowAll(ctx, Handlers{Manifest: fn})
}

// Handlers are FollowAll's callbacks, each called on FollowAll's goroutine
// in topic order; a nil one is not called.
type Handlers struct {
	// Manifest is Follow's fn.
	Manifest func(m Manifest, load Load, err error)
	// Pause is told of every pause record (pause.go): the pause it sets,
	// or, with only Processor and Offset set, the error of a record that
	// does not decode (the processor's pause is then left as it was).
	Pause func(Pause, error)
	// Member is told of every member record (member.go): the record, a
	// tombstone (Gone), or, with only Member set, the error of a record
	// that does not decode.
	Member func(Member, error)
	// Shadow is told of every shadow record (shadow.go): the shadow, the
	// loader of its version when it runs, or, with only Processor and
	// Offset set, the error of a record that does not decode.
	Shadow func(Shadow, Load, error)
}

// FollowAll is Follow with a callback for each kind of record.
func (r *Reader) FollowAll(ctx context.Context, h Handlers) error {
	if !r.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("control topic %s: Follow while a Load or Follow runs on the same Reader", r.topic)
	}
	defer r.busy.Store(false)
	fn := h.Manifest
	if fn == nil {
		fn = func(Manifest, Load, error) {}
	}
	r.st.on = h
	defer func() { r.st.on = Handlers{} }()
	for {
		fetches := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := r.fetchErr(ctx, fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			m, load, ok, err := r.st.apply(rec)
			if !ok {
				return
			}
			if err != nil {
				fn(m, nil, err)
				return
			}
			fn(m, func(ctx context.Context) ([]byte, error) {
				b, err := load(ctx)
				if err != nil {
					err = fmt.Errorf("control topic %s: processor %q manifest at offset %d: %w", r.topic, m.Processor, m.Offset, err)
				}
				return b, err
			}, nil)
		})
	}
}

// catchUp reads until the position reaches the end offset listed when it
// starts.
func (r *Reader) catchUp(ctx context.Context) error {
	starts, err := r.adm.ListStartOffsets(ctx, r.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return r.listErr("listing start offset", err)
	}
	ends, err := r.adm.ListCommittedOffsets(ctx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return r.listErr("listing end offset", err)
	}
	start, ok1 := starts.Lookup(r.topic, 0)
	end, ok2 := ends.Lookup(r.topic, 0)
	if !ok1 || !ok2 {
		return fmt.Errorf("control topic %s: partition 0 missing from the listed offsets", r.topic)
	}
	// Below the log start there is nothing to read (compaction in kfake,
	// DeleteRecords): the records the position waits for begin there.
	r.st.pos = max(r.st.pos, start.Offset)
	for r.st.pos < end.Offset {
		fetches := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("control topic %s: read up to offset %d of %d: %w", r.topic, r.st.pos, end.Offset, ctx.Err())
		}
		if err := r.fetchErr(ctx, fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(rec *kgo.Record) { _, _, _, _ = r.st.apply(rec) })
	}
	return nil
}

func (r *Reader) listErr(what string, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("control topic %s does not exist (EnsureTopic creates it): %w", r.topic, err)
	}
	return fmt.Errorf("control topic %s: %s: %w", r.topic, what, err)
}

// fetchErr returns the first error in fetches, with context. Errors kgo
// retries by itself are not returned to us; what comes is final.
func (r *Reader) fetchErr(ctx context.Context, fetches kgo.Fetches) error {
	errs := fetches.Errors()
	if len(errs) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fe := errs[0] // one partition: the first error is the one
	if errors.Is(fe.Err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("control topic %s: offset %d out of range (topic deleted and recreated, or records deleted): %w", r.topic, r.st.pos, fe.Err)
	}
	return fmt.Errorf("control topic %s: reading at offset %d: %w", r.topic, r.st.pos, fe.Err)
}

// store is what a Reader knows of the topic. Only the goroutine running
// Load, Follow or a Publisher call uses it.
type store struct {
	topic     string
	pos       int64                // offset after the last record applied
	manifests map[string]Manifest  // latest decodable manifest per processor
	errs      map[string]error     // processors whose latest manifest record does not decode
	chunks    map[string]*chunkSet // by hash
	refs      map[string]bool      // hashes some manifest references (active or history)
	pauses    map[string]Pause     // latest decodable pause record per processor (pause.go)
	members   map[string]Member    // latest member record per member (member.go)
	shadows   map[string]Shadow    // latest decodable shadow record per processor (shadow.go)
	// on, while FollowAll runs, is told of every pause and member record
	// applied.
	on Handlers
	// fetch reads chunk records again, by offset (fetchChunks).
	fetch func(ctx context.Context, hash string, offsets map[int]int64) (map[int][]byte, error)
}

// chunkSet is what the store knows of one content's chunks.
type chunkSet struct {
	parts map[int]part
	last  int64 // offset of the latest chunk record, for eviction
	// checked is set once the content was reassembled from parts as they
	// are now and verified against checkedAs: verdict nil if it matched,
	// the ErrCorrupt otherwise. A chunk record clears it.
	checked   bool
	checkedAs Version
	verdict   error
}

// part is one chunk record: where it is in the topic and, while the store
// keeps the content's bytes, its value.
type part struct {
	offset int64
	data   []byte // nil once dropped
}

// held reports whether the set has the bytes of every chunk of v.
func (cs *chunkSet) held(v Version) bool {
	for i := 0; i < v.Chunks; i++ {
		if p, ok := cs.parts[i]; !ok || p.data == nil {
			return false
		}
	}
	return true
}

// dropBytes forgets the chunks' values, keeping where they are.
func (cs *chunkSet) dropBytes() {
	for i, p := range cs.parts {
		p.data = nil
		cs.parts[i] = p
	}
}

func newStore(topic string) store {
	return store{
		topic:     topic,
		manifests: map[string]Manifest{},
		errs:      map[string]error{},
		chunks:    map[string]*chunkSet{},
		refs:      map[string]bool{},
		pauses:    map[string]Pause{},
		members:   map[string]Member{},
		shadows:   map[string]Shadow{},
	}
}

// apply takes one record. For a manifest record (not a tombstone) it
// returns ok and the manifest with the loader of its version (made before
// the record drops the bytes held: a deploy's chunks, just read, are
// handed over), or, for one that does not decode, a Manifest with only
// Processor and Offset set and the error.
func (s *store) apply(rec *kgo.Record) (m Manifest, load Load, ok bool, err error) {
	s.pos = rec.Offset + 1
	if rec.Attrs.IsControl() {
		return Manifest{}, nil, false, nil
	}
	key := string(rec.Key)
	if hash, index, isChunk := parseChunkKey(key); isChunk {
		s.applyChunk(hash, index, rec)
		return Manifest{}, nil, false, nil
	}
	if name, isPause := pauseName(key); isPause {
		p, err := s.applyPause(name, rec)
		if s.on.Pause != nil {
			s.on.Pause(p, err)
		}
		return Manifest{}, nil, false, nil
	}
	if name, isShadow := shadowName(key); isShadow {
		sh, load, err := s.applyShadow(name, rec)
		if s.on.Shadow != nil {
			s.on.Shadow(sh, load, err)
		}
		return Manifest{}, nil, false, nil
	}
	if name, isMember := memberName(key); isMember {
		m, err := s.applyMember(name, rec)
		if s.on.Member != nil {
			s.on.Member(m, err)
		}
		return Manifest{}, nil, false, nil
	}
	name, isManifest := strings.CutPrefix(key, manifestPrefix)
	if !isManifest || name == "" {
		return Manifest{}, nil, false, nil // another tool's record
	}
	delete(s.manifests, name)
	delete(s.errs, name)
	defer s.reference()
	if rec.Value == nil {
		return Manifest{}, nil, false, nil
	}
	m, err = decodeManifest(name, rec.Value)
	if err != nil {
		err = fmt.Errorf("control topic %s: manifest %q at offset %d: %w", s.topic, key, rec.Offset, err)
		s.errs[name] = err
		return Manifest{Processor: name, Offset: rec.Offset}, nil, true, err
	}
	m.Offset = rec.Offset
	s.manifests[name] = m
	return m, s.loader(m.Version), true, nil
}

func (s *store) applyChunk(hash string, index int, rec *kgo.Record) {
	cs := s.chunks[hash]
	if rec.Value == nil {
		if cs != nil {
			delete(cs.parts, index)
			cs.checked = false
			if len(cs.parts) == 0 {
				delete(s.chunks, hash)
			}
		}
		return
	}
	if cs == nil {
		cs = &chunkSet{parts: map[int]part{}}
		s.chunks[hash] = cs
	}
	// A copy: the record's value may share the fetch's buffer, which a
	// kept slice would hold whole.
	cs.parts[index] = part{offset: rec.Offset, data: bytes.Clone(rec.Value)}
	cs.last = rec.Offset
	cs.checked = false
	if !s.refs[hash] {
		s.evict()
	}
}

// reference recomputes the referenced hashes after a manifest changed,
// checks every referenced version whose bytes it holds (the verdict is
// kept: a publisher asks whether a version is runnable), and drops all the
// bytes it holds. Any version's bytes are read again from the topic when
// they are needed (Load); between deploys a reader holds none.
func (s *store) reference() {
	clear(s.refs)
	versions := map[string]Version{}
	for _, m := range s.manifests {
		s.refs[m.Hash] = true
		versions[m.Hash] = m.Version
		for _, v := range m.History {
			s.refs[v.Hash] = true
			versions[v.Hash] = v
		}
	}
	for _, sh := range s.shadows {
		if sh.Running {
			s.refs[sh.Hash] = true
			versions[sh.Hash] = sh.Version
		}
	}
	for h, cs := range s.chunks {
		if v, ok := versions[h]; ok && cs.held(v) {
			s.check(cs, v)
		}
		cs.dropBytes()
	}
	s.evict()
}

// check verifies the bytes held of v and records the verdict.
func (s *store) check(cs *chunkSet, v Version) error {
	parts := make(map[int][]byte, len(cs.parts))
	for i, p := range cs.parts {
		parts[i] = p.data
	}
	_, err := assemble(v, parts)
	cs.checked, cs.checkedAs, cs.verdict = true, v, err
	return err
}

// evict drops the bytes of the least recently written unreferenced
// contents beyond maxUnreferenced, and forgets those beyond
// maxUnreferencedKnown.
func (s *store) evict() {
	var unref []string
	for h := range s.chunks {
		if !s.refs[h] {
			unref = append(unref, h)
		}
	}
	if len(unref) <= maxUnreferenced {
		return
	}
	sort.Slice(unref, func(i, j int) bool { return s.chunks[unref[i]].last < s.chunks[unref[j]].last })
	old := unref[:len(unref)-maxUnreferenced]
	forget := max(len(unref)-maxUnreferencedKnown, 0)
	for i, h := range old {
		if i < forget {
			delete(s.chunks, h)
		} else {
			s.chunks[h].dropBytes()
		}
	}
}

// loader returns what reads v's bytes: the bytes held, copied out now, or
// the places of its chunks, read again when called. Either way it does
// not use the store afterwards.
func (s *store) loader(v Version) Load {
	cs := s.chunks[v.Hash]
	if cs == nil || cs.held(v) {
		parts := map[int][]byte{}
		if cs != nil {
			for i, p := range cs.parts {
				parts[i] = p.data
			}
		}
		b, err := assemble(v, parts)
		return func(context.Context) ([]byte, error) { return b, err }
	}
	offsets := map[int]int64{}
	for i, p := range cs.parts {
		if i < v.Chunks {
			offsets[i] = p.offset
		}
	}
	if len(offsets) < v.Chunks {
		present := map[int][]byte{}
		for i := range offsets {
			present[i] = []byte{}
		}
		_, err := assemble(v, present) // names the missing chunks
		return func(context.Context) ([]byte, error) { return nil, err }
	}
	fetch := s.fetch
	return func(ctx context.Context) ([]byte, error) {
		parts, err := fetch(ctx, v.Hash, offsets)
		if err != nil {
			return nil, err
		}
		return assemble(v, parts)
	}
}

// runnable reports whether v's bytes are in the topic, complete and
// matching: from the verdict recorded (unless fresh), else by reassembling
// them (read again from the topic if the store keeps only their places:
// with fresh, a version deleted from the topic since it was checked is
// found out).
func (s *store) runnable(ctx context.Context, v Version, fresh bool) error {
	cs := s.chunks[v.Hash]
	if !fresh && cs != nil && cs.checked && cs.checkedAs == v {
		return cs.verdict
	}
	if cs != nil && cs.held(v) {
		return s.check(cs, v)
	}
	_, err := s.loader(v)(ctx)
	if cs != nil && (err == nil || errors.Is(err, ErrCorrupt)) {
		// A verdict; a broker that did not answer is not one.
		cs.checked, cs.checkedAs, cs.verdict = true, v, err
	}
	return err
}

// current returns processor's manifest: ok false if it has none; err (the
// decode error) if its latest manifest record does not decode.
func (s *store) current(processor string) (m Manifest, ok bool, err error) {
	if err := s.errs[processor]; err != nil {
		return Manifest{}, false, err
	}
	m, ok = s.manifests[processor]
	return m, ok, nil
}

// snapshot copies what a State needs: manifests, decode errors, and a
// loader of every referenced version (see loader).
func (s *store) snapshot() *State {
	st := &State{
		topic:     s.topic,
		manifests: make(map[string]Manifest, len(s.manifests)),
		errs:      make(map[string]error, len(s.errs)),
		loads:     map[Version]Load{},
		pauses:    maps.Clone(s.pauses),
		members:   maps.Clone(s.members),
		shadows:   maps.Clone(s.shadows),
	}
	for k, v := range s.manifests {
		st.manifests[k] = v
	}
	for k, v := range s.errs {
		st.errs[k] = v
	}
	for _, m := range s.manifests {
		for _, v := range append([]Version{m.Version}, m.History...) {
			if _, ok := st.loads[v]; !ok {
				st.loads[v] = s.loader(v)
			}
		}
	}
	for _, sh := range s.shadows {
		if _, ok := st.loads[sh.Version]; sh.Running && !ok {
			st.loads[sh.Version] = s.loader(sh.Version)
		}
	}
	return st
}

// fetchChunks reads the chunk records of the content hash at offsets (by
// chunk index) again from cfg's topic, with a client of its own, and
// returns their values by index. A record that is no longer there, or has
// another key (the topic was truncated, or deleted and created again), is
// an error wrapping ErrCorrupt.
func fetchChunks(ctx context.Context, cfg Config, hash string, offsets map[int]int64) (map[int][]byte, error) {
	want := make(map[int64]int, len(offsets))
	lo, hi := int64(-1), int64(-1)
	for i, o := range offsets {
		want[o] = i
		if lo < 0 || o < lo {
			lo = o
		}
		hi = max(hi, o)
	}
	out := make(map[int][]byte, len(offsets))
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(cfg.Kafka.Opts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().At(lo)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(4<<20),
		kgo.FetchMaxBytes(8<<20),
	)...)
	if err != nil {
		return nil, fmt.Errorf("control topic %s: client to read chunks again: %w", cfg.Topic, err)
	}
	defer cl.Close()
	for pos := lo; pos <= hi; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("control topic %s: reading chunks again at offsets %d to %d: %w", cfg.Topic, lo, hi, ctx.Err())
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			if errors.Is(errs[0].Err, kerr.OffsetOutOfRange) {
				// Deleted below us (DeleteRecords), or the topic recreated.
				return nil, fmt.Errorf("%w: control topic %s: the chunks at offsets %d to %d are no longer in the topic: %w", ErrCorrupt, cfg.Topic, lo, hi, errs[0].Err)
			}
			return nil, fmt.Errorf("control topic %s: reading chunks again at offset %d: %w", cfg.Topic, pos, errs[0].Err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			pos = rec.Offset + 1
			if i, ok := want[rec.Offset]; ok && rec.Value != nil && string(rec.Key) == chunkKey(hash, i) {
				out[i] = bytes.Clone(rec.Value)
			}
		})
	}
	if len(out) < len(offsets) {
		var gone []int
		for i := range offsets {
			if _, ok := out[i]; !ok {
				gone = append(gone, i)
			}
		}
		sort.Ints(gone)
		return nil, fmt.Errorf("%w: control topic %s: chunk(s) %s no longer in the topic at the offsets read before", ErrCorrupt, cfg.Topic, listInts(gone, 5))
	}
	return out, nil
}

// State is the control topic as a Load saw it. Safe for concurrent use.
type State struct {
	topic     string
	manifests map[string]Manifest
	errs      map[string]error
	loads     map[Version]Load // every version a manifest references
	pauses    map[string]Pause
	members   map[string]Member
	shadows   map[string]Shadow
}

// Processors returns the processors that have a manifest record (decodable
// or not), sorted.
func (s *State) Processors() []string {
	var names []string
	for n := range s.manifests {
		names = append(names, n)
	}
	for n := range s.errs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Manifest returns processor's manifest. The error wraps ErrNoManifest if
// the topic has none, or ErrCorrupt or ErrFormat if its latest manifest
// record does not decode (the processor then has no usable manifest: an
// earlier one is not used in its place).
func (s *State) Manifest(processor string) (Manifest, error) {
	if err := s.errs[processor]; err != nil {
		return Manifest{}, err
	}
	m, ok := s.manifests[processor]
	if !ok {
		return Manifest{}, fmt.Errorf("%w: control topic %s has no manifest for processor %q", ErrNoManifest, s.topic, processor)
	}
	return m, nil
}

// Module returns the bytes of the version with hash, active or in a
// history, reassembled from its chunks (read again from the topic for a
// version only in histories: ctx bounds that) and verified against the
// hash and size of the manifest. The error wraps ErrCorrupt if chunks are
// missing or the bytes do not match, ErrNoManifest if no manifest
// references hash.
func (s *State) Module(ctx context.Context, hash string) ([]byte, error) {
	names := make([]string, 0, len(s.manifests))
	for n := range s.manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := s.manifests[n]
		for _, v := range append([]Version{m.Version}, m.History...) {
			if v.Hash == hash {
				b, err := s.loads[v](ctx)
				if err != nil {
					return nil, fmt.Errorf("control topic %s: processor %q: %w", s.topic, n, err)
				}
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: control topic %s: no manifest references version %.12s", ErrNoManifest, s.topic, hash)
}
