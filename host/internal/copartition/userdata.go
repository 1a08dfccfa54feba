package copartition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The UserData of a member's JoinGroup metadata carries its co-partition
// groups, version 1:
//
//	version  byte     1
//	groups   uvarint  number of groups, at most maxGroups
//	per group:
//	  topics  uvarint  number of topics, 1 to maxGroupTopics
//	  per topic:
//	    len   uvarint  1 to maxTopicLen
//	    name  len bytes
//
// with nothing after the last group, and at most maxUserData bytes in all.
// Empty UserData declares no groups. The leader treats any other input
// (an unknown version, a bound exceeded, a truncated or trailing byte) as
// declaring no groups too: one member's bad bytes must not stop the group
// from being balanced. A later version that a v1 leader cannot read thus
// loses co-partitioning only while such a leader leads; a change that must
// not degrade so changes ProtocolName instead.
const userDataVersion = 1

// The bounds of a declaration, checked by Validate when it is made and by
// decodeGroups when the leader reads it, so that no member can make the
// leader allocate more than a bounded multiple of what it sent.
const (
	maxGroups      = 1024
	maxGroupTopics = 1024
	maxTopicLen    = 249 // Kafka's own limit on a topic name
	maxUserData    = 1 << 20
)

var errTooLarge = errors.New("copartition: the co-partition groups encode to more than 1 MiB")

// normalize returns the groups with each group's topics sorted and
// deduplicated, groups of fewer than two topics dropped (they constrain
// nothing), and the groups sorted and deduplicated: equal declarations
// encode to equal bytes, so a restart does not by itself change the
// metadata.
func normalize(groups [][]string) [][]string {
	var out [][]string
	for _, g := range groups {
		g = slices.Compact(slices.Sorted(slices.Values(g)))
		if len(g) >= 2 {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, slices.Compare)
	return slices.CompactFunc(out, slices.Equal)
}

// validate checks normalized groups against the bounds.
func validate(groups [][]string) error {
	if len(groups) > maxGroups {
		return fmt.Errorf("copartition: %d co-partition groups, at most %d", len(groups), maxGroups)
	}
	size := 1 + uvarintLen(len(groups))
	for _, g := range groups {
		if len(g) > maxGroupTopics {
			return fmt.Errorf("copartition: a co-partition group of %d topics, at most %d", len(g), maxGroupTopics)
		}
		size += uvarintLen(len(g))
		for _, t := range g {
			if len(t) == 0 || len(t) > maxTopicLen {
				return fmt.Errorf("copartition: topic name %q: 1 to %d bytes", t, maxTopicLen)
			}
			size += uvarintLen(len(t)) + len(t)
		}
	}
	if size > maxUserData {
		return errTooLarge
	}
	return nil
}

// uvarintLen is the encoded length of n in bytes.
func uvarintLen(n int) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], uint64(n))
}

// encodeGroups encodes validated groups.
func encodeGroups(groups [][]string) []byte {
	if len(groups) == 0 {
		return nil
	}
	b := []byte{userDataVersion}
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = binary.AppendUvarint(b, uint64(len(g)))
		for _, t := range g {
			b = binary.AppendUvarint(b, uint64(len(t)))
			b = append(b, t...)
		}
	}
	return b
}

// decodeGroups decodes a member's UserData. It returns ok false, and no
// groups, for anything but a well-formed version 1 declaration within the
// bounds; empty data is well formed and declares nothing.
func decodeGroups(b []byte) (groups [][]string, ok bool) {
	if len(b) == 0 {
		return nil, true
	}
	if len(b) > maxUserData || b[0] != userDataVersion {
		return nil, false
	}
	b = b[1:]
	// uvarint reads a count or length no larger than limit.
	uvarint := func(limit int) (int, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > uint64(limit) {
			return 0, false
		}
		b = b[n:]
		return int(v), true
	}
	nGroups, ok := uvarint(maxGroups)
	if !ok {
		return nil, false
	}
	// Capacities come from the bytes left, never from a count alone: each
	// group and each topic takes at least two bytes.
	groups = make([][]string, 0, min(nGroups, len(b)/2))
	for range nGroups {
		nTopics, ok := uvarint(maxGroupTopics)
		if !ok || nTopics == 0 {
			return nil, false
		}
		g := make([]string, 0, min(nTopics, len(b)/2))
		for range nTopics {
			n, ok := uvarint(maxTopicLen)
			if !ok || n == 0 || n > len(b) {
				return nil, false
			}
			g = append(g, string(b[:n]))
			b = b[n:]
		}
		groups = append(groups, g)
	}
	if len(b) != 0 {
		return nil, false
	}
	return groups, true
}
