package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Member records (format 1): key "query/<member>", value JSON
//
//	{
//	  "format": 1,
//	  "member": "<member>",               // equal to the name in the key
//	  "address": "http://10.0.0.7:9645",  // its interactive-query endpoint
//	  "tasks": {"counts": [0, 2]},        // partitions of each processor it holds
//	  "at": "2026-05-04T10:00:00.123Z"
//	}
//
// Each process with an interactive-query endpoint writes its own record
// when the tasks it holds change, and a tombstone when it stops, so that
// any process (and `wasmstream query`) can send a key to the process that
// holds its task (host/internal/query). A process killed without its
// tombstone leaves its record behind: a task two records claim is the one
// of the later "at" (the process that took it over wrote after the one
// that lost it). Compaction keeps the latest record of each member.
const memberPrefix = "query/"

// maxMemberTasks bounds the partitions a member record may list (a record
// of another tool cannot make a reader hold without bound).
const maxMemberTasks = 1 << 16

// Member is a process's member record.
type Member struct {
	Format  int                `json:"format"`
	Member  string             `json:"member"`
	Address string             `json:"address"`
	Tasks   map[string][]int32 `json:"tasks"`
	At      time.Time          `json:"at"`
	// Gone is set for a tombstone (the member stopped); only Member is
	// set then. Not part of the JSON.
	Gone bool `json:"-"`
}

func memberKey(member string) string { return memberPrefix + member }

// memberName returns the member a key names; ok is false for other keys.
func memberName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, memberPrefix)
	return name, ok && name != ""
}

func decodeMember(name string, value []byte) (Member, error) {
	var m Member
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return m, fmt.Errorf("%w: not a JSON object: %v", ErrCorrupt, err)
	}
	if head.Format == nil || *head.Format != Format {
		return m, fmt.Errorf("%w: member record of format %v (this build reads format %d)", ErrFormat, head.Format, Format)
	}
	if err := json.Unmarshal(value, &m); err != nil {
		return Member{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.Member != name {
		return Member{}, fmt.Errorf("%w: member field %q differs from the key's %q", ErrCorrupt, m.Member, name)
	}
	n := 0
	for _, ps := range m.Tasks {
		n += len(ps)
	}
	if n > maxMemberTasks {
		return Member{}, fmt.Errorf("%w: member record lists %d tasks (at most %d)", ErrCorrupt, n, maxMemberTasks)
	}
	return m, nil
}

// applyMember takes a record whose key has memberPrefix.
func (s *store) applyMember(name string, rec *kgo.Record) (Member, error) {
	if rec.Value == nil {
		delete(s.members, name)
		return Member{Member: name, Gone: true}, nil
	}
	m, err := decodeMember(name, rec.Value)
	if err != nil {
		return Member{Member: name}, fmt.Errorf("control topic %s: member record %q at offset %d: %w", s.topic, rec.Key, rec.Offset, err)
	}
	s.members[name] = m
	return m, nil
}

// Members returns the member records as Load saw them.
func (s *State) Members() []Member {
	out := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m)
	}
	return out
}

// PublishMember writes m (Format and At are set here), or, with m.Gone, a
// tombstone for m.Member.
func (p *Publisher) PublishMember(ctx context.Context, m Member) error {
	if m.Member == "" {
		return fmt.Errorf("control topic %s: member record without a member name", p.r.topic)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := &kgo.Record{Key: []byte(memberKey(m.Member))}
	if !m.Gone {
		m.Format, m.At = Format, time.Now().UTC().Truncate(time.Millisecond)
		val, err := json.Marshal(m)
		if err != nil {
			panic("control: encoding a member record: " + err.Error()) // only plain types: cannot happen
		}
		rec.Value = val
	}
	if err := p.produce(ctx, rec); err != nil {
		return fmt.Errorf("control topic %s: writing member %q's record: %w", p.r.topic, m.Member, err)
	}
	return nil
}
