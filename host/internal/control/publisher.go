package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// deliveryTimeout bounds how long a record may wait for its acknowledgement
// (retries included) when the caller's context has no earlier deadline.
const deliveryTimeout = 2 * time.Minute

// Publisher writes versions to the control topic: Deploy, DeployInitial and
// Rollback. Each call reads the topic to its end first (continuing from the
// previous call), and returns once every record it wrote is acknowledged by
// all in-sync replicas. Safe for concurrent use; calls run one at a time.
type Publisher struct {
	mu sync.Mutex
	r  *Reader // its client also produces
}

// NewPublisher returns a Publisher; Close it when done. The topic must exist
// (EnsureTopic).
func NewPublisher(cfg Config) (*Publisher, error) {
	r, err := newReader(cfg, []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // everything goes to partition 0
		kgo.RequiredAcks(kgo.AllISRAcks()),             // and kgo's default idempotence
		kgo.RecordDeliveryTimeout(deliveryTimeout),
	})
	if err != nil {
		return nil, err
	}
	return &Publisher{r: r}, nil
}

// Close closes the Publisher's client.
func (p *Publisher) Close() { p.r.Close() }

// Deploy publishes module as processor's active version, pushing the
// version it replaces onto the history (trimmed to MaxHistory). It writes
// the chunks unless the topic already holds this content, complete and
// referenced by a manifest, then reads the topic to its end again and
// writes the manifest. label and by are free text recorded in the
// manifest.
//
// Deploying the content that is active returns an error wrapping
// ErrAlreadyActive and writes no manifest. A processor whose latest
// manifest does not decode gets the new version with an empty history;
// one of an unknown format is refused (ErrFormat).
func (p *Publisher) Deploy(ctx context.Context, processor string, module []byte, label, by string) (Manifest, error) {
	return p.deploy(ctx, processor, module, label, by, false)
}

// DeployInitial publishes module as processor's first version, with reason
// ReasonInitial and no history, only if the topic has no usable manifest
// for processor; it returns the manifest then active and whether it wrote
// it. It records the version a process ran before any deploy (the one in
// its configuration file) so that a later deploy can be rolled back to it.
// A manifest that does not decode counts as none and is replaced; one of an
// unknown format is refused (ErrFormat).
func (p *Publisher) DeployInitial(ctx context.Context, processor string, module []byte, label, by string) (m Manifest, published bool, err error) {
	m, err = p.deploy(ctx, processor, module, label, by, true)
	if errors.Is(err, errHasManifest) {
		return m, false, nil
	}
	return m, err == nil, err
}

// errHasManifest: DeployInitial found a manifest (returned with it).
var errHasManifest = errors.New("control: has a manifest")

func (p *Publisher) deploy(ctx context.Context, processor string, module []byte, label, by string, initial bool) (Manifest, error) {
	if processor == "" {
		return Manifest{}, errors.New("control: deploy: no processor name")
	}
	v := NewVersion(module, label)
	if v.Chunks == 0 || v.Chunks > maxChunks {
		return Manifest{}, fmt.Errorf("control topic %s: deploy to processor %q: module of %d bytes (must be 1 to %d)", p.r.topic, processor, len(module), maxChunks*ChunkSize)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.r.st

	// decide says what to write on top of the current state, or why not.
	decide := func() (Manifest, error) {
		cur, ok, err := st.current(processor)
		switch {
		case errors.Is(err, ErrFormat):
			return Manifest{}, fmt.Errorf("control topic %s: not replacing processor %q's manifest: %w", p.r.topic, processor, err)
		case initial && ok:
			return cur, errHasManifest
		case ok && cur.Hash == v.Hash:
			return cur, fmt.Errorf("%w: control topic %s: processor %q already runs %s (%s by %s at %s)",
				ErrAlreadyActive, p.r.topic, processor, cur.Version, cur.Reason, cur.DeployedBy, cur.DeployedAt.Format(time.RFC3339))
		}
		m := Manifest{Format: Format, Processor: processor, Version: v, DeployedBy: by, Reason: ReasonDeploy, Offset: -1}
		if initial {
			m.Reason = ReasonInitial
		}
		if ok { // with no readable manifest, there is no history to keep
			h, err := st.runnableHistory(ctx, pushHistory(cur))
			if err != nil {
				return Manifest{}, err
			}
			m.History = h
		}
		return m, nil
	}

	if err := p.r.catchUp(ctx); err != nil {
		return Manifest{}, err
	}
	if m, err := decide(); err != nil {
		return m, err
	}
	// Chunks another deploy left are reused only if a manifest references
	// them: every reader keeps those, while it may have dropped chunks no
	// manifest wanted (see maxUnreferenced).
	if !st.refs[v.Hash] || st.runnable(ctx, v, false) != nil {
		recs := make([]*kgo.Record, v.Chunks)
		for i := range recs {
			recs[i] = &kgo.Record{Key: []byte(chunkKey(v.Hash, i)), Value: chunk(module, i)}
		}
		if err := p.produce(ctx, recs...); err != nil {
			return Manifest{}, fmt.Errorf("control topic %s: deploy to processor %q: writing %d chunks of %s: %w", p.r.topic, processor, v.Chunks, v, err)
		}
	}
	// Writing chunks takes a while: decide again on the state just before
	// the manifest is written (see the package comment on races).
	if err := p.r.catchUp(ctx); err != nil {
		return Manifest{}, err
	}
	m, err := decide()
	if err != nil {
		return m, err
	}
	return p.publish(ctx, m)
}

// Rollback makes processor's previous version (history[0]) active again,
// with the rest of the history; reason is recorded ("" means
// ReasonRollback; a process rolling back by itself passes AutoRollback(why)),
// and by says who rolls back.
//
// If expectHash is not empty and the active version is no longer
// expectHash, Rollback writes nothing and returns an error wrapping
// ErrActiveChanged: the rollback a process decided on was already done, or
// overtaken by a deploy. It returns ErrNoPrevious if the history is empty,
// ErrNoManifest if the processor has none, and the decode error
// (ErrCorrupt, ErrFormat) if its latest manifest does not decode. It
// never rolls back to a version whose bytes in the topic are incomplete or
// do not match its hash: it skips such versions (listed in the returned
// manifest's Skipped) for the next one, and returns ErrNoPrevious, writing
// nothing, if no previous version is left.
func (p *Publisher) Rollback(ctx context.Context, processor, reason, expectHash, by string) (Manifest, error) {
	if reason == "" {
		reason = ReasonRollback
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.r.st
	if err := p.r.catchUp(ctx); err != nil {
		return Manifest{}, err
	}
	cur, ok, err := st.current(processor)
	switch {
	case err != nil:
		return Manifest{}, fmt.Errorf("control topic %s: cannot roll back processor %q: %w", p.r.topic, processor, err)
	case !ok:
		return Manifest{}, fmt.Errorf("%w: control topic %s: processor %q has no manifest to roll back", ErrNoManifest, p.r.topic, processor)
	case expectHash != "" && cur.Hash != expectHash:
		return cur, fmt.Errorf("%w: control topic %s: processor %q now runs %s (%s by %s), not %.12s: not rolling back",
			ErrActiveChanged, p.r.topic, processor, cur.Version, cur.Reason, cur.DeployedBy, expectHash)
	case len(cur.History) == 0:
		return cur, fmt.Errorf("%w: control topic %s: processor %q runs %s and has no previous version",
			ErrNoPrevious, p.r.topic, processor, cur.Version)
	}
	// The target is the most recent previous version whose bytes are in
	// the topic, complete and matching its hash: a version written by
	// another tool with chunks missing, or corrupted, or deleted from the
	// topic since, could run nowhere, so it is skipped (and reported in
	// Skipped), never rolled back to. The target is read again to be sure
	// (the reader keeps only the active version's bytes).
	var skipped []SkippedVersion
	for i, prev := range cur.History {
		if err := st.runnable(ctx, prev, true); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return Manifest{}, fmt.Errorf("control topic %s: cannot roll back processor %q: %w", p.r.topic, processor, err)
			}
			skipped = append(skipped, SkippedVersion{Version: prev, Why: err.Error()})
			continue
		}
		h, err := st.runnableHistory(ctx, cur.History[i+1:])
		if err != nil {
			return Manifest{}, fmt.Errorf("control topic %s: cannot roll back processor %q: %w", p.r.topic, processor, err)
		}
		m := Manifest{
			Format:     Format,
			Processor:  processor,
			Version:    prev,
			DeployedBy: by,
			Reason:     reason,
			History:    h,
			Offset:     -1,
		}
		m, err = p.publish(ctx, m)
		m.Skipped = skipped
		return m, err
	}
	return cur, fmt.Errorf("%w: control topic %s: processor %q runs %s and none of its %d previous versions can run (%s)",
		ErrNoPrevious, p.r.topic, processor, cur.Version, len(cur.History), skipped[0].Why)
}

// SkippedVersion is a previous version Rollback passed over, and why.
type SkippedVersion struct {
	Version Version
	Why     string
}

// runnableHistory returns the versions of h whose bytes the topic holds,
// complete and matching, in order (a new slice). A version that is not
// runnable now never becomes runnable later for a reader: its manifest
// followed its chunks, so what is missing stays missing. Keeping it would
// make it the "previous" version a deploy reports and a rollback target.
// An error other than ErrCorrupt (the topic could not be read again to
// check a version) is returned.
func (s *store) runnableHistory(ctx context.Context, h []Version) ([]Version, error) {
	out := make([]Version, 0, len(h))
	for _, v := range h {
		switch err := s.runnable(ctx, v, false); {
		case err == nil:
			out = append(out, v)
		case !errors.Is(err, ErrCorrupt):
			return nil, err
		}
	}
	return out, nil
}

// pushHistory returns the history of a manifest replacing cur: cur's
// version, then cur's history, at most MaxHistory.
func pushHistory(cur Manifest) []Version {
	h := append([]Version{cur.Version}, cur.History...)
	if len(h) > MaxHistory {
		h = h[:MaxHistory]
	}
	return h
}

// publish stamps m with the time and writes it.
func (p *Publisher) publish(ctx context.Context, m Manifest) (Manifest, error) {
	m.DeployedAt = time.Now().UTC().Truncate(time.Millisecond)
	rec := &kgo.Record{Key: []byte(manifestKey(m.Processor)), Value: encodeManifest(m)}
	if err := p.produce(ctx, rec); err != nil {
		return Manifest{}, fmt.Errorf("control topic %s: processor %q: writing the manifest of %s (%s): %w", p.r.topic, m.Processor, m.Version, m.Reason, err)
	}
	m.Offset = rec.Offset
	if m.History == nil {
		m.History = []Version{}
	}
	return m, nil
}

// produce writes recs to partition 0, in order, and waits until all of them
// are acknowledged; the caller adds context to the error.
func (p *Publisher) produce(ctx context.Context, recs ...*kgo.Record) error {
	for _, r := range recs {
		r.Topic = p.r.topic
		r.Partition = 0
	}
	return p.r.cl.ProduceSync(ctx, recs...).FirstErr()
}
