package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// maxUnreferenced bounds how many contents a reader keeps chunks of without
// a manifest referencing them. A manifest follows its chunks, so the chunks
// being read belong to a deploy in flight; older unreferenced contents are
// versions that fell off every history, or deploys that died before their
// manifest, and are dropped (the least recently written first).
const maxUnreferenced = 4

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
// A Reader keeps in memory the latest manifest of every processor and the
// chunks of every version a manifest references (active or history), plus
// those of at most a few contents not referenced yet.
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
		// The topic is often created just before it is read (the first
		// process of an app): a metadata answer that does not know it yet
		// is asked again after this, not after franz-go's default 5 s,
		// which delayed startup by 5 s in about half the runs on Kafka.
		kgo.MetadataMinAge(kclient.MetadataMinAge),
		kgo.FetchMaxBytes(8<<20),
	)
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("control topic %s: client: %w", cfg.Topic, err)
	}
	return &Reader{topic: cfg.Topic, cl: cl, adm: kadm.NewClient(cl), st: newStore(cfg.Topic)}, nil
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

// Follow tails the topic from where the last Load stopped (from the start
// if Load was never called) until ctx ends, calling fn on this goroutine
// for every manifest record, in topic order:
//
//   - fn(m, module, nil): a manifest whose version's bytes are complete and
//     match its hash and size; module is the reassembled bytes.
//   - fn(m, nil, err): a manifest that decodes but whose bytes are missing
//     or do not match (err wraps ErrCorrupt); or, with only m.Processor and
//     m.Offset set, a manifest record that does not decode (ErrCorrupt, or
//     ErrFormat for a format this build does not know).
//
// A manifest tombstone (the processor removed from the topic) is not
// reported. fn must return for reading to go on. Follow returns ctx.Err()
// when ctx ends, or an error if the topic cannot be read (deleted,
// truncated below the position, authorization).
func (r *Reader) Follow(ctx context.Context, fn func(m Manifest, module []byte, err error)) error {
	if !r.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("control topic %s: Follow while a Load or Follow runs on the same Reader", r.topic)
	}
	defer r.busy.Store(false)
	for {
		fetches := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := r.fetchErr(ctx, fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			m, ok, err := r.st.apply(rec)
			if !ok {
				return
			}
			if err != nil {
				fn(m, nil, err)
				return
			}
			module, err := r.st.module(m.Version)
			if err != nil {
				err = fmt.Errorf("control topic %s: processor %q manifest at offset %d: %w", r.topic, m.Processor, m.Offset, err)
			}
			fn(m, module, err)
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
		fetches.EachRecord(func(rec *kgo.Record) { r.st.apply(rec) })
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
}

// chunkSet holds the chunks read for one content hash.
type chunkSet struct {
	parts map[int][]byte
	last  int64 // offset of the latest chunk record, for eviction
}

func newStore(topic string) store {
	return store{
		topic:     topic,
		manifests: map[string]Manifest{},
		errs:      map[string]error{},
		chunks:    map[string]*chunkSet{},
		refs:      map[string]bool{},
	}
}

// apply takes one record. For a manifest record (not a tombstone) it
// returns ok and the manifest, or, for one that does not decode, a
// Manifest with only Processor and Offset set and the error.
func (s *store) apply(rec *kgo.Record) (m Manifest, ok bool, err error) {
	s.pos = rec.Offset + 1
	if rec.Attrs.IsControl() {
		return Manifest{}, false, nil
	}
	key := string(rec.Key)
	if hash, index, isChunk := parseChunkKey(key); isChunk {
		s.applyChunk(hash, index, rec)
		return Manifest{}, false, nil
	}
	name, isManifest := strings.CutPrefix(key, manifestPrefix)
	if !isManifest || name == "" {
		return Manifest{}, false, nil // another tool's record
	}
	delete(s.manifests, name)
	delete(s.errs, name)
	defer s.reference()
	if rec.Value == nil {
		return Manifest{}, false, nil
	}
	m, err = decodeManifest(name, rec.Value)
	if err != nil {
		err = fmt.Errorf("control topic %s: manifest %q at offset %d: %w", s.topic, key, rec.Offset, err)
		s.errs[name] = err
		return Manifest{Processor: name, Offset: rec.Offset}, true, err
	}
	m.Offset = rec.Offset
	s.manifests[name] = m
	return m, true, nil
}

func (s *store) applyChunk(hash string, index int, rec *kgo.Record) {
	cs := s.chunks[hash]
	if rec.Value == nil {
		if cs != nil {
			delete(cs.parts, index)
			if len(cs.parts) == 0 {
				delete(s.chunks, hash)
			}
		}
		return
	}
	if cs == nil {
		cs = &chunkSet{parts: map[int][]byte{}}
		s.chunks[hash] = cs
	}
	// A copy: the record's value may share the fetch's buffer, which a
	// kept slice would hold whole.
	cs.parts[index] = bytes.Clone(rec.Value)
	cs.last = rec.Offset
	if !s.refs[hash] {
		s.evict()
	}
}

// reference recomputes the referenced hashes after a manifest changed and
// evicts what no longer needs keeping.
func (s *store) reference() {
	clear(s.refs)
	for _, m := range s.manifests {
		s.refs[m.Hash] = true
		for _, v := range m.History {
			s.refs[v.Hash] = true
		}
	}
	s.evict()
}

// evict drops the chunks of the least recently written unreferenced
// contents beyond maxUnreferenced.
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
	for _, h := range unref[:len(unref)-maxUnreferenced] {
		delete(s.chunks, h)
	}
}

// module reassembles and verifies v from the chunks held.
func (s *store) module(v Version) ([]byte, error) {
	var parts map[int][]byte
	if cs := s.chunks[v.Hash]; cs != nil {
		parts = cs.parts
	}
	return assemble(v, parts)
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

// snapshot copies what a State needs: manifests, decode errors, and the
// chunks of referenced contents (chunk slices are never written after they
// are stored, so they are shared).
func (s *store) snapshot() *State {
	st := &State{
		topic:     s.topic,
		manifests: make(map[string]Manifest, len(s.manifests)),
		errs:      make(map[string]error, len(s.errs)),
		chunks:    map[string]map[int][]byte{},
	}
	for k, v := range s.manifests {
		st.manifests[k] = v
	}
	for k, v := range s.errs {
		st.errs[k] = v
	}
	for h := range s.refs {
		if cs := s.chunks[h]; cs != nil {
			parts := make(map[int][]byte, len(cs.parts))
			for i, p := range cs.parts {
				parts[i] = p
			}
			st.chunks[h] = parts
		}
	}
	return st
}

// State is the control topic as a Load saw it. Safe for concurrent use.
type State struct {
	topic     string
	manifests map[string]Manifest
	errs      map[string]error
	chunks    map[string]map[int][]byte
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
// history, reassembled from its chunks and verified against the hash and
// size of the manifest. The error wraps ErrCorrupt if chunks are missing or
// the bytes do not match, ErrNoManifest if no manifest references hash.
func (s *State) Module(hash string) ([]byte, error) {
	names := make([]string, 0, len(s.manifests))
	for n := range s.manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := s.manifests[n]
		for _, v := range append([]Version{m.Version}, m.History...) {
			if v.Hash == hash {
				b, err := assemble(v, s.chunks[hash])
				if err != nil {
					return nil, fmt.Errorf("control topic %s: processor %q: %w", s.topic, n, err)
				}
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: control topic %s: no manifest references version %.12s", ErrNoManifest, s.topic, hash)
}
