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

// Pause records (format 1): key "pause/<name>", value JSON
//
//	{
//	  "format": 1,
//	  "processor": "<name>",          // equal to the name in the key
//	  "paused": true,                 // false: resumed
//	  "by": "alice@laptop",           // free text: who
//	  "at": "2026-05-04T10:00:00.123Z"
//	}
//
// Compaction keeps the latest of each processor, so a process that starts
// (and reads the topic from its start) finds every processor's pause as
// the last `wasmstream pause` or `resume` left it. A resume writes
// "paused": false rather than a tombstone, so it is seen and logged like a
// pause; a tombstone also means "not paused". A record that does not
// decode is reported and leaves the processor as it was (a pause is never
// guessed at, nor dropped, from an unreadable record).
const pausePrefix = "pause/"

// Pause is a processor's pause record.
type Pause struct {
	Format    int       `json:"format"`
	Processor string    `json:"processor"`
	Paused    bool      `json:"paused"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	// Offset of the record in the topic (not part of the JSON); -1 for
	// one neither read nor written.
	Offset int64 `json:"-"`
}

func pauseKey(processor string) string { return pausePrefix + processor }

// decodePause decodes and checks the value of processor's pause record;
// the error wraps ErrFormat or ErrCorrupt like decodeManifest's.
func decodePause(processor string, value []byte) (Pause, error) {
	var p Pause
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return p, fmt.Errorf("%w: not a JSON object: %v", ErrCorrupt, err)
	}
	if head.Format == nil {
		return p, fmt.Errorf("%w: no format field", ErrCorrupt)
	}
	if *head.Format != Format {
		return p, fmt.Errorf("%w: format %d (this build reads format %d; upgrade wasmstream)", ErrFormat, *head.Format, Format)
	}
	if err := json.Unmarshal(value, &p); err != nil {
		return Pause{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if p.Processor != processor {
		return Pause{}, fmt.Errorf("%w: processor field %q differs from the key's %q", ErrCorrupt, p.Processor, processor)
	}
	return p, nil
}

// applyPause takes a record whose key has pausePrefix: it returns the
// pause it sets (a tombstone is "not paused"), or the decode error, in
// which case the processor's pause stays as it was.
func (s *store) applyPause(name string, rec *kgo.Record) (Pause, error) {
	if rec.Value == nil {
		p := Pause{Format: Format, Processor: name, Offset: rec.Offset}
		delete(s.pauses, name)
		return p, nil
	}
	p, err := decodePause(name, rec.Value)
	if err != nil {
		return Pause{Processor: name, Offset: rec.Offset},
			fmt.Errorf("control topic %s: pause record %q at offset %d (the processor's pause is left as it was): %w",
				s.topic, rec.Key, rec.Offset, err)
	}
	p.Offset = rec.Offset
	s.pauses[name] = p
	return p, nil
}

// pauseName returns the processor a pause key names; ok is false for
// other keys.
func pauseName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, pausePrefix)
	return name, ok && name != ""
}

// Paused reports whether processor is paused in the topic as Load saw it,
// with its latest pause record (zero, Offset -1, if it has none).
func (s *State) Paused(processor string) (bool, Pause) {
	p, ok := s.pauses[processor]
	if !ok {
		return false, Pause{Processor: processor, Offset: -1}
	}
	return p.Paused, p
}

// ErrSamePause: SetPause found the processor already in the asked state
// (nothing written).
var ErrSamePause = errors.New("control: processor already in that pause state")

// SetPause pauses (paused true) or resumes processor: it writes its pause
// record, unless the topic already says so (then it returns that record
// and an error wrapping ErrSamePause). by is free text recorded with it.
// The topic is read to its end first, so the check rests on a state one
// produce round trip old (see the package comment on publishers).
func (p *Publisher) SetPause(ctx context.Context, processor string, paused bool, by string) (Pause, error) {
	if processor == "" {
		return Pause{}, errors.New("control: pause: no processor name")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.r.catchUp(ctx); err != nil {
		return Pause{}, err
	}
	if cur, ok := p.r.st.pauses[processor]; ok && cur.Paused == paused || !ok && !paused {
		if !ok {
			cur = Pause{Format: Format, Processor: processor, Offset: -1}
		}
		return cur, fmt.Errorf("%w: control topic %s: processor %q paused=%v already", ErrSamePause, p.r.topic, processor, paused)
	}
	rec := Pause{Format: Format, Processor: processor, Paused: paused, By: by, At: time.Now().UTC().Truncate(time.Millisecond)}
	val, err := json.Marshal(rec)
	if err != nil {
		panic("control: encoding a pause: " + err.Error()) // only plain types: cannot happen
	}
	kr := &kgo.Record{Key: []byte(pauseKey(processor)), Value: val}
	if err := p.produce(ctx, kr); err != nil {
		return Pause{}, fmt.Errorf("control topic %s: processor %q: writing its pause record: %w", p.r.topic, processor, err)
	}
	rec.Offset = kr.Offset
	return rec, nil
}
