package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Shadow records (format 1): key "shadow/<name>", value JSON
//
//	{
//	  "format": 1,
//	  "processor": "<name>",        // equal to the name in the key
//	  "running": true,              // false: the shadow is stopped
//	  "hash": ..., "size": ..., "chunks": ..., "label": ...,  // the candidate (a Version)
//	  "reason": "shadow-first 5m0s", // free text: why it started or stopped
//	  "by": "alice@laptop",
//	  "at": "2026-05-04T10:00:00.123Z"
//	}
//
// A shadow run (`wasmstream deploy --shadow`) runs the candidate beside
// the processor's active version in every process, comparing, never
// committing (abi/ABI.md section 12). Its bytes are chunks like a
// deployed version's, written before the record; while the record
// names them they count as referenced. Compaction keeps the latest record
// of each processor: a process that starts runs the shadow the topic says
// runs. A tombstone means "no shadow". The Offset of the record that
// started a run names the run: each process reports its results under it
// (the diff topic, ShadowTopicName).
const shadowPrefix = "shadow/"

// Shadow is a processor's shadow record.
type Shadow struct {
	Format    int    `json:"format"`
	Processor string `json:"processor"`
	Running   bool   `json:"running"`
	Version
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	// Offset of the record in the topic (not part of the JSON); -1 for
	// one neither read nor written.
	Offset int64 `json:"-"`
}

// ShadowTopicName is the diff topic of processor's shadow runs: the
// processes' results and samples of differing records.
func ShadowTopicName(appID, processor string) string { return appID + "-" + processor + "-shadow" }

func shadowKey(processor string) string { return shadowPrefix + processor }

func shadowName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, shadowPrefix)
	return name, ok && name != ""
}

func decodeShadow(processor string, value []byte) (Shadow, error) {
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return Shadow{}, fmt.Errorf("%w: not a JSON object: %v", ErrCorrupt, err)
	}
	if head.Format == nil {
		return Shadow{}, fmt.Errorf("%w: no format field", ErrCorrupt)
	}
	if *head.Format != Format {
		return Shadow{}, fmt.Errorf("%w: format %d (this build reads format %d; upgrade wasmstream)", ErrFormat, *head.Format, Format)
	}
	var s Shadow
	if err := json.Unmarshal(value, &s); err != nil {
		return Shadow{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if s.Processor != processor {
		return Shadow{}, fmt.Errorf("%w: processor field %q differs from the key's %q", ErrCorrupt, s.Processor, processor)
	}
	if s.Running && (s.Hash == "" || s.Chunks <= 0 || s.Chunks > maxChunks) {
		return Shadow{}, fmt.Errorf("%w: a running shadow names no valid version", ErrCorrupt)
	}
	return s, nil
}

// applyShadow takes a record whose key has shadowPrefix: the shadow it
// sets and the loader of its version's bytes (nil when it is not
// running), or the decode error, the processor's shadow then stopped (a
// shadow is never guessed at from an unreadable record).
func (s *store) applyShadow(name string, rec *kgo.Record) (Shadow, Load, error) {
	defer s.reference()
	if rec.Value == nil {
		delete(s.shadows, name)
		return Shadow{Format: Format, Processor: name, Offset: rec.Offset}, nil, nil
	}
	sh, err := decodeShadow(name, rec.Value)
	if err != nil {
		delete(s.shadows, name)
		return Shadow{Processor: name, Offset: rec.Offset},
			nil, fmt.Errorf("control topic %s: shadow record %q at offset %d (no shadow runs): %w", s.topic, rec.Key, rec.Offset, err)
	}
	sh.Offset = rec.Offset
	s.shadows[name] = sh
	if !sh.Running {
		return sh, nil, nil
	}
	return sh, s.loader(sh.Version), nil
}

// Shadow returns processor's shadow record as Load saw it (Running false,
// Offset -1, if it has none) and the loader of its version's bytes (nil
// unless it runs).
func (s *State) Shadow(processor string) (Shadow, Load) {
	sh, ok := s.shadows[processor]
	if !ok {
		return Shadow{Processor: processor, Offset: -1}, nil
	}
	if !sh.Running {
		return sh, nil
	}
	return sh, s.loads[sh.Version]
}

// ErrNoShadow: StopShadow found no shadow running (nothing written).
var ErrNoShadow = errors.New("control: no shadow of the processor runs")

// StartShadow writes module's chunks, then the record that runs it as
// processor's shadow, replacing any shadow running. by and reason are
// free text recorded with it.
func (p *Publisher) StartShadow(ctx context.Context, processor string, module []byte, label, reason, by string) (Shadow, error) {
	if processor == "" {
		return Shadow{}, errors.New("control: shadow: no processor name")
	}
	v := NewVersion(module, label)
	if v.Chunks == 0 || v.Chunks > maxChunks {
		return Shadow{}, fmt.Errorf("control topic %s: shadow of processor %q: module of %d bytes (must be 1 to %d)", p.r.topic, processor, len(module), maxChunks*ChunkSize)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := make([]*kgo.Record, v.Chunks)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(chunkKey(v.Hash, i)), Value: chunk(module, i)}
	}
	if err := p.produce(ctx, recs...); err != nil {
		return Shadow{}, fmt.Errorf("control topic %s: shadow of processor %q: writing %d chunks of %s: %w", p.r.topic, processor, v.Chunks, v, err)
	}
	return p.writeShadow(ctx, Shadow{Format: Format, Processor: processor, Running: true, Version: v, Reason: reason, By: by})
}

// StopShadow writes that processor's shadow is stopped, with reason;
// ErrNoShadow (wrapped) if none runs. expectOffset >= 0 stops only the
// run that record started (ErrNoShadow otherwise).
func (p *Publisher) StopShadow(ctx context.Context, processor, reason, by string, expectOffset int64) (Shadow, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.r.catchUp(ctx); err != nil {
		return Shadow{}, err
	}
	cur, ok := p.r.st.shadows[processor]
	if !ok || !cur.Running || expectOffset >= 0 && cur.Offset != expectOffset {
		return Shadow{}, fmt.Errorf("%w: control topic %s: processor %q", ErrNoShadow, p.r.topic, processor)
	}
	return p.writeShadow(ctx, Shadow{Format: Format, Processor: processor, Version: cur.Version, Reason: reason, By: by})
}

func (p *Publisher) writeShadow(ctx context.Context, sh Shadow) (Shadow, error) {
	sh.At = time.Now().UTC().Truncate(time.Millisecond)
	val, err := json.Marshal(sh)
	if err != nil {
		panic("control: encoding a shadow: " + err.Error()) // only plain types: cannot happen
	}
	kr := &kgo.Record{Key: []byte(shadowKey(sh.Processor)), Value: val}
	if err := p.produce(ctx, kr); err != nil {
		return Shadow{}, fmt.Errorf("control topic %s: processor %q: writing its shadow record: %w", p.r.topic, sh.Processor, err)
	}
	sh.Offset = kr.Offset
	return sh, nil
}
